"""Pure matching rules for stores that evaluate in Python (the in-memory store).

Filters compare *stored* (tagged-JSON) values with JSON semantics, exactly as the
Postgres store's SQL does on JSONB: numbers compare by value (``1 == 1.0``), booleans
are not numbers, objects compare key by key, arrays element by element. Order
operators only match stored values of the operand's kind (number or string; strings
by code point, Postgres' ``COLLATE "C"``). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.store._ops import Condition
from engine.store.base import MatchCondition
from engine.store.base._types import WILDCARD

__all__ = (
    "json_equal",
    "matches_filter",
    "namespace_matches",
    "query_score",
)

_MISSING = object()


def matches_filter(value: Mapping[str, Any], conditions: Sequence[Condition]) -> bool:
    """Whether an encoded value satisfies every condition."""
    return all(_holds(value.get(c.key, _MISSING), c) for c in conditions)


def _holds(stored: Any, condition: Condition) -> bool:
    op, operand = condition.op, condition.operand
    if op == "$eq":
        return stored is not _MISSING and json_equal(stored, operand)
    if op == "$ne":
        return stored is _MISSING or not json_equal(stored, operand)
    if _is_number(operand):
        if not _is_number(stored):
            return False
    elif not isinstance(stored, str):
        return False
    if op == "$gt":
        return bool(stored > operand)
    if op == "$gte":
        return bool(stored >= operand)
    if op == "$lt":
        return bool(stored < operand)
    return bool(stored <= operand)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_equal(left: Any, right: Any) -> bool:
    """Equality of two JSON-ready values with JSONB's rules (bools are not numbers)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if _is_number(left) or _is_number(right):
        return _is_number(left) and _is_number(right) and left == right
    if isinstance(left, dict):
        return (
            isinstance(right, dict)
            and left.keys() == right.keys()
            and all(json_equal(v, right[k]) for k, v in left.items())
        )
    if isinstance(left, list):
        return (
            isinstance(right, list)
            and len(left) == len(right)
            and all(json_equal(a, b) for a, b in zip(left, right, strict=True))
        )
    return type(left) is type(right) and bool(left == right)


def query_score(text: str, terms: Sequence[str]) -> float:
    """Fraction of ``terms`` found in ``text`` (both lower-cased); 0.0 without terms."""
    if not terms:
        return 0.0
    found = sum(1 for term in terms if term in text)
    return found / len(terms)


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """Whether a namespace satisfies a prefix or suffix condition (``"*"`` = any label)."""
    path = condition.path
    if not path:
        return True
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        labels = namespace[: len(path)]
    else:
        labels = namespace[-len(path) :]
    return all(p in (WILDCARD, label) for p, label in zip(path, labels, strict=True))

"""Validated, normalized forms of the store operations: what backends execute.

Every backend turns its batch into plans with :func:`prepare_ops` *before* touching
storage, so an invalid op fails the whole batch with nothing applied, and every backend
rejects exactly the same input with the same message. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

import orjson

from engine._internal._numbers import is_positive_number
from engine.checkpoint.serde.jsonplus import TAG, JsonPlusSerializer
from engine.errors import SerializationError
from engine.store.base import (
    GetOp,
    InvalidStoreInputError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
    validate_namespace_labels,
)

__all__ = (
    "OPERATORS",
    "Condition",
    "GetPlan",
    "ListPlan",
    "Operator",
    "Plan",
    "PutPlan",
    "SearchPlan",
    "compile_filter",
    "encode_value",
    "prepare_ops",
    "query_terms",
    "to_json",
)

Operator = Literal["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]
OPERATORS: tuple[Operator, ...] = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
ORDER_OPERATORS = frozenset({"$gt", "$gte", "$lt", "$lte"})

SERDE = JsonPlusSerializer()
"""Encodes values and filter operands to JSON-ready data; decodes what was stored."""

_WORD = re.compile(r"\w+")
_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
"""An escaped NUL in JSON text (not a literal backslash followed by "u0000")."""


class Condition(NamedTuple):
    """One filter condition on a top-level value key."""

    key: str
    op: Operator
    operand: Any
    """JSON-ready (tagged-JSON encoded); a number or a string for order operators."""


class GetPlan(NamedTuple):
    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool


class PutPlan(NamedTuple):
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    """Encoded value (JSON-ready), or None to delete."""
    text: str
    """The value's JSON text ("" for deletes)."""
    ttl: float | None
    """Minutes."""
    index: Literal[False] | tuple[str, ...] | None = None  # type: ignore[assignment]
    """Paths to embed: None for the store's fields, False for none."""


class SearchPlan(NamedTuple):
    namespace_prefix: tuple[str, ...]
    conditions: tuple[Condition, ...]
    terms: tuple[str, ...] | None
    """Lower-cased distinct query words; None when there is no query."""
    limit: int
    offset: int
    refresh_ttl: bool
    query: str | None = None
    """The query text (None for no query), for stores that embed it."""


class ListPlan(NamedTuple):
    conditions: tuple[MatchCondition, ...]
    max_depth: int | None
    limit: int
    offset: int


Plan = GetPlan | PutPlan | SearchPlan | ListPlan


def prepare_ops(ops: Iterable[Op]) -> list[Plan]:
    """Validate and normalize every op of a batch.

    Raises:
        InvalidNamespaceError, InvalidStoreInputError, SerializationError: the first
            invalid op, before anything is executed.
    """
    return [_prepare(op) for op in ops]


def _prepare(op: Op) -> Plan:
    if isinstance(op, GetOp):
        namespace = validate_namespace_labels(op.namespace)
        return GetPlan(namespace, _key(op.key), bool(op.refresh_ttl))
    if isinstance(op, PutOp):
        namespace = validate_namespace_labels(op.namespace)
        key = _key(op.key)
        index = _index(op.index)
        if op.value is None:
            return PutPlan(namespace, key, None, "", None)
        value, text = encode_value(op.value, namespace, key)
        return PutPlan(namespace, key, value, text, _ttl(op.ttl), index)
    if isinstance(op, SearchOp):
        prefix = validate_namespace_labels(
            op.namespace_prefix, what="namespace prefix", allow_empty=True
        )
        terms = query_terms(op.query)
        return SearchPlan(
            prefix,
            compile_filter(op.filter),
            terms,
            _count(op.limit, "limit"),
            _count(op.offset, "offset"),
            bool(op.refresh_ttl),
            op.query if terms is not None else None,
        )
    if isinstance(op, ListNamespacesOp):
        return ListPlan(
            _match_conditions(op.match_conditions),
            _max_depth(op.max_depth),
            _count(op.limit, "limit"),
            _count(op.offset, "offset"),
        )
    raise InvalidStoreInputError(
        f"Unknown store operation {op!r}: expected GetOp, PutOp, SearchOp or "
        "ListNamespacesOp."
    )


# -- values ------------------------------------------------------------------------------


def encode_value(
    value: object, namespace: tuple[str, ...], key: str
) -> tuple[dict[str, Any], str]:
    """The JSON-ready (tagged) form of an item's value, freshly built, and its JSON text.

    Raises:
        InvalidStoreInputError: not a dict, a non-string or reserved top-level key,
            or a NUL character (Postgres JSONB cannot hold one).
        SerializationError: a field cannot be stored; the message names it.
    """
    where = f"item {key!r} in namespace {namespace!r}"
    if not isinstance(value, Mapping):
        hint = (
            " Convert it first, e.g. model.model_dump(), or wrap it: {'data': value}."
            if hasattr(value, "model_dump") or hasattr(value, "__dataclass_fields__")
            else ""
        )
        raise InvalidStoreInputError(
            f"Store values must be dicts; got {type(value).__name__} for {where}.{hint}"
        )
    for field in value:
        if not isinstance(field, str):
            raise InvalidStoreInputError(
                f"Top-level keys of store values must be strings; got {field!r} "
                f"({type(field).__name__}) in {where}."
            )
        if field == TAG:
            raise InvalidStoreInputError(
                f"The top-level key {TAG!r} is reserved by the serializer ({where})."
            )
    plain = dict(value)
    try:
        encoded, raw = to_json(plain)
    except SerializationError as exc:
        field = next((f for f, v in plain.items() if not _storable(v)), None)
        what = f"field {field!r} of {where}" if field is not None else where
        raise SerializationError(f"Cannot store {what}: {exc}") from exc
    if _NUL.search(raw):
        raise InvalidStoreInputError(
            f"Store values cannot contain NUL characters ('\\x00'), found in {where}."
        )
    return encoded, raw.decode()


def to_json(value: Any) -> tuple[Any, bytes]:
    """``value`` in tagged-JSON form, as fresh objects, and as JSON bytes.

    Goes through ``dumps`` (the serializer's stable surface, which also tags ints
    beyond 64 bits) and parses the result, so nothing returned aliases ``value``.
    """
    raw = SERDE.dumps(value)
    return orjson.loads(raw), raw


def _storable(value: Any) -> bool:
    try:
        SERDE.dumps(value)
    except SerializationError:
        return False
    return True


# -- filters and queries -------------------------------------------------------------------


def compile_filter(filter: Mapping[str, Any] | None) -> tuple[Condition, ...]:
    """Turn a ``filter=`` mapping into conditions with encoded operands.

    Raises:
        InvalidStoreInputError: not a mapping, a bad key, an unknown operator, an
            operator dict mixed with plain keys, or an order operand that is not a
            finite number or a string.
        SerializationError: an operand cannot be encoded.
    """
    if filter is None:
        return ()
    if not isinstance(filter, Mapping):
        raise InvalidStoreInputError(
            f"filter must be a dict of value key -> value, got {type(filter).__name__}."
        )
    conditions: list[Condition] = []
    for field, spec in filter.items():
        if not isinstance(field, str) or not field:
            raise InvalidStoreInputError(
                f"filter keys must be non-empty strings (top-level value keys), got {field!r}."
            )
        if isinstance(spec, Mapping) and any(
            isinstance(k, str) and k.startswith("$") for k in spec
        ):
            conditions.extend(_operator_conditions(field, spec))
        else:
            conditions.append(Condition(field, "$eq", _operand(field, spec)))
    return tuple(conditions)


def _operator_conditions(field: str, spec: Mapping[str, Any]) -> list[Condition]:
    conditions: list[Condition] = []
    for name, operand in spec.items():
        if name not in OPERATORS:
            supported = ", ".join(OPERATORS)
            if isinstance(name, str) and name.startswith("$"):
                problem = f"unknown operator {name!r}"
            else:
                problem = f"{name!r} mixed with operators"
            raise InvalidStoreInputError(
                f"Invalid filter for {field!r}: {problem}. Supported operators: "
                f"{supported}; to match a nested object exactly, use no '$' keys."
            )
        op: Operator = name
        if op in ORDER_OPERATORS:
            number = isinstance(operand, (int, float)) and not isinstance(operand, bool)
            if not (number and math.isfinite(operand)) and not isinstance(operand, str):
                raise InvalidStoreInputError(
                    f"Invalid filter for {field!r}: {op} needs a finite number or a "
                    f"string, got {type(operand).__name__} {operand!r}."
                )
            conditions.append(Condition(field, op, operand))
        else:
            conditions.append(Condition(field, op, _operand(field, operand)))
    return conditions


def _operand(field: str, operand: Any) -> Any:
    try:
        return to_json(operand)[0]
    except SerializationError as exc:
        raise SerializationError(f"Invalid filter for {field!r}: {exc}") from exc


def query_terms(query: str | None) -> tuple[str, ...] | None:
    """Distinct lower-cased words of a query; None for no query (``None`` or ``""``).

    A query without any word characters gives ``()``: it matches nothing.
    """
    if query is None or query == "":
        return None
    if not isinstance(query, str):
        raise InvalidStoreInputError(
            f"query must be a string, got {type(query).__name__}."
        )
    return tuple(dict.fromkeys(_WORD.findall(query.lower())))


# -- small checks ----------------------------------------------------------------------------


def _key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidStoreInputError(
            f"Item keys must be non-empty strings, got {key!r}."
        )
    if "\x00" in key:
        raise InvalidStoreInputError(f"Item keys cannot contain NUL, got {key!r}.")
    return key


def _index(index: object) -> Literal[False] | tuple[str, ...] | None:
    if index is None or index is False:
        return index
    if isinstance(index, (list, tuple)) and all(isinstance(p, str) for p in index):
        return tuple(index)
    raise InvalidStoreInputError(
        f"index must be None, False or a list of field paths such as "
        f"['text', 'items[*].title'], got {index!r}."
    )


def _ttl(ttl: object) -> float | None:
    if ttl is None:
        return None
    if not is_positive_number(ttl):
        raise InvalidStoreInputError(
            f"ttl must be a positive number of minutes or None, got {ttl!r}."
        )
    return float(ttl)


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidStoreInputError(f"{name} must be an integer >= 0, got {value!r}.")
    return value


def _max_depth(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidStoreInputError(
            f"max_depth must be an integer >= 1 or None, got {value!r}."
        )
    return value


def _match_conditions(
    conditions: Iterable[MatchCondition] | None,
) -> tuple[MatchCondition, ...]:
    checked: list[MatchCondition] = []
    for condition in conditions or ():
        if not isinstance(condition, MatchCondition):
            raise InvalidStoreInputError(
                f"match_conditions must hold MatchCondition values, got {condition!r}."
            )
        if condition.match_type not in ("prefix", "suffix"):
            raise InvalidStoreInputError(
                f"Unknown match_type {condition.match_type!r}: use 'prefix' or 'suffix'."
            )
        path = validate_namespace_labels(
            condition.path, what=f"{condition.match_type} path", allow_empty=True
        )
        checked.append(MatchCondition(condition.match_type, path))
    return tuple(checked)

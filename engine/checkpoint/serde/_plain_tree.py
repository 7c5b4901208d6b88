"""Is a large value plain JSON already? Checked a level at a time, in C loops.

The serializer's walk (``jsonplus._Encoder``) visits a value node by node in
Python to find what needs a tag. Most large state values (lists of records,
documents) need none, and for them :func:`is_plain_tree` answers in a few
passes per level of nesting that run in C (``set(map(type, ...))``,
``chain.from_iterable``), several times faster than the walk. When it answers
False the walk runs as before, so the stored bytes never depend on which path
was taken: a plain tree is exactly what the walk would return unchanged.
"""

from __future__ import annotations

import math
from itertools import chain, compress
from typing import Any

__all__ = ("MIN_ITEMS", "is_plain_tree")

MIN_ITEMS = 32
"""Containers shorter than this are left to the walk (cheaper there)."""

_MAX_LEVELS = 64
"""Deeper values are left to the walk; this also ends a container that holds itself."""

_CONTAINERS = frozenset({dict, list})
_STR = frozenset({str})
_is_container = _CONTAINERS.__contains__
_is_dict = frozenset({dict}).__contains__
_is_list = frozenset({list}).__contains__
_is_float = frozenset({float}).__contains__


def _pick(items: list[Any], test: Any) -> list[Any]:
    """The items whose exact type passes ``test`` (a C loop, no Python frame per item)."""
    return list(compress(items, map(test, map(type, items))))


def is_plain_tree(
    root: dict[Any, Any] | list[Any], leaves: frozenset[Any], tag: str
) -> bool:
    """True when ``root`` holds only dicts with ``str`` keys (none named ``tag``),
    lists, finite floats and values whose exact type is in ``leaves``."""
    allowed = leaves | _CONTAINERS | {float}
    level: list[Any] = [root]
    for _ in range(_MAX_LEVELS):
        kinds = set(map(type, level))
        if not kinds <= allowed:
            return False
        if float in kinds and not all(map(math.isfinite, _pick(level, _is_float))):
            return False
        if not kinds & _CONTAINERS:
            return True
        containers = level if len(kinds) == 1 else _pick(level, _is_container)
        lists = containers if dict not in kinds else None
        if dict in kinds:
            dicts = containers if list not in kinds else _pick(containers, _is_dict)
            keys = set().union(*dicts)
            if tag in keys or not set(map(type, keys)) <= _STR:
                return False
            level = list(chain.from_iterable(map(dict.values, dicts)))
            if list in kinds:
                level.extend(chain.from_iterable(_pick(containers, _is_list)))
        else:
            level = list(chain.from_iterable(lists or ()))
    return False

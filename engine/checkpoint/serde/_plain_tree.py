"""Is a large value plain JSON already? Checked a level at a time, in C loops.

The serializer's walk (``jsonplus._Encoder``) visits a value node by node in
Python to find what needs a tag. Most large state values (lists of records,
documents) need none, and for them :func:`is_plain_tree` answers in a few
passes per level of nesting that run in C: the types of a level's items at once
(``set(map(type, ...))``), the keys of its dicts at once (``set().union``), and
the next level in one call (``gc.get_referents``, which hands back a list's
items and a dict's values, and its keys too when they are not all exact
``str``, in C), several times faster than the walk. A level is taken
``_CHUNK`` items at a time, depth first, so the lists it makes stay small
however large the value (a whole level of 5,000 records' fields was ~300 KB
alive at once). When it answers False the walk runs as before, so the stored
bytes never depend on which path was taken: a plain tree is exactly what the
walk would return unchanged.
"""

from __future__ import annotations

import math
from gc import get_referents
from itertools import compress
from typing import Any

__all__ = ("MIN_ITEMS", "is_plain_tree")

MIN_ITEMS = 32
"""Containers shorter than this are left to the walk (cheaper there)."""

_MAX_LEVELS = 64
"""Deeper values are left to the walk; this also ends a container that holds itself."""

_CHUNK = 2048
"""Items of a level checked at a time (see ``is_plain_tree``)."""

_CONTAINERS = frozenset({dict, list})
_STR = frozenset({str})
_is_dict = frozenset({dict}).__contains__
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
    # Depth first over chunks of a level: what waits is at most a chunk's
    # contents per level of nesting, never a whole level of a large value.
    pending: list[tuple[list[Any], int, int]] = [([root], 0, 0)]
    while pending:
        items, start, depth = pending.pop()
        if start + _CHUNK < len(items):
            pending.append((items, start + _CHUNK, depth))
            chunk = items[start : start + _CHUNK]
        else:
            chunk = items if start == 0 else items[start:]
        kinds = set(map(type, chunk))
        if not kinds <= allowed:
            return False
        if float in kinds and not all(map(math.isfinite, _pick(chunk, _is_float))):
            return False
        if not kinds & _CONTAINERS:
            continue
        if depth + 1 >= _MAX_LEVELS:  # its contents would be one level too deep
            return False
        if dict in kinds:
            dicts = chunk if len(kinds) == 1 else _pick(chunk, _is_dict)
            keys = set().union(*dicts)
            if tag in keys or not set(map(type, keys)) <= _STR:
                return False
        # Exact-str keys (just checked) are not handed back with the values, and
        # were they, they are leaves: the next level is the containers' contents.
        pending.append((get_referents(*chunk), 0, depth + 1))
    return True

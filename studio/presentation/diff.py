"""Reducer-aware state diffs and value summaries. Pure: no Django, no engine, no I/O.

A state diff knows how each key merges writes (its *kind*), because the same
change means different things under different reducers:

- ``"append"`` (``operator.add`` on lists): the items appended;
- ``"messages"`` (``add_messages``): messages added, replaced or removed, by id;
- ``"reducer"`` (any other reducer) and ``"value"`` (last value wins): old -> new,
  recursing into dicts and lists so a change deep inside shows with its path
  (``evidence.ab12.claim``, ``items.0.qty``).

Values are first made plain (:func:`plain`: dicts, lists, str, numbers, bool,
None), so models, dataclasses, tuples, sets and datetimes compare and print
like JSON. :func:`summarize` turns a value into a short one-line text plus the
full text when it is too long to show inline.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = (
    "MISSING",
    "Change",
    "Kind",
    "Op",
    "PathPart",
    "ValueText",
    "diff_state",
    "diff_values",
    "keys_of",
    "message_id",
    "plain",
    "summarize",
)

Kind = Literal["value", "append", "messages", "reducer"]
"""How a state key merges writes."""

Op = Literal[
    "added",
    "removed",
    "changed",
    "appended",
    "message_added",
    "message_replaced",
    "message_removed",
]
"""What happened at a path."""

MAX_DEPTH = 8
"""Below this depth a changed value is shown whole instead of recursed into."""
MAX_CHANGES = 500
"""A diff stops after this many changes (``diff_state`` reports the cut)."""
_PLAIN_DEPTH = 40


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()
"""Marks "no value" (a key absent on one side), distinct from ``None``."""


PathPart = str | int | tuple[str, str]
"""One step of a change's path: a dict key, a list index, or ``("id", message id)``."""


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two states."""

    path: str
    """Dotted path from the state key (``checks``, ``evidence.ab12.claim``,
    ``messages[id=m1]``)."""
    op: Op
    old: Any = MISSING
    """The value before (MISSING for added/appended)."""
    new: Any = MISSING
    """The value after (MISSING for removed); for ``appended`` the list of new items."""
    parts: tuple[PathPart, ...] = ()
    """The same path, unambiguous (a key may contain dots): ``("items", 0, "qty")``."""

    @property
    def key(self) -> str:
        """The top-level state key this change belongs to."""
        for i, char in enumerate(self.path):
            if char in ".[":
                return self.path[:i]
        return self.path


@dataclass(frozen=True, slots=True)
class ValueText:
    """A value as text: ``short`` fits on one line; ``full`` is set when it does not."""

    short: str
    full: str = ""

    @property
    def long(self) -> bool:
        return bool(self.full)

    @property
    def openable(self) -> bool:
        """Worth opening whole (as pretty JSON, to read or copy): long, or an object
        or a list with something in it."""
        return self.long or (self.short[:1] in "{[" and self.short not in ("{}", "[]"))


# -- plain values ------------------------------------------------------------------


def plain(value: Any, _depth: int = 0) -> Any:
    """``value`` as JSON-like data: dict (str keys), list, str, int, float, bool, None.

    Pydantic models and dataclasses become dicts, tuples and sets lists,
    datetimes ISO text, bytes a size note; anything else its ``repr``.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if _depth > _PLAIN_DEPTH:
        return repr(value)
    depth = _depth + 1
    if isinstance(value, Mapping):
        return {str(k): plain(v, depth) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, depth) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v, depth) for v in value), key=repr)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return plain(dump(mode="json"), depth)
        except Exception:  # a model that cannot dump itself is shown as its repr
            return repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name), depth)
            for f in dataclasses.fields(value)
        }
    return repr(value)


def message_id(message: Any) -> str | None:
    """The id of a chat message (a dict's ``id`` or an object's ``.id``), if any."""
    if isinstance(message, Mapping):
        found = message.get("id")
    else:
        found = getattr(message, "id", None)
    return None if found in (None, "") else str(found)


# -- diffs ---------------------------------------------------------------------------


def diff_state(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    kinds: Mapping[str, Kind] | None = None,
    *,
    max_changes: int = MAX_CHANGES,
) -> tuple[list[Change], bool]:
    """Changes from ``old`` to ``new``, key by key, each by its reducer kind.

    Args:
        old: the state before (None for the first checkpoint: everything is added).
        new: the state after.
        kinds: key -> kind; keys not listed are ``"value"``.
        max_changes: stop after this many changes.

    Returns:
        The changes (in key order of ``new``, then removed keys) and whether the
        list was cut at ``max_changes``.
    """
    kinds = kinds or {}
    before = plain(dict(old or {}))
    after = plain(dict(new))
    keys = list(after) + [k for k in before if k not in after]
    changes: list[Change] = []
    for key in keys:
        for change in diff_values(
            key,
            before.get(key, MISSING),
            after.get(key, MISSING),
            kinds.get(key, "value"),
            parts=(key,),
        ):
            if len(changes) >= max_changes:
                return changes, True
            changes.append(change)
    return changes, False


def diff_values(
    path: str,
    old: Any,
    new: Any,
    kind: Kind = "value",
    *,
    parts: tuple[PathPart, ...] | None = None,
) -> Iterator[Change]:
    """Changes at ``path`` from ``old`` to ``new`` (plain values; MISSING = absent).

    ``parts``: the path as parts (default: ``(path,)``, one key).
    """
    at = (path,) if parts is None else parts
    if old is MISSING and new is MISSING:
        return
    if kind == "messages" and _is_list(old, new):
        yield from _diff_messages(path, at, old or [], new or [])
        return
    if old is MISSING:
        if kind == "append" and isinstance(new, list):
            if new:
                yield Change(path, "appended", new=new, parts=at)
            return
        yield Change(path, "added", new=new, parts=at)
        return
    if new is MISSING:
        yield Change(path, "removed", old=old, parts=at)
        return
    if _extends(kind, old, new):
        if len(new) > len(old):
            yield Change(path, "appended", new=new[len(old) :], parts=at)
        return
    yield from _diff_nested(path, at, old, new, 0)


def _extends(kind: Kind, old: Any, new: Any) -> bool:
    """An append reducer's list that only grew at the end."""
    return (
        kind == "append"
        and isinstance(old, list)
        and isinstance(new, list)
        and new[: len(old)] == old
    )


def _is_list(old: Any, new: Any) -> bool:
    return all(v is MISSING or v is None or isinstance(v, list) for v in (old, new))


def _diff_nested(
    path: str, at: tuple[PathPart, ...], old: Any, new: Any, depth: int
) -> Iterator[Change]:
    if old == new and type(old) is type(new):
        return
    if depth >= MAX_DEPTH:
        yield Change(path, "changed", old=old, new=new, parts=at)
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(new) + [k for k in old if k not in new]:
            sub, sub_at = f"{path}.{key}", (*at, key)
            if key not in old:
                yield Change(sub, "added", new=new[key], parts=sub_at)
            elif key not in new:
                yield Change(sub, "removed", old=old[key], parts=sub_at)
            else:
                yield from _diff_nested(sub, sub_at, old[key], new[key], depth + 1)
        return
    if isinstance(old, list) and isinstance(new, list):
        yield from _diff_list(path, at, old, new, depth)
        return
    yield Change(path, "changed", old=old, new=new, parts=at)


def _diff_list(
    path: str, at: tuple[PathPart, ...], old: list[Any], new: list[Any], depth: int
) -> Iterator[Change]:
    common = min(len(old), len(new))
    if len(new) > len(old) and new[:common] == old:
        yield Change(path, "appended", new=new[common:], parts=at)
        return
    if (
        len(new) != len(old)
        and common
        and _similarity(old[:common], new[:common]) < 0.5
    ):
        # reordered or rewritten
        yield Change(path, "changed", old=old, new=new, parts=at)
        return
    for i in range(common):
        yield from _diff_nested(f"{path}.{i}", (*at, i), old[i], new[i], depth + 1)
    for i in range(common, len(new)):
        yield Change(f"{path}.{i}", "added", new=new[i], parts=(*at, i))
    for i in range(common, len(old)):
        yield Change(f"{path}.{i}", "removed", old=old[i], parts=(*at, i))


def _similarity(old: list[Any], new: list[Any]) -> float:
    same = sum(1 for a, b in zip(old, new, strict=True) if a == b)
    return same / len(old)


def _diff_messages(
    path: str, at: tuple[PathPart, ...], old: list[Any], new: list[Any]
) -> Iterator[Change]:
    old_ids = [message_id(m) for m in old]
    new_ids = [message_id(m) for m in new]
    if None in old_ids or None in new_ids:
        # messages without ids can only be compared by position
        yield from _diff_list(path, at, old, new, 0)
        return
    before = dict(zip(old_ids, old, strict=True))
    after = dict(zip(new_ids, new, strict=True))
    for mid, message in after.items():
        sub, sub_at = f"{path}[id={mid}]", (*at, ("id", str(mid)))
        if mid not in before:
            yield Change(sub, "message_added", new=message, parts=sub_at)
        elif before[mid] != message:
            yield Change(
                sub, "message_replaced", old=before[mid], new=message, parts=sub_at
            )
    for mid, message in before.items():
        if mid not in after:
            yield Change(
                f"{path}[id={mid}]",
                "message_removed",
                old=message,
                parts=(*at, ("id", str(mid))),
            )


# -- text ---------------------------------------------------------------------------


def summarize(value: Any, limit: int = 80) -> ValueText:
    """A one-line text of ``value`` (JSON-ish), and the full pretty text when it is long.

    Strings that fit show as JSON strings (quoted), so ``"5"`` and ``5`` differ.
    A value whose one-line text is longer than ``limit``, or a string with line
    breaks, gets a cut ``short`` ending in "…" and the whole text in ``full``.
    """
    if value is MISSING:
        return ValueText("—")
    value = plain(value)
    line = _dumps(value, indent=None)
    multiline = isinstance(value, str) and "\n" in value
    if len(line) <= limit and not multiline:
        return ValueText(line)
    full = value if isinstance(value, str) else _dumps(value, indent=2)
    flat = " ".join(line.split())
    return ValueText(_cut(flat, limit), full)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 1)].rstrip() + "…"


def _dumps(value: Any, indent: int | None) -> str:
    separators = (",", ": ") if indent else (", ", ": ")
    return json.dumps(
        value, ensure_ascii=False, indent=indent, separators=separators, default=repr
    )


def keys_of(changes: Iterable[Change]) -> list[str]:
    """The top-level keys touched by ``changes``, in order, once each."""
    seen: dict[str, None] = {}
    for change in changes:
        seen.setdefault(change.key, None)
    return list(seen)

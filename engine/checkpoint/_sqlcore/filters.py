"""Metadata filters of ``list()`` and ``list_summaries()`` compiled to SQL.

The semantics are :func:`engine.checkpoint.base.metadata_matches`: every filter
key must be in the metadata with a value that is ``==`` to the wanted one
(Python equality: ``1 == 1.0 == True``, a missing key equals ``None``, dicts
compare without regard to key order). The SQL condition is built from tests on
the stored JSON at a path (see ``SqlDialect.json_test``) and is exact for plain
JSON filter values (strings, numbers, booleans, None, and dicts and lists of
them): a row it drops cannot match, and with plain stored metadata a row it
keeps does match. Where SQL cannot decide, it keeps the row:

* a stored value the serializer tagged (``{"__t": ...}``: an enum, a tuple, a
  big int...) may equal a plain value in Python (``StrEnum("a") == "a"``), so
  it is kept wherever it sits;
* filter values that are not plain JSON (tuples, sets, datetimes, enums...)
  and keys or strings a dialect cannot express (NUL characters) add no
  condition;
* rows whose metadata the database cannot read as JSON (another serializer,
  a corrupt row) are kept.

The savers re-check every row they return in Python, so the result is exact
either way and the SQL condition only saves reading rows that cannot match
(and lets ``LIMIT`` count the right rows).

Pure: no I/O here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.checkpoint._sqlcore.dialect import SqlDialect

__all__ = ("metadata_condition",)

_TAG = "__t"
"""The serializer's type tag key (``engine.checkpoint.serde.jsonplus.TAG``)."""

_INT64 = (-(2**63), 2**63 - 1)

Cond = tuple[str, tuple[Any, ...]]
Path = tuple[str | int, ...]


def metadata_condition(d: SqlDialect, filter: Mapping[str, Any]) -> Cond | None:
    """A SQL condition keeping every row whose metadata may match ``filter``;
    None when nothing can be decided in SQL."""
    parts = [
        cond
        for key, value in filter.items()
        if type(key) is str
        and (cond := _condition(d, (key,), value, top=True)) is not None
    ]
    if not parts:
        return None
    body, params = _all(parts)
    return (
        f"(CASE WHEN {d.json_inspectable()} THEN {body} ELSE {_TRUE} END)",
        params,
    )


_TRUE = "1 = 1"


def _condition(d: SqlDialect, path: Path, value: Any, *, top: bool) -> Cond | None:
    """Rows whose value at ``path`` may equal ``value``; None: no condition."""
    at = d.json_path(path)
    if at is None:
        return None
    tag_at = d.json_path((*path, _TAG))
    if value is None:
        # a missing key equals None only at the top (metadata.get); nested, the
        # key count of the enclosing object already requires the key
        return d.json_test("absent_or_null" if top else "null", at, tag_at)
    kind = type(value)
    tests: list[Cond] = []
    if kind is str:
        if "\x00" in value:
            return None
        tests.append(d.json_test("string", at, tag_at, value))
    elif kind is bool or kind is int or kind is float:
        if kind is float and not math.isfinite(value):
            return None  # stored tagged; nan equals nothing
        if kind is not bool and not _INT64[0] <= value <= _INT64[1]:
            return None
        tests.append(
            d.json_test("number", at, tag_at, int(value) if kind is bool else value)
        )
        if value == 0 or value == 1:  # True == 1 == 1.0, False == 0
            tests.append(d.json_test("bool", at, tag_at, bool(value)))
    elif kind is dict:
        if not all(type(k) is str for k in value) or _TAG in value:
            return None
        inner = [
            cond
            for k, v in value.items()
            if (cond := _condition(d, (*path, k), v, top=False)) is not None
        ]
        tests.append(_all([d.json_test("object", at, tag_at, len(value)), *inner]))
    elif kind is list:
        inner = [
            cond
            for i, v in enumerate(value)
            if (cond := _condition(d, (*path, i), v, top=False)) is not None
        ]
        tests.append(_all([d.json_test("array", at, tag_at, len(value)), *inner]))
    else:
        return None
    tests.append(d.json_test("tagged", at, tag_at))
    return _any(tests)


def _all(conds: Sequence[Cond]) -> Cond:
    if len(conds) == 1:
        return conds[0]
    return (
        "(" + " AND ".join(sql for sql, _ in conds) + ")",
        tuple(p for _, params in conds for p in params),
    )


def _any(conds: Sequence[Cond]) -> Cond:
    if len(conds) == 1:
        return conds[0]
    return (
        "(" + " OR ".join(sql for sql, _ in conds) + ")",
        tuple(p for _, params in conds for p in params),
    )

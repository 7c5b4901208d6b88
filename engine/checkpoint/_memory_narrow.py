"""Narrow checkpoint structures for the in-memory saver: one short JSON array.

A checkpoint the engine's loop makes has the keys ``v, id, ts, channel_values,
channel_versions, versions_seen, updated_channels`` and, for a graph with a
schema version, ``schema_version``, in that order (``channel_deltas`` may follow:
a hint, never kept). :class:`~engine.checkpoint.memory.InMemorySaver` keeps the
structure of such a checkpoint (its id is the row's key, its creation time the
row's fourth item, its values are kept per version) as the JSON array

    [v, channel_versions, versions_seen, updated_channels, [names of None values]]

with ``schema_version`` as a sixth item when the checkpoint has one, so the key
names are not repeated in every row; and the run of zeros that opens a version
string of the default form (``"000000000006.dc541d97"``: twelve digits, zero
padded) is written as one byte JSON never holds unescaped: ``"0000000000`` (a
quote and ten zeros: counters below 100) as ``0x01``, else ``"0000000`` (seven:
below 100,000) as ``0x02``, so the reverse replacement is exact whatever the
strings are. For a four-channel loop that is ~230 bytes a step instead of ~390
(the dict as JSON). A structure of
another shape (other keys, another order) is kept as the JSON object it is.
"""

from __future__ import annotations

from typing import Any

import orjson

from engine.checkpoint._blobs import load_stored
from engine.checkpoint.serde.base import SerializerProtocol
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import SerializationError

__all__ = ("dumps_narrow", "is_narrow", "loads_narrow")

_SHORTENED = ((b'"0000000000', b"\x01"), (b'"0000000', b"\x02"))
"""Runs of zeros and the byte each is written as, longest first."""
(_ZEROS_10, _MARK_10), (_ZEROS_7, _MARK_7) = _SHORTENED

_UNKNOWN: Any = object()
_DEFAULT_PLAIN = JsonPlusSerializer.dumps_typed_plain

_SKIPPED = frozenset({"channel_values", "channel_deltas", "id", "ts"})
_KEYS = ("v", "channel_versions", "versions_seen", "updated_channels")
_WITH_SCHEMA = (*_KEYS, "schema_version")

_LAYOUTS: dict[tuple[str, ...], bool | None] = {}
"""Per checkpoint key order: whether it is the loop's with a schema version
(True), without one (False), or another (None). A process sees a handful."""


def _with_schema(keys: tuple[str, ...]) -> bool | None:
    found: bool | None = _LAYOUTS.get(keys, _UNKNOWN)
    if found is not _UNKNOWN:
        return found
    kept = tuple(k for k in keys if k not in _SKIPPED)
    found = True if kept == _WITH_SCHEMA else False if kept == _KEYS else None
    if len(_LAYOUTS) >= 64:  # a caller inventing keys: bounded anyway
        _LAYOUTS.clear()
    _LAYOUTS[keys] = found
    return found


def dumps_narrow(
    serde: SerializerProtocol, checkpoint: Any, nil: list[str]
) -> bytes | None:
    """The array form of ``checkpoint``'s structure (``nil``: the channels whose
    value is None), or None when the checkpoint has another shape or the
    serializer has no plain JSON form for it."""
    with_schema = _with_schema(tuple(checkpoint))
    if with_schema is None:
        return None
    parts = [
        checkpoint["v"],
        checkpoint["channel_versions"],
        checkpoint["versions_seen"],
        checkpoint["updated_channels"],
        nil,
    ]
    if with_schema:
        parts.append(checkpoint["schema_version"])
    if getattr(type(serde), "dumps_typed_plain", None) is _DEFAULT_PLAIN:
        # the default serializer's plain JSON, written here: its copy of
        # orjson's buffer would be copied again by the replacements below
        try:
            payload = orjson.dumps(parts)
        except TypeError:
            return None
    else:
        plain = getattr(serde, "dumps_typed_plain", None)
        if plain is None:
            return None
        tag, payload = plain(parts)
        if tag != "jsonraw":
            return None
    data: bytes = payload.replace(_ZEROS_10, _MARK_10).replace(_ZEROS_7, _MARK_7)
    return data


def is_narrow(data: bytes) -> bool:
    """Whether kept bytes are the array form (a structure kept whole is an object)."""
    return data[:1] == b"["


def loads_narrow(serde: SerializerProtocol, data: bytes, where: str) -> dict[str, Any]:
    """The structure (without id, time and values) that ``dumps_narrow`` kept."""
    for zeros, mark in _SHORTENED:
        data = data.replace(mark, zeros)
    parts = load_stored(serde, ("jsonraw", data), where)
    if (
        type(parts) is not list
        or len(parts) not in (5, 6)
        or type(parts[4]) is not list
    ):
        raise SerializationError(
            f"Stored {where} is corrupt and cannot be read: not a structure array"
        )
    structure = dict(zip(_KEYS, parts[:4], strict=True))
    if len(parts) == 6:
        structure["schema_version"] = parts[5]
    if parts[4]:
        structure["channel_values"] = dict.fromkeys(parts[4])
    return structure

"""Pure helpers shared by the savers: how a task's pending writes are stored.

A task's writes are stored as one unit: its *regular* writes (every channel but
the special ones) together in one entry at index 0, packed by ``pack_writes``;
each *special* write (``__error__``, ``__interrupt__``, ``__resume__``) in an
entry of its own at its fixed negative index (``WRITES_IDX_MAP``). Saving a
task's writes again keeps the regular ones first saved, as a whole (a retry does
not mix two attempts), and replaces the special ones (a task has one error, one
interrupt list, one resume list). Pending writes come back ordered by task path,
task id, then index: the special writes of a task, then its regular ones in the
order they were written.

A packed entry (type ``WRITES_TAG``, channel ``""``) is one header line of JSON,
``[[channel, size], [channel, size, type], ...]`` (the type is left out when it
is ``json``), then the items' payloads back to back, exactly as the serializer
made them; with the default serializer the whole entry is readable text.
Entries stored one per write (before packing) read the same.

The SQL savers keep the regular writes that ``put_step`` saves together with the
step's checkpoint in that checkpoint's row (``parent_writes``: they belong to its
parent) rather than in a row of their own: ``pack_task_writes`` puts the tasks'
packed entries side by side, after a header line ``[[task_id, task_path, size],
...]``. See ``engine.checkpoint._sqlcore.saves``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from engine.checkpoint.base import WRITES_IDX_MAP
from engine.checkpoint.serde.base import SerializerProtocol
from engine.errors import SerializationError

__all__ = (
    "WRITES_CHANNEL",
    "WRITES_TAG",
    "WriteEntry",
    "encode_task_writes",
    "is_packed",
    "pack_task_writes",
    "pack_writes",
    "unpack_task_writes",
    "unpack_writes",
)

WRITES_TAG = "*w"
"""The ``type`` of an entry holding a task's regular writes (``pack_writes``)."""

WRITES_CHANNEL = ""
"""The ``channel`` of such an entry."""

WriteEntry = tuple[int, str, str, bytes]
"""(index, channel, type, payload) of one stored entry of a task's writes."""


def encode_task_writes(
    serde: SerializerProtocol, writes: Sequence[tuple[str, Any]]
) -> list[WriteEntry]:
    """The entries a task's writes are stored as: the special writes, each at its
    own index, then the regular ones packed in one entry at index 0."""
    entries: list[WriteEntry] = []
    regular: list[tuple[str, str, bytes]] = []
    for channel, value in writes:
        tag, payload = serde.dumps_typed(value)
        idx = WRITES_IDX_MAP.get(channel)
        if idx is None:
            regular.append((channel, tag, payload))
        else:
            entries.append((idx, channel, tag, payload))
    if regular:
        entries.append((0, WRITES_CHANNEL, WRITES_TAG, pack_writes(regular)))
    return entries


def pack_writes(items: Sequence[tuple[str, str, bytes]]) -> bytes:
    """One entry holding ``(channel, type, payload)`` items (see the module doc)."""
    header = [
        [channel, len(payload)] if tag == "json" else [channel, len(payload), tag]
        for channel, tag, payload in items
    ]
    return b"".join(
        [orjson.dumps(header), b"\n", *(payload for _, _, payload in items)]
    )


def is_packed(channel: str, tag: str) -> bool:
    """Whether a stored entry is a packed set of regular writes."""
    return tag == WRITES_TAG and channel == WRITES_CHANNEL


def unpack_writes(payload: bytes, what: str = "writes") -> list[tuple[str, str, bytes]]:
    """The ``(channel, type, payload)`` items of a packed entry."""

    def item(fields: Any) -> tuple[tuple[str, str], int]:
        channel, size = fields[0], fields[1]
        tag = fields[2] if len(fields) > 2 else "json"
        if type(channel) is not str or type(tag) is not str:
            raise ValueError(f"bad item {fields!r}")
        return (channel, tag), size

    return [
        (channel, tag, part)
        for (channel, tag), part in _unframe(payload, item, what, "packed writes")
    ]


def pack_task_writes(tasks: Sequence[tuple[str, str, bytes]]) -> bytes:
    """Several tasks' packed regular writes, ``(task_id, task_path, entry)``, as
    one value (see the module doc)."""
    header = [[task_id, path, len(entry)] for task_id, path, entry in tasks]
    return b"".join([orjson.dumps(header), b"\n", *(entry for _, _, entry in tasks)])


def unpack_task_writes(
    payload: bytes, what: str = "writes"
) -> list[tuple[str, str, bytes]]:
    """The ``(task_id, task_path, entry)`` of a ``pack_task_writes`` value."""

    def task(fields: Any) -> tuple[tuple[str, str], int]:
        task_id, path, size = fields
        if type(task_id) is not str or type(path) is not str:
            raise ValueError(f"bad task {fields!r}")
        return (task_id, path), size

    return [
        (task_id, path, entry)
        for (task_id, path), entry in _unframe(payload, task, what, "tasks' writes")
    ]


def _unframe(
    payload: bytes,
    parse: Callable[[Any], tuple[tuple[str, str], int]],
    what: str,
    form: str,
) -> list[tuple[tuple[str, str], bytes]]:
    """The parts of a value made of a JSON header line, one entry per part
    (``parse`` gives its fields and size), then the parts back to back."""
    try:
        end = payload.index(b"\n")
        header = orjson.loads(payload[:end])
        parts: list[tuple[tuple[str, str], bytes]] = []
        at = end + 1
        for entry in header:
            fields, size = parse(entry)
            if type(size) is not int or size < 0 or at + size > len(payload):
                raise ValueError(f"bad size in {entry!r}")
            parts.append((fields, bytes(payload[at : at + size])))
            at += size
        if at != len(payload):
            raise ValueError(f"{len(payload) - at} bytes left over")
    except (ValueError, TypeError, IndexError, orjson.JSONDecodeError) as exc:
        raise SerializationError(
            f"Stored {what} is corrupt and cannot be read "
            f"({form}, {len(payload)} bytes): {exc}"
        ) from exc
    return parts

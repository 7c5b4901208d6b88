"""Pure helpers shared by the savers: channel blobs stored whole or as append deltas.

A channel value is stored once per (thread, namespace, channel, version). When
a list channel only grew since the previous version, the new version is stored
as a *delta*: the appended items plus a reference to the base version. Every
``MAX_CHAIN`` deltas (or when the deltas outweigh the base) a full copy is
stored again, so reading stays cheap while writing scales with change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from engine.checkpoint.serde.base import SerializerProtocol
from engine.errors import SerializationError

__all__ = ("MAX_CHAIN", "BlobRecord", "decode_chain", "encode_blob")

MAX_CHAIN = 64
"""Deltas allowed on top of a full value before a full value is stored again."""


class BlobRecord(NamedTuple):
    """How one channel version is stored."""

    kind: str
    """``full``, ``delta`` or ``empty``."""
    type_tag: str
    payload: bytes
    base_version: str | None = None
    """Delta only: the version this delta extends."""
    start: int | None = None
    """Delta only: the value is ``base_value[:start] + items``."""
    chain: int = 0
    """Deltas between this record and the full value at the root of its chain."""
    acc: int = 0
    """Bytes of all deltas along the chain, this one included."""
    root: int = 0
    """Bytes of the full value at the root of the chain."""


def encode_blob(
    serde: SerializerProtocol,
    value: Any,
    delta: tuple[Any, int] | None,
    base: BlobRecord | None,
) -> BlobRecord:
    """Encode a channel value, as a delta on ``base`` when that keeps reads cheap.

    A delta is used while the chain is at most ``MAX_CHAIN`` long and its deltas
    together weigh no more than the full value at its root; past that a full copy
    is stored, so full copies are rare (amortized) and reads stay bounded.
    """
    if (
        delta is not None
        and base is not None
        and base.kind in ("full", "delta")
        and isinstance(value, list)
        and base.chain < MAX_CHAIN
    ):
        start = delta[1]
        tag, payload = serde.dumps_typed(value[start:])
        acc = base.acc + len(payload)
        if acc <= max(base.root, 4096):
            return BlobRecord(
                "delta",
                tag,
                payload,
                str(delta[0]),
                start,
                base.chain + 1,
                acc,
                base.root,
            )
    tag, payload = serde.dumps_typed(value)
    return BlobRecord("full", tag, payload, None, None, 0, 0, len(payload))


def decode_chain(
    serde: SerializerProtocol,
    version: str,
    lookup: Callable[[str], BlobRecord | None],
) -> Any:
    """The value at ``version``, following delta records back to a full one."""
    deltas: list[BlobRecord] = []
    current: str | None = version
    while current is not None:
        record = lookup(current)
        if record is None:
            raise SerializationError(
                f"Stored channel value at version {current!r} is missing (corrupt checkpoint data)"
            )
        if record.kind == "delta":
            deltas.append(record)
            current = record.base_version
            continue
        if record.kind == "empty":
            value: Any = None
        else:
            value = serde.loads_typed((record.type_tag, record.payload))
        break
    else:  # pragma: no cover - loop exits by break
        value = None
    for record in reversed(deltas):
        if not isinstance(value, list):
            raise SerializationError("Corrupt delta chain: base value is not a list")
        start = record.start or 0
        items = serde.loads_typed((record.type_tag, record.payload))
        value = value[:start] + list(items)
    return value


def _bind(
    lookup: Callable[[str, str], BlobRecord | None], channel: str
) -> Callable[[str], BlobRecord | None]:
    def one(version: str) -> BlobRecord | None:
        return lookup(channel, version)

    return one


def decode_blobs(
    serde: SerializerProtocol,
    versions: Mapping[str, Any],
    lookup: Callable[[str, str], BlobRecord | None],
) -> dict[str, Any]:
    """Channel values of a checkpoint: every channel with a stored, non-empty value."""
    values: dict[str, Any] = {}
    for channel, version in versions.items():
        record = lookup(channel, str(version))
        if record is None or record.kind == "empty":
            continue
        values[channel] = decode_chain(serde, str(version), _bind(lookup, channel))
    return values

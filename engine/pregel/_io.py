"""Pure mapping between the outside world and channels: inputs, commands, outputs, stream chunks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine._internal._constants import INTERRUPT, NO_WRITES, TASKS
from engine._internal._typing import MISSING

__all__ = ("format_chunk", "map_input", "writes_update")

_SPECIAL = frozenset({NO_WRITES, TASKS})


def map_input(input_channels: str | Sequence[str], chunk: Any) -> list[tuple[str, Any]]:
    """Writes that put ``chunk`` into the input channels."""
    if chunk is None:
        return []
    if isinstance(input_channels, str):
        return [(input_channels, chunk)]
    if not isinstance(chunk, Mapping):
        raise TypeError(
            f"Expected input to be a dict with keys {list(input_channels)}, got {chunk!r}"
        )
    return [(k, v) for k, v in chunk.items() if k in input_channels]


def writes_update(
    writes: Sequence[tuple[str, Any]], output_channels: frozenset[str] | set[str]
) -> Any:
    """A task's writes as the ``updates`` stream shows them: ``{key: value}`` or None."""
    update: dict[str, Any] = {}
    repeated: list[dict[str, Any]] | None = None
    for chan, value in writes:
        if chan in _SPECIAL or chan not in output_channels:
            continue
        if chan in update:
            if repeated is None:
                repeated = [dict([item]) for item in update.items()]
            repeated.append({chan: value})
            continue
        update[chan] = value
        if repeated is not None:
            repeated.append({chan: value})
    if repeated is not None:
        return repeated
    return update or None


def format_chunk(
    ns: tuple[str, ...],
    mode: str,
    payload: Any,
    *,
    single_mode: bool,
    subgraphs: bool,
) -> Any:
    """A stream chunk as ``stream()`` yields it for the requested shape."""
    if single_mode:
        return (ns, payload) if subgraphs else payload
    return (ns, mode, payload) if subgraphs else (mode, payload)


def with_interrupts(values: Any, interrupts: Sequence[Any]) -> Any:
    """Final ``values`` chunk of a paused run: the state plus ``__interrupt__``."""
    if not interrupts or not isinstance(values, dict):
        return values
    return {**values, INTERRUPT: tuple(interrupts)}


def first_available(values: Mapping[str, Any], key: str) -> Any:
    return values.get(key, MISSING)

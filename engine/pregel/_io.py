"""Pure mapping between the outside world and channels: inputs, commands, outputs, stream chunks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine._internal._constants import INTERRUPT, NO_WRITES, START, TASKS
from engine._internal._typing import MISSING
from engine.types import StreamMode

__all__ = (
    "chunk_shaper",
    "format_part",
    "keyed_update",
    "map_input",
    "stream_modes",
    "writes_update",
)

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


def keyed_update(
    writes: Sequence[tuple[str, Any]], keys: str | frozenset[str] | set[str]
) -> Any:
    """A task's ``updates`` chunk for ``keys``: its writes to them (one key given
    as a string: the value itself, a list when written several times; None
    when not written)."""
    if isinstance(keys, str):
        values = [value for chan, value in writes if chan == keys]
        if not values:
            return None
        return values[0] if len(values) == 1 else values
    return writes_update(writes, keys)


def chunk_shaper(
    own: tuple[str, ...],
    modes: frozenset[str] | set[str],
    skip: Any,
    *,
    single_mode: bool,
    subgraphs: bool,
) -> Callable[[tuple[tuple[str, ...], str, Any]], Any]:
    """How ``stream()`` turns the loop's ``(ns, mode, payload)`` chunks into what
    it yields for the requested shape: the payload (one mode), ``(mode,
    payload)`` (several), with the namespace first when ``subgraphs``; ``skip``
    for a chunk of a mode not asked for, or of a subgraph when ``subgraphs`` is
    off (``own`` is the run's namespace). One function per shape, chosen once:
    it runs for every chunk."""
    if subgraphs:
        if single_mode:

            def one_mode_subgraphs(chunk: Any) -> Any:
                ns, mode, payload = chunk
                return (ns, payload) if mode in modes else skip

            return one_mode_subgraphs

        def modes_subgraphs(chunk: Any) -> Any:
            ns, mode, payload = chunk
            return (ns, mode, payload) if mode in modes else skip

        return modes_subgraphs
    if single_mode:

        def one_mode(chunk: Any) -> Any:
            ns, mode, payload = chunk
            return payload if ns == own and mode in modes else skip

        return one_mode

    def several_modes(chunk: Any) -> Any:
        ns, mode, payload = chunk
        return (mode, payload) if ns == own and mode in modes else skip

    return several_modes


Mapper = Callable[[dict[str, Any]], Any]


def format_part(
    ns: tuple[str, ...],
    mode: str,
    payload: Any,
    output_mapper: Mapper | None = None,
    state_mapper: Mapper | None = None,
) -> dict[str, Any]:
    """A stream chunk as ``stream(..., version="v2")`` yields it: ``{type, ns, data}``.

    A ``values`` part carries the pause's interrupts apart (``interrupts``), and
    its data as the output schema's class when that is a pydantic model or a
    dataclass (``output_mapper``); so do the state values in ``checkpoints`` and
    ``debug`` parts (``state_mapper``), except the input checkpoint's, whose
    state is not complete yet. Payloads are copied, never changed: the same
    payload may be streamed in several modes.
    """
    if mode == "values":
        interrupts: tuple[Any, ...] = ()
        if isinstance(payload, dict):
            if INTERRUPT in payload:
                payload = dict(payload)
                interrupts = tuple(payload.pop(INTERRUPT))
            if output_mapper is not None:
                payload = output_mapper(payload)
        return {"type": mode, "ns": ns, "data": payload, "interrupts": interrupts}
    if state_mapper is not None and isinstance(payload, dict):
        if mode == "checkpoints":
            payload = _with_state_object(payload, state_mapper)
        elif mode == "debug" and payload.get("type") == "checkpoint":
            payload = {
                **payload,
                "payload": _with_state_object(payload["payload"], state_mapper),
            }
    return {"type": mode, "ns": ns, "data": payload}


def _with_state_object(checkpoint: dict[str, Any], mapper: Mapper) -> dict[str, Any]:
    values = checkpoint.get("values")
    if not isinstance(values, dict) or START in checkpoint.get("next", ()):
        return checkpoint
    return {**checkpoint, "values": mapper(values)}


def with_interrupts(values: Any, interrupts: Sequence[Any]) -> Any:
    """Final ``values`` chunk of a paused run: the state plus ``__interrupt__``
    (only ``__interrupt__`` when the output is one channel, an entrypoint's)."""
    if not interrupts:
        return values
    if not isinstance(values, dict):
        return {INTERRUPT: tuple(interrupts)}
    return {**values, INTERRUPT: tuple(interrupts)}


def first_available(values: Mapping[str, Any], key: str) -> Any:
    return values.get(key, MISSING)


def stream_modes(
    stream_mode: StreamMode | Sequence[StreamMode],
) -> tuple[frozenset[str], bool]:
    """The modes a ``stream_mode`` argument asks for, and whether it named one mode
    (then chunks are bare payloads)."""
    if isinstance(stream_mode, str):
        modes = frozenset((stream_mode,))
        single = True
    else:
        modes = frozenset(stream_mode)
        single = False
    unknown = modes - {
        "values",
        "updates",
        "checkpoints",
        "tasks",
        "debug",
        "messages",
        "custom",
        "tools",  # tool call events (engine.prebuilt._tool_events), as LangGraph
    }
    if unknown:
        raise ValueError(f"Unknown stream_mode {sorted(unknown)}")
    return modes, single

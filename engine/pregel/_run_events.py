"""``stream_events`` / ``astream_events``: a run as typed :mod:`engine.events`.

:func:`run_events` is what both return: ``version="v3"`` starts a run stream
(``engine.stream``), v1/v2 iterate the typed events. The typed events and the chunks of any ``stream_mode`` asked for come in the
order the run makes them; the run ends with :class:`~engine.events.RunFinished`.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from engine import events as ev
from engine._internal._scope import current_scope
from engine._internal._typing import RunnableConfig
from engine.pregel._drive import (
    adrive,
    async_sink,
    drive,
    forwarding,
    make_loop,
    parent_sink,
)
from engine.pregel._io import stream_modes
from engine.pregel._loop import PregelLoop, StreamChunk
from engine.pregel._persist import delay_quick_saves
from engine.runtime import RunControl
from engine.stream._pregel import astart_run_stream, start_run_stream
from engine.types import (
    All,
    Durability,
    StreamMode,
)

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = ("EventRunOptions", "atyped_events", "run_events", "typed_events")

_EVENT_MODES = frozenset({"events", "custom"})
_NO_PARTS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class EventRunOptions:
    """The run options ``stream_events`` / ``astream_events`` name, as given."""

    context: Any = None
    interrupt_before: All | Sequence[str] | None = None
    interrupt_after: All | Sequence[str] | None = None
    durability: Durability | None = None
    stream_mode: StreamMode | Sequence[StreamMode] | None = None
    subgraphs: bool = False


def run_events(
    graph: Pregel,
    input: Any,
    config: RunnableConfig | None,
    options: EventRunOptions,
    *,
    is_async: bool,
    transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None,
    kwargs: dict[str, Any],
    version: str,
) -> Any:
    """What ``stream_events`` and ``astream_events`` return: for ``version="v3"``
    a started run stream, else the typed events (sync or async)."""
    if version == "v3":
        start = astart_run_stream if is_async else start_run_stream
        return start(graph, input, config, transformers, _v3_options(kwargs, options))
    events = atyped_events if is_async else typed_events
    return events(graph, input, config, options, _events_options(version, kwargs))


def typed_events(
    graph: Pregel,
    input: Any,
    config: RunnableConfig | None,
    options: EventRunOptions,
    control: RunControl | None,
) -> Iterator[ev.RunEvent]:
    chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
    loop, parts = _events_loop(
        graph, input, config, chunks.put, options, control, is_async=False
    )
    try:
        for ns, mode, payload in drive(graph, loop, chunks, True):
            yield from _events_of(ns, mode, payload, parts, options.subgraphs)
    except GeneratorExit:
        raise  # the consumer stopped listening: nothing more to say
    except BaseException as exc:
        yield _run_failed(loop, exc)
        raise
    yield _run_finished(loop)


async def atyped_events(
    graph: Pregel,
    input: Any,
    config: RunnableConfig | None,
    options: EventRunOptions,
    control: RunControl | None,
) -> AsyncIterator[ev.RunEvent]:
    chunks: asyncio.Queue[Any] = asyncio.Queue()
    loop, parts = _events_loop(
        graph, input, config, async_sink(chunks), options, control, is_async=True
    )
    try:
        async for ns, mode, payload in adrive(graph, loop, chunks):
            for event in _events_of(ns, mode, payload, parts, options.subgraphs):
                yield event
    except GeneratorExit:
        raise  # the consumer stopped listening: nothing more to say
    except BaseException as exc:
        yield _run_failed(loop, exc)
        raise
    yield _run_finished(loop)


def _events_loop(
    graph: Pregel,
    input: Any,
    config: RunnableConfig | None,
    put: Callable[[StreamChunk], None],
    options: EventRunOptions,
    control: RunControl | None,
    *,
    is_async: bool,
) -> tuple[PregelLoop, frozenset[str]]:
    """What :func:`typed_events` and :func:`atyped_events` share: the run's loop
    (its chunks go to ``put``, and to a parent run that asked for them) and the
    modes yielded as ``StreamPart`` events."""
    modes, parts = _event_modes(options.stream_mode)
    forward = parent_sink(current_scope(), config)
    loop = make_loop(
        graph,
        input,
        config,
        context=options.context,
        modes=modes,
        sink=forwarding(put, forward),
        output_keys=None,
        interrupt_before=options.interrupt_before,
        interrupt_after=options.interrupt_after,
        durability=options.durability,
        is_async=is_async,
        control=control,
    )
    if not forward:  # each save is announced by its CheckpointSaved event
        delay_quick_saves(loop.persistence)
    return loop, parts


def _run_failed(loop: PregelLoop, exc: BaseException) -> ev.RunFinished:
    """The closing event of a run that raised ``exc``."""
    return ev.RunFinished(loop.ns, "error", f"{type(exc).__name__}: {exc}", time.time())


def _run_finished(loop: PregelLoop) -> ev.RunFinished:
    """The closing event of a run that ended or paused."""
    return ev.RunFinished(loop.ns, _final_status(loop), None, time.time())


def _events_options(version: str, kwargs: dict[str, Any]) -> RunControl | None:
    """Check ``stream_events``' version and extra options; returns ``control``."""
    if version not in ("v1", "v2"):
        raise ValueError(f"Unknown stream_events version {version!r}")
    control = kwargs.pop("control", None)
    if kwargs:
        raise TypeError(
            f"stream_events() got unexpected keyword arguments: {sorted(kwargs)}"
        )
    return control  # type: ignore[no-any-return]


def _v3_options(kwargs: dict[str, Any], options: EventRunOptions) -> dict[str, Any]:
    """``stream()`` options of a v3 run; ``stream_mode``/``subgraphs`` are passed on
    only when given, so that the v3 starter refuses them."""
    given: dict[str, Any] = {
        **kwargs,
        "context": options.context,
        "interrupt_before": options.interrupt_before,
        "interrupt_after": options.interrupt_after,
        "durability": options.durability,
    }
    if options.stream_mode is not None:
        given["stream_mode"] = options.stream_mode
    if options.subgraphs:
        given["subgraphs"] = options.subgraphs
    return given


def _event_modes(
    stream_mode: StreamMode | Sequence[StreamMode] | None,
) -> tuple[frozenset[str], frozenset[str]]:
    """The loop's modes for ``stream_events`` and the modes yielded as StreamParts."""
    if stream_mode is None:
        return _EVENT_MODES, _NO_PARTS
    parts, _ = stream_modes(stream_mode)
    return _EVENT_MODES | parts, parts


def _events_of(
    ns: tuple[str, ...],
    mode: str,
    payload: Any,
    parts: frozenset[str],
    subgraphs: bool,
) -> tuple[ev.RunEvent, ...]:
    """What one chunk of the run becomes: a ``StreamPart`` when its mode was asked
    for (a subgraph's only with ``subgraphs``), then its typed event if it is one
    (the ``events`` mode's payloads, ``custom`` as :class:`~engine.events.Custom`)."""
    if mode == "events":
        event: ev.RunEvent | None = payload
    elif mode == "custom":
        event = ev.Custom(ns, payload)
    else:
        event = None
    if mode in parts and (subgraphs or not ns):
        part = ev.StreamPart(ns, mode, payload)
        return (part,) if event is None else (part, event)
    return () if event is None else (event,)


def _final_status(loop: PregelLoop) -> Literal["done", "interrupted"]:
    if loop.status in ("interrupted", "interrupt_before", "interrupt_after"):
        return "interrupted"
    return "done"

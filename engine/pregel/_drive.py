"""Running a graph: make its loop, load the checkpoint, drive the steps.

:func:`drive` and :func:`adrive` are the sync and async shells around one step
order (load, start, then tick / cache / run step / after_tick until the loop
stops, then finish and the closing chunks); the step itself is planned and
applied by :class:`~engine.pregel._loop.PregelLoop` and run by ``_runner``.
Only the I/O differs between the two: saver and cache calls, and how tasks run.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._config import (
    addresses_own_thread,
)
from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_REPLAY,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_THREAD_ID,
)
from engine._internal._scope import TaskScope
from engine._internal._tracing import attach as attach_tracing
from engine._internal._tracing import start_tracing, tracing_of
from engine._internal._typing import RunnableConfig
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointTuple,
    require_thread_id,
)
from engine.errors import (
    CheckpointNotFoundError,
    ErrorCode,
    GraphDrained,
    GraphInterrupt,
    GraphRecursionError,
    error_message,
)
from engine.pregel._delta import awith_delta_values, with_delta_values
from engine.pregel._io import (
    with_interrupts,
)
from engine.pregel._lease import aheld_steps, held_steps
from engine.pregel._lifecycle import (
    areport_pause,
    areport_resume,
    lifecycle_manager,
    report_pause,
    report_resume,
)
from engine.pregel._loop import PregelLoop, StreamChunk
from engine.pregel._persist import AsyncPersistence, SyncPersistence
from engine.pregel._runner import arun_step, run_step
from engine.pregel._server_info import server_info
from engine.pregel._subgraph import ReplayBound
from engine.runtime import RunControl, Runtime
from engine.types import (
    All,
    Durability,
)

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = (
    "adrive",
    "aload",
    "async_sink",
    "drive",
    "forwarding",
    "load",
    "make_loop",
    "parent_sink",
)


def make_loop(
    graph: Pregel,
    input: Any,
    config: RunnableConfig | None,
    *,
    context: Any,
    modes: frozenset[str],
    sink: Callable[[StreamChunk], None],
    output_keys: str | Sequence[str] | None,
    interrupt_before: All | Sequence[str] | None,
    interrupt_after: All | Sequence[str] | None,
    durability: Durability | None,
    is_async: bool,
    control: RunControl | None = None,
) -> PregelLoop:
    merged, parent = graph._resolve(config, new_run=True)
    if parent is None and graph.checkpointer is True:
        raise RuntimeError("checkpointer=True cannot be used for root graphs.")
    saver = graph._saver(merged)
    conf = merged.setdefault(CONF, {})
    if parent is None and conf.get(CONFIG_KEY_CHECKPOINT_NS):
        _address_root(conf)
    if saver is not None:
        require_thread_id(merged, "A graph compiled with a checkpointer")
        conf[CONFIG_KEY_CHECKPOINTER] = saver
    durability = durability or conf.get("__engine_durability") or "async"
    if durability not in ("sync", "async", "exit"):
        raise ValueError(
            f"durability must be 'sync', 'async' or 'exit', got {durability!r}"
        )
    conf["__engine_durability"] = durability
    persistence: SyncPersistence | AsyncPersistence | None = None
    if saver is not None:
        background = durability == "async"
        persistence = (
            AsyncPersistence(saver, background)
            if is_async
            else SyncPersistence(saver, background)
        )
    tracing, sink, modes = start_tracing(merged, graph.name, sink, modes)
    runtime = _run_runtime(graph, merged, context, sink, parent, modes, control)
    ns: tuple[str, ...] = ()
    checkpoint_ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
    if checkpoint_ns:
        ns = tuple(checkpoint_ns.split("|"))
    loop = PregelLoop(
        graph,
        input=input,
        config=merged,
        checkpointer=saver,
        persistence=persistence,
        durability=durability,
        modes=modes,
        sink=sink,
        ns=ns,
        interrupt_before=interrupt_before
        if interrupt_before is not None
        else graph.interrupt_before_nodes,
        interrupt_after=interrupt_after
        if interrupt_after is not None
        else graph.interrupt_after_nodes,
        runtime=runtime,
        is_nested=parent is not None,
        output_keys=output_keys if output_keys is not None else graph.output_channels,
        stream_keys=graph.stream_channels_asis,
    )
    loop.parent_scope = parent
    attach_tracing(loop, tracing)
    loop.lifecycle = lifecycle_manager(merged, parent, is_async=is_async)
    return loop


def _run_runtime(
    graph: Pregel,
    config: RunnableConfig,
    context: Any,
    sink: Callable[[StreamChunk], None],
    parent: TaskScope | None,
    modes: frozenset[str] = frozenset(),
    control: RunControl | None = None,
) -> Runtime[Any]:
    conf = config.get(CONF, {})
    ns_str = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
    ns = tuple(ns_str.split("|")) if ns_str else ()
    inherited: Runtime[Any] | None = parent.base_runtime if parent is not None else None
    if context is None and inherited is not None:
        context = inherited.context
    if context is not None and graph.context_schema is not None:
        context = _coerce_context(graph.context_schema, context)
    store = (
        graph.store
        if graph.store is not None
        else (inherited.store if inherited else None)
    )

    if "custom" in modes:

        def writer(chunk: Any) -> None:
            sink((ns, "custom", chunk))

    else:

        def writer(chunk: Any) -> None:
            return None

    if control is None:  # a subgraph obeys its parent run's control
        control = inherited.control if inherited is not None else None
    return Runtime(
        context=context,
        store=store,
        stream_writer=writer,
        previous=None,
        server_info=server_info(conf)
        or (inherited.server_info if inherited is not None else None),
        control=control if control is not None else RunControl(),
        thread_id=conf.get(CONFIG_KEY_THREAD_ID),
        run_id=str(config["run_id"]) if config.get("run_id") is not None else None,
    )


def load(graph: Pregel, loop: PregelLoop) -> tuple[CheckpointTuple | None, str | None]:
    saver = loop.checkpointer
    if saver is None:
        return None, None
    config = loop.config
    if (replay := _replaying(config)) is not None:
        loop.branch_off()
        before = saver.list(config, before=replay.before(), limit=1)
        return next(iter(before), None), None
    saved = _preloaded(loop) if loop.preloaded is not None else saver.get_tuple(config)
    head = _head_id(saver, config, saved)
    _check_found(config, saved)
    return saved, head


def _preloaded(loop: PregelLoop) -> CheckpointTuple | None:
    """The checkpoint read when the run took its thread's lease (then forgotten)."""
    assert loop.preloaded is not None
    (saved,), loop.preloaded = loop.preloaded, None
    return saved


async def aload(
    graph: Pregel, loop: PregelLoop
) -> tuple[CheckpointTuple | None, str | None]:
    saver = loop.checkpointer
    if saver is None:
        return None, None
    config = loop.config
    if (replay := _replaying(config)) is not None:
        loop.branch_off()
        async for found in saver.alist(config, before=replay.before(), limit=1):
            return found, None
        return None, None
    saved = (
        _preloaded(loop)
        if loop.preloaded is not None
        else await saver.aget_tuple(config)
    )
    head = None
    if config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID) and saved is not None:
        latest = await saver.aget_tuple(_without_checkpoint_id(config))
        head = latest.checkpoint["id"] if latest is not None else None
    _check_found(config, saved)
    return saved, head


def drive(
    graph: Pregel, loop: PregelLoop, chunks: queue.SimpleQueue[Any] | None, live: bool
) -> Iterator[StreamChunk]:
    steps = held_steps(loop, _drive_steps(graph, loop, chunks, live))
    tracing = tracing_of(loop)
    return steps if tracing is None else tracing.traced(steps)


def _drive_steps(
    graph: Pregel, loop: PregelLoop, chunks: queue.SimpleQueue[Any] | None, live: bool
) -> Iterator[StreamChunk]:
    saved, head = load(graph, loop)
    saved = with_delta_values(graph.channels, saved, loop.checkpointer)
    try:
        loop.start(saved, head)
        if loop.lifecycle is not None:
            report_resume(loop)
        if chunks is not None:
            yield from _drain(chunks)
        persistence = loop.persistence
        sync_saves = persistence if loop.durability == "sync" else None
        while loop.tick():
            if keys := loop.cache_probe():
                loop.apply_cache_hits(loop.cache.get(keys))
            if persistence is not None:
                persistence.step_begins(loop.tasks.values(), loop.resuming_step)
            yield from run_step(loop, chunks, live)
            if loop.status == "interrupted":
                break
            if loop.cache is not None and (updates := loop.cache_updates()):
                loop.cache.set(updates)
            loop.after_tick()
            if chunks is not None:
                yield from _drain(chunks)
            if loop.status == "interrupt_after":
                break
            if sync_saves is not None:
                sync_saves.flush()
        loop.finish()
    except BaseException:
        _flush_quietly(loop)
        raise
    if chunks is not None:
        yield from _drain(chunks)
    if loop.lifecycle is not None:
        report_pause(loop)
    yield from _closing_chunks(
        graph, loop, (lambda: _drain(chunks)) if chunks is not None else _nothing
    )


def adrive(
    graph: Pregel, loop: PregelLoop, chunks: asyncio.Queue[Any] | None
) -> AsyncIterator[StreamChunk]:
    steps = aheld_steps(loop, _adrive_steps(graph, loop, chunks))
    tracing = tracing_of(loop)
    return steps if tracing is None else tracing.atraced(steps)


async def _adrive_steps(
    graph: Pregel, loop: PregelLoop, chunks: asyncio.Queue[Any] | None
) -> AsyncIterator[StreamChunk]:
    saved, head = await aload(graph, loop)
    saved = await awith_delta_values(graph.channels, saved, loop.checkpointer)
    persistence = loop.persistence
    try:
        loop.start(saved, head)
        if loop.lifecycle is not None:
            await areport_resume(loop)
        if chunks is not None:
            for item in _adrain(chunks):
                yield item
        while loop.tick():
            if keys := loop.cache_probe():
                loop.apply_cache_hits(await loop.cache.aget(keys))
            if persistence is not None:
                persistence.step_begins(loop.tasks.values(), loop.resuming_step)
            async for item in arun_step(loop, chunks):
                yield item
            if loop.status == "interrupted":
                break
            if loop.cache is not None and (updates := loop.cache_updates()):
                await loop.cache.aset(updates)
            loop.after_tick()
            if chunks is not None:
                for item in _adrain(chunks):
                    yield item
            if loop.status == "interrupt_after":
                break
            if isinstance(persistence, AsyncPersistence) and (
                loop.durability == "sync" or persistence.needs_backpressure
            ):
                await persistence.aflush()
        loop.finish()
        if isinstance(persistence, AsyncPersistence):
            await persistence.aflush()
    except BaseException:
        if isinstance(persistence, AsyncPersistence):
            with contextlib.suppress(BaseException):
                await persistence.aflush()
        raise
    if chunks is not None:
        for item in _adrain(chunks):
            yield item
    if loop.lifecycle is not None:
        await areport_pause(loop)
    for item in _closing_chunks(
        graph, loop, (lambda: _adrain(chunks)) if chunks is not None else _nothing
    ):
        yield item


def _closing_chunks(
    graph: Pregel, loop: PregelLoop, drain: Callable[[], Iterator[StreamChunk]]
) -> Iterator[StreamChunk]:
    """The run's last chunks (a pause's values, then the paused tasks'
    results), or its closing error. They go through the loop's sink, so a
    subgraph's reach its parent's stream too; ``drain`` yields this run's."""
    if loop.status == "out_of_steps":
        raise GraphRecursionError(
            error_message(
                f"Recursion limit of {loop.recursion_limit} reached without hitting a stop "
                "condition. You can increase the limit by setting the `recursion_limit` "
                "config key.",
                ErrorCode.GRAPH_RECURSION_LIMIT,
            )
        )
    if loop.status == "draining":
        reason = loop.control.drain_reason if loop.control is not None else None
        raise GraphDrained(reason or "shutdown")
    if loop.interrupts and "values" in loop.modes:
        loop.sink(
            (
                loop.ns,
                "values",
                with_interrupts(
                    loop.output_values(loop.stream_keys, with_pending=True),
                    loop.interrupts,
                ),
            )
        )
    loop.emit_paused_results()
    yield from drain()
    if loop.is_nested and loop.status in (
        "interrupted",
        "interrupt_before",
        "interrupt_after",
    ):
        raise GraphInterrupt(loop.interrupts)


def async_sink(chunks: asyncio.Queue[Any]) -> Callable[[StreamChunk], None]:
    """A sink usable from the event loop's thread and from worker threads."""
    event_loop = asyncio.get_running_loop()
    owner = threading.get_ident()

    def sink(item: StreamChunk) -> None:
        if threading.get_ident() == owner:
            chunks.put_nowait(item)
        else:
            event_loop.call_soon_threadsafe(chunks.put_nowait, item)

    return sink


def forwarding(
    own: Callable[[StreamChunk], None],
    parent: tuple[Callable[[StreamChunk], None], frozenset[str]] | None,
) -> Callable[[StreamChunk], None]:
    """A nested stream's sink: its own queue, and the parent run's stream too."""
    if parent is None:
        return own
    parent_sink, parent_modes = parent

    def both(chunk: StreamChunk) -> None:
        own(chunk)
        if chunk[1] in parent_modes:
            parent_sink(chunk)

    return both


def parent_sink(
    parent: TaskScope | None, config: RunnableConfig | None = None
) -> tuple[Callable[[StreamChunk], None], frozenset[str]] | None:
    """A nested run forwards its chunks to the parent run's stream (namespaced);
    a graph run on its own thread from inside a task does not nest."""
    if parent is None or addresses_own_thread(config):
        return None
    return parent.stream_sink


def _nothing() -> Iterator[StreamChunk]:
    return iter(())


def _drain(chunks: queue.SimpleQueue[Any]) -> Iterator[StreamChunk]:
    # The run's thread is the queue's only reader (see ``_runner._drain``).
    while not chunks.empty():
        yield chunks.get_nowait()


def _adrain(chunks: asyncio.Queue[Any]) -> Iterator[StreamChunk]:
    while not chunks.empty():
        yield chunks.get_nowait()


def _flush_quietly(loop: PregelLoop) -> None:
    persistence = loop.persistence
    if isinstance(persistence, SyncPersistence):
        with contextlib.suppress(BaseException):
            persistence.flush()


def _address_root(conf: dict[str, Any]) -> None:
    """A root run given a subgraph's checkpoint config (from its snapshot) runs the
    graph from the root checkpoint that subgraph checkpoint was taken under
    (``checkpoint_map[""]``), or from the latest one, as in LangGraph."""
    conf[CONFIG_KEY_CHECKPOINT_NS] = ""
    root = (conf.get(CONFIG_KEY_CHECKPOINT_MAP) or {}).get("")
    if root:
        conf[CONFIG_KEY_CHECKPOINT_ID] = root
    else:
        conf.pop(CONFIG_KEY_CHECKPOINT_ID, None)


def _replaying(config: RunnableConfig) -> ReplayBound | None:
    """The parent's replay, when this subgraph run is its first in the replay:
    it then starts from its checkpoint before the replayed one, as a new run."""
    conf = config.get(CONF, {})
    replay = conf.get(CONFIG_KEY_REPLAY)
    if replay is None or conf.get(CONFIG_KEY_CHECKPOINT_ID):
        return None
    if not replay.first_visit(conf.get(CONFIG_KEY_CHECKPOINT_NS, "")):
        return None
    conf.pop(CONFIG_KEY_RESUMING, None)  # the input starts it, it does not resume
    return replay  # type: ignore[no-any-return]


def _coerce_context(schema: type[Any], context: Any) -> Any:
    if isinstance(context, schema):
        return context
    if isinstance(context, Mapping) and hasattr(schema, "model_validate"):
        return schema.model_validate(context)
    if isinstance(context, Mapping):
        try:
            return schema(**context)
        except TypeError:
            return context
    return context


def _without_checkpoint_id(config: RunnableConfig) -> RunnableConfig:
    conf = {
        k: v for k, v in config.get(CONF, {}).items() if k != CONFIG_KEY_CHECKPOINT_ID
    }
    return {**config, CONF: conf}


def _head_id(
    saver: BaseCheckpointSaver, config: RunnableConfig, saved: CheckpointTuple | None
) -> str | None:
    if saved is None:
        return None
    if not config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID):
        return saved.checkpoint["id"]
    latest = saver.get_tuple(_without_checkpoint_id(config))
    return latest.checkpoint["id"] if latest is not None else None


def _check_found(config: RunnableConfig, saved: CheckpointTuple | None) -> None:
    checkpoint_id = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    if checkpoint_id and saved is None:
        raise CheckpointNotFoundError(
            error_message(
                f"Checkpoint {checkpoint_id!r} does not exist on thread "
                f"{config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)!r}",
                ErrorCode.CHECKPOINT_NOT_FOUND,
            )
        )

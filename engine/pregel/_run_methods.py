"""Pregel's run methods: invoke, stream, batch and stream_events, sync and async.

``RunMethods`` is a base class of :class:`~engine.pregel.main.Pregel`. Each
pair shares its setup (``_stream_setup``, ``_invoke_loop``) and keeps a thin
sync and async shell; the steps are driven by ``_drive``, and ``stream_events``
(typed events, or a v3 run stream of ``engine.stream``) by ``_run_events``.
"""

from __future__ import annotations

import asyncio
import functools
import queue
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from engine._internal._constants import INTERRUPT
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
from engine.pregel._io import Mapper, chunk_shaper, format_part, stream_modes
from engine.pregel._lease import OnBusy, with_on_busy
from engine.pregel._loop import PregelLoop, StreamChunk
from engine.pregel._one_thread import (
    CancelFlag,
    ainvoke_on_one_thread,
    on_one_thread,
    runs_on_one_thread,
)
from engine.pregel._persist import delay_quick_saves
from engine.pregel._run_events import EventRunOptions, run_events
from engine.pregel._subgraph import CompiledGraph
from engine.runtime import RunControl
from engine.types import (
    All,
    Durability,
    GraphOutput,
    StreamMode,
)

__all__ = ("RunMethods",)

_LIVE_MODES = frozenset({"custom", "messages", "tools"})
_SKIP = object()  # a stream chunk the caller did not ask for


class RunMethods(CompiledGraph):
    """Running a graph: ``invoke``, ``stream``, ``batch``, ``stream_events`` and their async twins."""

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        subgraphs: bool = False,
        debug: bool | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Run the graph and yield chunks as it goes (see ``stream_mode``).

        With one mode the chunks are that mode's payloads; with several they are
        ``(mode, payload)`` pairs; ``subgraphs=True`` prefixes the namespace.
        ``version="v2"`` yields typed parts instead, whatever the modes:
        ``{"type": mode, "ns": namespace, "data": payload}``
        (:data:`~engine.types.StreamPart`); ``values`` parts also carry
        ``interrupts``, and their data is the output schema's class when that is
        a pydantic model or a dataclass.

        ``on_busy`` ("raise" or "wait"): what to do when another run holds the
        thread, as for :meth:`invoke`.
        """
        chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        loop, shape, live = self._stream_setup(
            input,
            config,
            chunks.put,
            is_async=False,
            context=context,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            control=control,
            on_busy=on_busy,
            subgraphs=subgraphs,
            version=version,
        )
        for chunk in drive(self._as_pregel, loop, chunks, live):
            if (part := shape(chunk)) is not _SKIP:
                yield part

    def _stream_setup(
        self,
        input: Any,
        config: RunnableConfig | None,
        put: Callable[[StreamChunk], None],
        *,
        is_async: bool,
        context: Any,
        stream_mode: StreamMode | Sequence[StreamMode] | None,
        output_keys: str | Sequence[str] | None,
        interrupt_before: All | Sequence[str] | None,
        interrupt_after: All | Sequence[str] | None,
        durability: Durability | None,
        control: RunControl | None,
        on_busy: OnBusy | None,
        subgraphs: bool,
        version: str,
    ) -> tuple[PregelLoop, Callable[[StreamChunk], Any], bool]:
        """What :meth:`stream` and :meth:`astream` share: the run's loop (its
        chunks go to ``put``), how a chunk becomes what the caller gets (``_SKIP``
        for chunks not asked for), and whether chunks are yielded mid-step."""
        config = with_on_busy(config, on_busy)
        modes, single = stream_modes(
            stream_mode if stream_mode is not None else self._as_pregel.stream_mode
        )
        loop = make_loop(
            self._as_pregel,
            input,
            config,
            context=context,
            modes=modes,
            sink=forwarding(put, parent_sink(current_scope(), config)),
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=is_async,
            control=control,
        )
        if output_keys is not None:
            loop.stream_keys = output_keys  # values chunks of those keys
            loop.update_keys = _key_set(output_keys)  # and updates of those keys
        own = loop.ns
        live = self._as_pregel.stream_eager or bool(modes & _LIVE_MODES)
        if not _is_v2(version):
            return (
                loop,
                chunk_shaper(
                    own, modes, _SKIP, single_mode=single, subgraphs=subgraphs
                ),
                live,
            )
        mappers = self._part_mappers(output_keys)

        def part(chunk: StreamChunk) -> Any:
            ns, mode, payload = chunk
            if (ns != own and not subgraphs) or mode not in modes:
                return _SKIP
            return format_part(ns, mode, payload, *(mappers if ns == own else ()))

        return loop, part, live

    def _part_mappers(
        self, output_keys: str | Sequence[str] | None
    ) -> tuple[Mapper | None, Mapper | None]:
        """How v2 parts turn the graph's own values into its schema classes."""
        return (
            self._as_pregel.output_mapper if output_keys is None else None
        ), self._as_pregel.state_mapper

    def invoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode = "values",
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Any:
        """Run the graph to completion (or to an interrupt) and return its output.

        When the run pauses, the output also holds ``"__interrupt__"``: the list of
        pending :class:`~engine.types.Interrupt` objects. With
        ``version="v2"`` it is a :class:`~engine.types.GraphOutput` instead
        (``.value``, ``.interrupts``), and another ``stream_mode`` gives the list
        of v2 parts.

        ``control`` (a :class:`~engine.runtime.RunControl`) lets another thread or
        a node stop the run cleanly: after ``control.request_drain()`` it saves
        the step in progress and raises :class:`~engine.errors.GraphDrained`;
        ``invoke(None, config)`` continues it later.

        With a checkpointer and a ``thread_id``, the run holds the thread while it
        runs (a lease, see ``engine.pregel._lease``): another run already on it
        makes this one raise :class:`~engine.errors.ThreadBusyError` before
        anything executes, or, with ``on_busy="wait"`` (also
        ``config["configurable"]["on_busy"]``), wait for it to end and then run
        on the head it left. Not in LangGraph, where both runs go on and fork the
        thread.
        """
        config = with_on_busy(config, on_busy)
        v2 = _is_v2(version)
        if stream_mode != "values":
            chunks = list(
                self.stream(
                    input,
                    config,
                    context=context,
                    stream_mode=stream_mode,
                    output_keys=output_keys,
                    interrupt_before=interrupt_before,
                    interrupt_after=interrupt_after,
                    durability=durability,
                    control=control,
                    version=version,
                )
            )
            return chunks
        options = _loop_options(
            context, output_keys, interrupt_before, interrupt_after, durability, control
        )
        return self._invoke_values(input, config, options, v2, None)

    def _invoke_values(
        self,
        input: Any,
        config: RunnableConfig | None,
        options: dict[str, Any],
        v2: bool,
        cancel_flag: CancelFlag | None,
    ) -> Any:
        """:meth:`invoke` with the ``values`` stream mode, in this thread; also an
        ``ainvoke`` on one worker thread (``_one_thread``), with its cancel flag."""
        values: queue.SimpleQueue[Any] | None = (
            queue.SimpleQueue() if self._as_pregel._output_via_values else None
        )
        loop = self._invoke_loop(
            input,
            config,
            values.put if values is not None else None,
            options,
            is_async=False,
        )
        if cancel_flag is not None:
            on_one_thread(loop, cancel_flag)
        output_keys = options["output_keys"]
        if values is not None:
            last = _last_values(loop, drive(self._as_pregel, loop, values, False))
            return self._last_output(loop, last, output_keys, v2)
        for _ in drive(self._as_pregel, loop, None, False):
            pass
        return self._graph_output(loop, output_keys) if v2 else loop.output()

    def _invoke_loop(
        self,
        input: Any,
        config: RunnableConfig | None,
        put: Callable[[StreamChunk], None] | None,
        options: dict[str, Any],
        *,
        is_async: bool,
    ) -> PregelLoop:
        """What :meth:`invoke` and :meth:`ainvoke` share: the run's loop, with
        their ``options`` (:func:`_loop_options`).

        ``put`` receives the loop's ``values`` chunks when the output is read
        from the last of them (see ``_output_via_values``); None when the output
        is read from the channels at the end. Chunks a parent run asked for are
        forwarded to it either way.
        """
        forward = parent_sink(current_scope(), config)
        loop = make_loop(
            self._as_pregel,
            input,
            config,
            modes=_invoke_modes(forward, put is not None),
            sink=forwarding(put, forward)
            if put is not None
            else (forward[0] if forward else _discard),
            is_async=is_async,
            **options,
        )
        if put is not None:
            loop.stream_keys = loop.output_keys
        if not forward:  # no chunk of this run reaches other code between its steps
            delay_quick_saves(loop.persistence)
        return loop

    def _last_output(
        self,
        loop: PregelLoop,
        last: Any,
        output_keys: str | Sequence[str] | None,
        v2: bool,
    ) -> Any:
        """``invoke``'s result from the last ``values`` chunk (see ``_output_via_values``):
        None when no output channel was ever written, as in LangGraph."""
        if isinstance(last, dict) and INTERRUPT in last:
            last = {k: v for k, v in last.items() if k != INTERRUPT}
        if v2:
            mapper = self._part_mappers(output_keys)[0]
            if mapper is not None and isinstance(last, dict):
                last = mapper(last)
            return GraphOutput(last, tuple(loop.interrupts))
        if not loop.interrupts:
            return last
        if isinstance(last, dict):
            return {**last, INTERRUPT: list(loop.interrupts)}
        return {INTERRUPT: list(loop.interrupts)}

    def _graph_output(
        self, loop: PregelLoop, output_keys: str | Sequence[str] | None
    ) -> GraphOutput[Any]:
        """``invoke(..., version="v2")``'s result: the output apart from the interrupts."""
        value = loop.output()
        interrupts: tuple[Any, ...] = ()
        if isinstance(value, dict):
            if INTERRUPT in value:
                value = dict(value)
                interrupts = tuple(value.pop(INTERRUPT))
            mapper = self._part_mappers(output_keys)[0]
            if mapper is not None:
                value = mapper(value)
        return GraphOutput(value, interrupts)

    async def ainvoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode = "values",
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Any:
        """Async twin of :meth:`invoke`.

        A run whose code is all sync (and whose saver, if any, is the in-memory
        one or ``AsyncSqliteSaver``) is :meth:`invoke` on one worker thread: see
        ``_one_thread``.
        """
        config = with_on_busy(config, on_busy)
        v2 = _is_v2(version)
        if stream_mode != "values":
            return [
                chunk
                async for chunk in self.astream(
                    input,
                    config,
                    context=context,
                    stream_mode=stream_mode,
                    output_keys=output_keys,
                    interrupt_before=interrupt_before,
                    interrupt_after=interrupt_after,
                    durability=durability,
                    control=control,
                    version=version,
                )
            ]
        options = _loop_options(
            context, output_keys, interrupt_before, interrupt_after, durability, control
        )
        if runs_on_one_thread(self._as_pregel, config):
            return await ainvoke_on_one_thread(
                functools.partial(self._invoke_values, input, config, options, v2),
                self._as_pregel.checkpointer,
            )
        queued: asyncio.Queue[Any] | None = (
            asyncio.Queue() if self._as_pregel._output_via_values else None
        )
        loop = self._invoke_loop(
            input,
            config,
            async_sink(queued) if queued is not None else None,
            options,
            is_async=True,
        )
        if queued is not None:
            last: Any = None
            async for ns, mode, payload in adrive(self._as_pregel, loop, queued):
                if mode == "values" and ns == loop.ns:
                    last = payload
            return self._last_output(loop, last, output_keys, v2)
        async for _ in adrive(self._as_pregel, loop, None):
            pass
        return self._graph_output(loop, output_keys) if v2 else loop.output()

    async def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        subgraphs: bool = False,
        debug: bool | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Async twin of :meth:`stream`."""
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        loop, shape, _ = self._stream_setup(
            input,
            config,
            async_sink(chunks),
            is_async=True,
            context=context,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            control=control,
            on_busy=on_busy,
            subgraphs=subgraphs,
            version=version,
        )
        async for chunk in adrive(self._as_pregel, loop, chunks):
            if (part := shape(chunk)) is not _SKIP:
                yield part

    def stream_events(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        subgraphs: bool = False,
        version: Literal["v1", "v2", "v3"] = "v2",
        transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run the graph and yield typed :mod:`engine.events` as it goes
        (``version="v3"``: return a :class:`~engine.stream.GraphRunStream`).

        Events cover the run, every task (with timings), each step's barrier and
        saved checkpoint, custom progress and interrupts, subgraphs included.
        A :class:`~engine.events.CheckpointSaved` event comes once its checkpoint
        is in the saver; with ``durability="async"`` the saves of quick steps may
        wait and go together, as an ``invoke`` run's do (see ``docs/engine.md``,
        "Group commit"), so read the thread after that event, not after a step's.
        The last event is :class:`~engine.events.RunFinished`; when the run fails
        it carries the error and the exception is raised after it.

        With ``stream_mode`` (one mode or several, as for :meth:`stream`), the
        chunks of those modes come too, as :class:`~engine.events.StreamPart`
        events, in :meth:`stream`'s order, each just before the typed event of the
        same moment; subgraph chunks only with ``subgraphs=True``. Without it the
        stream costs what it always did.

        ``version`` ("v2", the default, or "v1") selects these events: LangGraph's
        v1/v2 are LangChain callback events (``on_chain_start``...), which the
        engine does not produce; its typed events carry the same moments.
        ``control=`` is the run's :class:`~engine.runtime.RunControl`, as for
        :meth:`stream`.

        ``version="v3"`` is LangGraph's transformer protocol (experimental in
        LangGraph 1.2): it returns a :class:`~engine.stream.GraphRunStream` at
        once and runs the graph as the caller reads it (its event log, or
        projections such as ``run.values``, ``run.lifecycle``,
        ``run.subgraphs``). ``transformers`` (classes or ``scope -> transformer``
        factories) are added after the graph's compile-time ones; the other
        keyword arguments (``context``, ``durability``, ``control``,
        ``output_keys``...) go to :meth:`stream`, except ``stream_mode`` and
        ``subgraphs``, which v3 decides (``TypeError``). ``transformers`` is
        ignored by v1/v2, as in LangGraph.

        Example:
            >>> run = graph.stream_events({"x": 1}, version="v3")
            >>> for state in run.values:
            ...     print(state)
            >>> run.output
        """
        options = EventRunOptions(
            context,
            interrupt_before,
            interrupt_after,
            durability,
            stream_mode,
            subgraphs,
        )
        return run_events(
            self._as_pregel,
            input,
            config,
            options,
            is_async=False,
            transformers=transformers,
            kwargs=kwargs,
            version=version,
        )

    def astream_events(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        subgraphs: bool = False,
        version: Literal["v1", "v2", "v3"] = "v2",
        transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Async twin of :meth:`stream_events`: ``async for`` the typed events, or
        ``await`` it with ``version="v3"`` for an
        :class:`~engine.stream.AsyncGraphRunStream`."""
        options = EventRunOptions(
            context,
            interrupt_before,
            interrupt_after,
            durability,
            stream_mode,
            subgraphs,
        )
        return run_events(
            self._as_pregel,
            input,
            config,
            options,
            is_async=True,
            transformers=transformers,
            kwargs=kwargs,
            version=version,
        )

    def batch(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Invoke the graph once per input (configs may be given per input)."""
        configs = _configs_for(inputs, config)
        results: list[Any] = []
        for item, cfg in zip(inputs, configs, strict=True):
            try:
                results.append(self.invoke(item, cfg, **kwargs))
            except Exception as exc:
                if not return_exceptions:
                    raise
                results.append(exc)
        return results

    async def abatch(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Async twin of :meth:`batch`; inputs run concurrently."""
        configs = _configs_for(inputs, config)
        return list(
            await asyncio.gather(
                *(
                    self.ainvoke(i, c, **kwargs)
                    for i, c in zip(inputs, configs, strict=True)
                ),
                return_exceptions=return_exceptions,
            )
        )


def _loop_options(
    context: Any,
    output_keys: str | Sequence[str] | None,
    interrupt_before: All | Sequence[str] | None,
    interrupt_after: All | Sequence[str] | None,
    durability: Durability | None,
    control: RunControl | None,
) -> dict[str, Any]:
    """``invoke``'s and ``ainvoke``'s options for ``_invoke_loop``."""
    return {
        "context": context,
        "output_keys": output_keys,
        "interrupt_before": interrupt_before,
        "interrupt_after": interrupt_after,
        "durability": durability,
        "control": control,
    }


def _key_set(keys: str | Sequence[str]) -> str | frozenset[str]:
    return keys if isinstance(keys, str) else frozenset(keys)


def _discard(_: StreamChunk) -> None:
    return None


_VALUES = frozenset({"values"})


def _invoke_modes(
    forward: tuple[Callable[[StreamChunk], None], frozenset[str]] | None,
    by_values: bool,
) -> frozenset[str]:
    """An ``invoke`` loop's modes: the parent run's (to forward), plus ``values``
    when the output is the last values chunk."""
    modes = forward[1] if forward else frozenset()
    return modes | _VALUES if by_values else modes


def _last_values(loop: PregelLoop, items: Iterator[StreamChunk]) -> Any:
    """The payload of the run's own last ``values`` chunk (None without one)."""
    last: Any = None
    own = loop.ns
    for ns, mode, payload in items:
        if mode == "values" and ns == own:
            last = payload
    return last


def _is_v2(version: str) -> bool:
    return version == "v2"  # anything else is v1, as in LangGraph


def _configs_for(
    inputs: Sequence[Any], config: RunnableConfig | Sequence[RunnableConfig] | None
) -> list[RunnableConfig | None]:
    if config is None or isinstance(config, Mapping):
        return [config] * len(inputs)
    configs = list(config)
    if len(configs) != len(inputs):
        raise ValueError("batch() got a different number of configs and inputs")
    return configs  # type: ignore[return-value]

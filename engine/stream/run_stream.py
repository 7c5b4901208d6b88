"""Run streams: what ``stream_events(version="v3")`` returns.

A run stream owns a :class:`~engine.stream._mux.StreamMux` and the graph's
``stream(..., version="v2", subgraphs=True)`` iterator. Nothing runs in the
background: whenever a consumer's cursor (on the event log or on a projection
such as ``run.values``) finds its buffer empty, the run stream pulls one part
from the graph and pushes it through the mux (the "pump"). Projections are
single-consumer; use ``tee(n)`` to read one twice. Native transformers'
projections are attributes (``run.values``, ``run.lifecycle``,
``run.subgraphs``...), every projection is in ``run.extensions``.

The protocol is experimental in LangGraph 1.2 and may change with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

from engine.stream._convert import to_protocol_event
from engine.stream._mux import StreamMux
from engine.stream._types import ProtocolEvent
from engine.stream.stream_channel import StreamChannel

if TYPE_CHECKING:
    from engine.stream.transformers import LifecyclePayload, SubgraphStatus

__all__ = (
    "AsyncGraphRunStream",
    "AsyncSubgraphRunStream",
    "GraphRunStream",
    "SubgraphRunStream",
)


def _no_projection(run: object, name: str) -> NoReturn:
    mux = run.__dict__.get("_mux")  # may be unset while __init__ runs
    known = ", ".join(sorted(mux.native_keys)) if mux is not None else ""
    raise AttributeError(
        f"{type(run).__name__!r} object has no attribute {name!r} "
        f"(registered projections: {known or 'none'})"
    )


class _RunState:
    """The run's own last values, and its interrupts, read from ``values`` events;
    the projections every run stream has (``subgraphs`` is typed by each)."""

    values: StreamChannel[dict[str, Any]]
    messages: StreamChannel[Any]
    lifecycle: StreamChannel[LifecyclePayload]
    updates: StreamChannel[dict[str, Any]]
    custom: StreamChannel[Any]
    checkpoints: StreamChannel[dict[str, Any]]
    debug: StreamChannel[dict[str, Any]]
    tasks: StreamChannel[dict[str, Any]]

    def __getattr__(self, name: str) -> StreamChannel[Any]:
        _no_projection(self, name)

    _mux: StreamMux
    _scope_list: list[str]
    _latest: dict[str, Any] | None
    _interrupted: bool
    _interrupts: list[Any]

    def _setup(self, mux: StreamMux) -> None:
        self._mux = mux
        self.extensions: Mapping[str, Any] = MappingProxyType(mux.extensions)
        self._exhausted = False
        self._latest = None
        self._interrupted = False
        self._interrupts = []
        self._scope_list = list(mux.scope)
        for key in mux.native_keys:
            setattr(self, key, mux.extensions[key])

    def _observe_event(self, event: ProtocolEvent) -> None:
        if event["method"] != "values":
            return
        params = event["params"]
        if params["namespace"] != self._scope_list:
            return
        self._latest = params["data"]
        if interrupts := params.get("interrupts", ()):
            self._interrupted = True
            self._interrupts.extend(interrupts)

    def _raise_error(self) -> None:
        if (err := self._mux._events._error) is not None:
            raise err


class GraphRunStream(_RunState):
    """A sync v3 run: iterate it for protocol events, or read its projections.

    Use it as a context manager to stop the run (and its running nodes) if you
    leave early. ``output``, ``interrupted`` and ``interrupts`` run the graph
    to its end first.
    """

    subgraphs: StreamChannel[SubgraphRunStream]

    def __init__(
        self,
        graph_iter: Iterator[Any] | None,
        mux: StreamMux,
        *,
        wire_pump: bool = True,
    ) -> None:
        """Args:
        graph_iter: the graph's v2 parts, or None for a handle driven by its parent.
        mux: the transformer pipeline and event log.
        wire_pump: make this run stream the mux's pump (False for handles).
        """
        self._graph_iter = graph_iter
        self._setup(mux)
        if wire_pump:
            mux.bind_pump(self._pump_next)

    def _pump_next(self) -> bool:
        """Pull one part from the graph through the mux; False once it ended."""
        if self._exhausted or self._graph_iter is None:
            return False
        try:
            part = next(self._graph_iter)
        except StopIteration:
            self._exhausted = True
            self._mux.close()
            return False
        except Exception as exc:
            self._exhausted = True
            self._mux.fail(exc)
            return False
        event = to_protocol_event(part)
        self._observe_event(event)
        try:
            self._mux.push(event)
        except Exception as exc:  # a transformer failed: the run fails with it
            self._exhausted = True
            self._close_graph()
            self._mux.fail(exc)
            return False
        return True

    def _close_graph(self) -> None:
        graph_iter, self._graph_iter = self._graph_iter, None
        if graph_iter is not None and (close := getattr(graph_iter, "close", None)):
            with contextlib.suppress(Exception):
                close()

    def _drive(self) -> None:
        while self._pump_next():
            pass
        self._raise_error()

    def abort(self) -> None:
        """Stop the run now (its generator is closed, so running nodes stop) and
        close every projection. Does nothing once the run ended."""
        if self._exhausted:
            return
        self._exhausted = True
        self._close_graph()
        with contextlib.suppress(Exception):
            self._mux.close()

    def __enter__(self) -> GraphRunStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abort()

    @property
    def output(self) -> dict[str, Any] | None:
        """The run's last state (its last own ``values`` event), once it ended.

        Raises:
            BaseException: the error the run ended with.
        """
        self._drive()
        return self._latest

    @property
    def interrupted(self) -> bool:
        """Whether the run stopped on interrupts, once it ended."""
        self._drive()
        return self._interrupted

    @property
    def interrupts(self) -> list[Any]:
        """The interrupts the run stopped on, once it ended."""
        self._drive()
        return self._interrupts

    def __iter__(self) -> Iterator[ProtocolEvent]:
        """Subscribe to the main event log (once)."""
        return iter(self._mux._events)

    def interleave(self, *names: str) -> Iterator[tuple[str, Any]]:
        """Read several projections at once, as ``(name, item)`` in push order.

        Raises:
            KeyError: an unknown projection name.
            TypeError: a projection that is not a sync StreamChannel.
            RuntimeError: a projection that already has a subscriber.
        """
        channels: dict[str, StreamChannel[Any]] = {}
        try:
            for name in names:
                channel = self.extensions[name]
                if not isinstance(channel, StreamChannel):
                    raise TypeError(
                        "interleave() requires StreamChannel projections, "
                        f"got {type(channel).__name__} for {name!r}"
                    )
                if channel._is_async:
                    raise TypeError(
                        f"StreamChannel {name!r} is bound to async mode — "
                        "sync interleave() cannot consume async channels."
                    )
                if channel._subscribed:
                    raise RuntimeError(
                        f"StreamChannel {name!r} already has a subscriber; "
                        "use .tee(n) for fan-out."
                    )
                channel._subscribed = True
                channels[name] = channel
            yield from self._interleaved(channels)
        finally:
            for channel in channels.values():
                channel._subscribed = False

    def _interleaved(
        self, channels: dict[str, StreamChannel[Any]]
    ) -> Iterator[tuple[str, Any]]:
        open_ = dict(channels)
        while open_:
            ready = [(ch._items[0][0], name) for name, ch in open_.items() if ch._items]
            if ready:
                name = min(ready)[1]
                yield name, open_[name]._items.popleft()[1]
                continue
            ended = [name for name, ch in open_.items() if ch._closed]
            for name in ended:
                if (error := open_.pop(name)._error) is not None:
                    raise error
            if ended or not open_:
                continue
            if not self._pump_next_any() and not any(
                ch._items or ch._closed for ch in open_.values()
            ):
                return  # the run cannot advance and these channels stay open

    def _pump_next_any(self) -> bool:
        pump = self._mux._pump_fn
        return pump is not None and pump()


class AsyncGraphRunStream(_RunState):
    """The async v3 run: ``async for`` it, or read its projections with ``async for``.

    Several consumers may read at once: one of them pulls the next part while
    the others wait for it. ``await run.output()`` (a method here) runs the
    graph to its end; ``async with`` stops it if you leave early.
    """

    subgraphs: StreamChannel[AsyncSubgraphRunStream]

    def __init__(
        self,
        graph_aiter: AsyncIterator[Any] | None,
        mux: StreamMux,
        *,
        wire_pump: bool = True,
    ) -> None:
        """Args: as :class:`GraphRunStream`, with the graph's async iterator."""
        self._graph_aiter = graph_aiter
        self._setup(mux)
        self._pump_cond = asyncio.Condition()
        self._pumping = False
        self._anext_task: asyncio.Future[Any] | None = None
        self._aborting = False
        if wire_pump:
            mux.bind_apump(self._apump_next)

    async def _apump_next(self) -> bool:
        """Pull one part (or wait while another consumer pulls); False once ended."""
        async with self._pump_cond:
            if self._exhausted or self._graph_aiter is None:
                return False
            if self._pumping:
                await self._pump_cond.wait()
                return not self._exhausted
            self._pumping = True
        try:
            return await self._pull()
        finally:
            async with self._pump_cond:
                self._pumping = False
                self._pump_cond.notify_all()

    async def _pull(self) -> bool:
        assert self._graph_aiter is not None
        # a child task, so abort() can cancel a pull in flight (and the nodes under it)
        self._anext_task = asyncio.ensure_future(self._graph_aiter.__anext__())
        try:
            part = await self._anext_task
        except StopAsyncIteration:
            self._exhausted = True
            await self._mux.aclose()
            return False
        except asyncio.CancelledError:
            if self._aborting:
                self._exhausted = True
                return False
            self._anext_task.cancel()
            raise
        except Exception as exc:
            self._exhausted = True
            await self._mux.afail(exc)
            return False
        finally:
            self._anext_task = None
        event = to_protocol_event(part)
        self._observe_event(event)
        try:
            await self._mux.apush(event)
        except Exception as exc:
            self._exhausted = True
            await self._aclose_graph()
            await self._mux.afail(exc)
            return False
        return True

    async def _aclose_graph(self) -> None:
        graph_aiter, self._graph_aiter = self._graph_aiter, None
        if graph_aiter is not None and (aclose := getattr(graph_aiter, "aclose", None)):
            with contextlib.suppress(Exception):
                await aclose()

    async def abort(self) -> None:
        """Stop the run now (a pull in flight is cancelled, the generator closed)
        and close every projection. Does nothing once the run ended."""
        async with self._pump_cond:
            if self._exhausted:
                return
            self._exhausted = True
            self._aborting = True
            pending = self._anext_task
            self._pump_cond.notify_all()
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending
        await self._aclose_graph()
        with contextlib.suppress(Exception):
            await self._mux.aclose()

    async def __aenter__(self) -> AsyncGraphRunStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.abort()

    async def _adrive(self) -> None:
        while await self._apump_next():
            pass
        self._raise_error()

    async def output(self) -> dict[str, Any] | None:
        """The run's last state, once it ended.

        Raises:
            BaseException: the error the run ended with.
        """
        await self._adrive()
        return self._latest

    async def interrupted(self) -> bool:
        """Whether the run stopped on interrupts, once it ended."""
        await self._adrive()
        return self._interrupted

    async def interrupts(self) -> list[Any]:
        """The interrupts the run stopped on, once it ended."""
        await self._adrive()
        return self._interrupts

    def __aiter__(self) -> AsyncIterator[ProtocolEvent]:
        """Subscribe to the main event log (once)."""
        return self._mux._events.__aiter__()


class SubgraphRunStream(GraphRunStream):
    """A subgraph seen from its parent's run (an item of ``run.subgraphs``).

    Its projections hold the subgraph's own events; reading them advances the
    parent run. Subscribe to them in the loop body that received the handle,
    before the parent moves on. ``status`` is ``"started"`` until the subgraph
    ends (``"completed"``, ``"failed"``, ``"interrupted"`` or ``"drained"``).
    """

    path: tuple[str, ...]
    graph_name: str | None
    trigger_call_id: str | None
    status: SubgraphStatus
    error: str | None

    def __init__(
        self,
        mux: StreamMux,
        *,
        path: tuple[str, ...],
        graph_name: str | None = None,
        trigger_call_id: str | None = None,
    ) -> None:
        """Args:
        mux: the child mux (its pump is the parent run's).
        path: the subgraph's namespace.
        graph_name: its node name (or its agent name).
        trigger_call_id: the id of the parent task that runs it.
        """
        self._parent_pump_fn: Callable[[], bool] | None = mux._pump_fn
        super().__init__(None, mux, wire_pump=False)
        self.path = path
        self.graph_name = graph_name
        self.trigger_call_id = trigger_call_id
        self.status = "started"
        self.error = None
        self._seen_terminal = False

    def _pump_next(self) -> bool:
        if (
            self._exhausted
            or self._seen_terminal
            or self._mux._events._closed
            or self._parent_pump_fn is None
        ):
            return False
        return self._parent_pump_fn()


class AsyncSubgraphRunStream(AsyncGraphRunStream):
    """Async twin of :class:`SubgraphRunStream`."""

    path: tuple[str, ...]
    graph_name: str | None
    trigger_call_id: str | None
    status: SubgraphStatus
    error: str | None

    def __init__(
        self,
        mux: StreamMux,
        *,
        path: tuple[str, ...],
        graph_name: str | None = None,
        trigger_call_id: str | None = None,
    ) -> None:
        """Args: as :class:`SubgraphRunStream`."""
        self._parent_apump_fn: Callable[[], Awaitable[bool]] | None = mux._apump_fn
        super().__init__(None, mux, wire_pump=False)
        self.path = path
        self.graph_name = graph_name
        self.trigger_call_id = trigger_call_id
        self.status = "started"
        self.error = None
        self._seen_terminal = False

    async def _apump_next(self) -> bool:
        if (
            self._exhausted
            or self._seen_terminal
            or self._mux._events._closed
            or self._parent_apump_fn is None
        ):
            return False
        return await self._parent_apump_fn()

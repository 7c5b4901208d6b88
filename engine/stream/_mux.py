"""StreamMux: routes a run's protocol events through its transformers into one log.

Each event goes through every transformer in registration order (any of them
may keep it out of the log), then into the main event log with the next
``seq`` number (root mux only). Named channels in the transformers'
projections forward their pushes into that log too, without going back
through the transformers. A mux built from factories can make child muxes for
subgraph handles (:meth:`StreamMux._make_child`), each with fresh transformers
scoped to the subgraph's namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from engine.stream._types import (
    ProtocolEvent,
    StreamTransformer,
    transformer_requires_async,
)
from engine.stream.stream_channel import StreamChannel

__all__ = ("StreamMux", "TransformerFactory")

TransformerFactory = Callable[[tuple[str, ...]], StreamTransformer]
"""Builds a transformer for a scope: a transformer class or ``lambda scope: ...``."""


class StreamMux:
    """The transformer pipeline and main event log of one run (or subgraph handle).

    Args:
        transformers: ready-made transformers, registered on this mux only.
        is_async: the run is consumed with ``async for`` (binds every channel so).
        factories: ``scope -> transformer`` callables, called now with ``scope``
            and again for each child mux.
        scope: the namespace this mux serves (``()`` for the root run).

    Transformers whose ``before_builtins`` is set are registered first (factories
    before ready-made ones, order kept within each group).

    Raises:
        RuntimeError: an async-only transformer in a sync mux.
        TypeError: a transformer's ``init()`` did not return a dict.
        ValueError: two transformers claim the same projection key.
    """

    def __init__(
        self,
        transformers: list[StreamTransformer] | None = None,
        *,
        is_async: bool = False,
        factories: list[TransformerFactory] | None = None,
        scope: tuple[str, ...] = (),
        _assign_seq: bool = True,
    ) -> None:
        self.is_async = is_async
        self.scope: tuple[str, ...] = scope
        self._assign_seq = _assign_seq
        self._events: StreamChannel[ProtocolEvent] = StreamChannel()
        self._events._bind(is_async=is_async)
        self._events._bind_mux(self)
        self._transformers: list[StreamTransformer] = []
        self._channels: list[StreamChannel[Any]] = []
        self._seq = 0
        self._push_seq = 0
        self.extensions: dict[str, Any] = {}
        """Every transformer's projections, by key (read-only for consumers)."""
        self.native_keys: set[str] = set()
        """Keys of native transformers' projections (also run stream attributes)."""
        self._projection_owners: dict[str, str] = {}
        self._transformer_by_key: dict[str, StreamTransformer] = {}
        self._factories = list(factories) if factories is not None else None
        self._pump_fn: Callable[[], bool] | None = None
        self._apump_fn: Callable[[], Awaitable[bool]] | None = None
        for group in (
            [factory(scope) for factory in factories or ()],
            list(transformers or ()),
        ):
            for transformer in sorted(
                group, key=lambda t: not getattr(t, "before_builtins", False)
            ):
                self._register(transformer)

    def transformer_by_key(self, key: str) -> StreamTransformer | None:
        """The transformer that contributed projection ``key``."""
        return self._transformer_by_key.get(key)

    def _next_push_seq(self) -> int:
        self._push_seq += 1
        return self._push_seq

    # -- pumps and children ------------------------------------------------------

    def bind_pump(self, fn: Callable[[], bool]) -> None:
        """Let every cursor of this mux (and its future children) advance the run."""
        self._pump_fn = fn
        self._events._request_more = fn
        for channel in self._channels:
            channel._request_more = fn
        for transformer in self._transformers:
            if (bind := getattr(transformer, "_bind_pump", None)) is not None:
                bind(fn)

    def bind_apump(self, fn: Callable[[], Awaitable[bool]]) -> None:
        """Async twin of :meth:`bind_pump`."""
        self._apump_fn = fn
        self._events._arequest_more = fn
        for channel in self._channels:
            channel._arequest_more = fn
        for transformer in self._transformers:
            if (bind := getattr(transformer, "_bind_apump", None)) is not None:
                bind(fn)

    def _make_child(self, scope: tuple[str, ...]) -> StreamMux:
        """A mux for a subgraph handle: fresh transformers for ``scope``, same pump.

        Raises:
            RuntimeError: this mux was built from ready-made transformers, which
                cannot be cloned for another scope.
        """
        if self._factories is None:
            raise RuntimeError(
                "StreamMux._make_child requires the mux to be constructed with "
                "`factories=`; pre-built transformers can't be cloned to a new scope."
            )
        child = StreamMux(
            factories=self._factories,
            is_async=self.is_async,
            scope=scope,
            _assign_seq=False,
        )
        if self._pump_fn is not None:
            child.bind_pump(self._pump_fn)
        if self._apump_fn is not None:
            child.bind_apump(self._apump_fn)
        return child

    def _register(self, transformer: StreamTransformer) -> None:
        if not self.is_async and transformer_requires_async(transformer):
            raise RuntimeError(
                f"{type(transformer).__name__} requires an async run — it overrides "
                "aprocess/afinalize/afail or sets requires_async=True. Use "
                "astream_events(), not stream_events()."
            )
        projection = transformer.init()
        if not isinstance(projection, dict):
            raise TypeError(
                "StreamTransformer.init() must return a dict, "
                f"got {type(projection).__name__}"
            )
        if clashes := sorted(set(projection) & set(self.extensions)):
            owners = ", ".join(
                f"{key!r} (owned by {self._projection_owners[key]})" for key in clashes
            )
            raise ValueError(
                f"Transformer {type(transformer).__name__} returned projection keys "
                f"that conflict with already-registered keys: {owners}"
            )
        native = bool(getattr(transformer, "_native", False))
        self._transformers.append(transformer)
        for value in projection.values():
            if isinstance(value, StreamChannel):
                self._adopt(value, native=native)
        self.extensions.update(projection)
        for key in projection:
            self._projection_owners[key] = type(transformer).__name__
            self._transformer_by_key[key] = transformer
        if native:
            self.native_keys.update(projection)
        transformer._on_register(self)

    def _adopt(self, channel: StreamChannel[Any], *, native: bool) -> None:
        channel._bind(is_async=self.is_async)
        channel._bind_mux(self)
        self._channels.append(channel)
        if channel.name is not None:
            method = channel.name if native else f"custom:{channel.name}"
            channel._wire(lambda item: self._forward(method, item))

    # -- events ------------------------------------------------------------------

    def _append(self, event: ProtocolEvent) -> None:
        if self._assign_seq:
            self._seq += 1
            event["seq"] = self._seq
        self._events.push(event)

    def push(self, event: ProtocolEvent) -> None:
        """Route ``event`` through the transformers, then into the main log.

        Events that transformers forward while processing it get earlier
        ``seq`` numbers than ``event`` itself.
        """
        keep = True
        for transformer in self._transformers:
            if not transformer.process(event):
                keep = False
        if keep:
            self._append(event)

    async def apush(self, event: ProtocolEvent) -> None:
        """Async twin of :meth:`push`: awaits each transformer's ``aprocess``."""
        keep = True
        for transformer in self._transformers:
            if not await transformer.aprocess(event):
                keep = False
        if keep:
            self._append(event)

    def _forward(self, method: str, item: Any) -> None:
        """A named channel's push, as an event of this mux's log (no transformers)."""
        self._append(
            {
                "type": "event",
                "method": method,
                "params": {
                    "namespace": [],
                    "timestamp": int(time.time() * 1000),
                    "data": item,
                },
            }
        )

    # -- the end -----------------------------------------------------------------

    def _close_channels(self) -> None:
        for channel in self._channels:
            if not channel._closed:
                channel.close()
        self._events.close()

    def _fail_channels(self, err: BaseException) -> None:
        for channel in self._channels:
            if not channel._closed:
                channel.fail(err)
        if not self._events._closed:
            self._events.fail(err)

    def close(self) -> None:
        """The run ended: finalize every transformer, then close every channel.

        Raises:
            BaseException: the first ``finalize()`` error, after everything closed.
        """
        first: BaseException | None = None
        for transformer in self._transformers:
            try:
                transformer.finalize()
            except BaseException as exc:
                first = first or exc
        self._close_channels()
        if first is not None:
            raise first

    def fail(self, err: BaseException) -> None:
        """The run failed: tell every transformer, then fail every channel with ``err``."""
        for transformer in self._transformers:
            with contextlib.suppress(Exception):  # the run's own error is what counts
                transformer.fail(err)
        self._fail_channels(err)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`; first waits for scheduled transformer tasks.

        Raises:
            BaseException: a scheduled task's error (``on_error="raise"``) or the
                first ``afinalize()`` error.
        """
        if pending := self._scheduled_tasks():
            results = await asyncio.gather(*pending, return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException) and not isinstance(
                    result, asyncio.CancelledError
                ):
                    raise result
        first: BaseException | None = None
        for transformer in self._transformers:
            try:
                await transformer.afinalize()
            except BaseException as exc:
                first = first or exc
        self._close_channels()
        if first is not None:
            raise first

    async def afail(self, err: BaseException) -> None:
        """Async twin of :meth:`fail`; first cancels scheduled transformer tasks."""
        if pending := self._scheduled_tasks():
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for transformer in self._transformers:
            with contextlib.suppress(Exception):
                await transformer.afail(err)
        self._fail_channels(err)

    def _scheduled_tasks(self) -> list[asyncio.Task[Any]]:
        return [
            task
            for transformer in self._transformers
            for task in transformer.__dict__.get("_scheduled_tasks", ())
            if not task.done()
        ]

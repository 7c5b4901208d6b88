"""StreamChannel: a single-consumer log of items that a run's consumer drains.

Transformers push items; one consumer iterates them (``for`` in a sync run,
``async for`` in an async run, fixed when the mux binds the channel). When the
buffer is empty, the consumer's cursor asks the run to advance (the "pump")
instead of waiting on a thread, so nothing runs ahead of the reader. Items are
buffered only once someone subscribed; a named channel also forwards each item
into the run's main event log, subscribed or not.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from engine.stream._mux import StreamMux

__all__ = ("StreamChannel",)

T = TypeVar("T")

_unowned_stamps = itertools.count(1)


class StreamChannel(Generic[T]):
    """A drainable log with one subscriber; ``tee(n)``/``atee(n)`` fan it out.

    Args:
        name: when set, every push is also forwarded into the run's event log as
            a protocol event (method ``name`` for a native transformer's
            channel, ``custom:<name>`` otherwise). Without a name the channel is
            local to the process.
        maxlen: must be positive or None; accepted for LangGraph compatibility
            and not enforced (the caller-driven pump already bounds the buffer
            to what one step produces).

    Raises:
        ValueError: ``maxlen`` is not positive.
    """

    def __init__(self, name: str | None = None, *, maxlen: int | None = None) -> None:
        if maxlen is not None and maxlen <= 0:
            raise ValueError("StreamChannel maxlen must be a positive int or None")
        self.name = name
        self._maxlen = maxlen
        self._items: deque[tuple[int, T]] = deque()
        self._closed = False
        self._error: BaseException | None = None
        self._is_async: bool | None = None
        self._subscribed = False
        self._request_more: Callable[[], bool] | None = None
        self._arequest_more: Callable[[], Awaitable[bool]] | None = None
        self._wire_fn: Callable[[T], None] | None = None
        self._mux: StreamMux | None = None

    # -- wiring (done by the mux) ------------------------------------------------

    def _bind_mux(self, mux: StreamMux) -> None:
        self._mux = mux

    def _bind(self, *, is_async: bool) -> None:
        if self._is_async is not None:
            raise RuntimeError("StreamChannel is already bound")
        self._is_async = is_async

    def _wire(self, fn: Callable[[T], None]) -> None:
        self._wire_fn = fn

    # -- producing ---------------------------------------------------------------

    def push(self, item: T) -> None:
        """Append ``item`` (for the subscriber, if any) and forward it when wired.

        Raises:
            RuntimeError: the channel is closed and has a subscriber.
        """
        if self._subscribed:
            if self._closed:
                raise RuntimeError("Cannot push to a closed StreamChannel")
            mux = self._mux
            stamp = mux._next_push_seq() if mux is not None else next(_unowned_stamps)
            self._items.append((stamp, item))
        if self._wire_fn is not None:
            self._wire_fn(item)

    def close(self) -> None:
        """No more items: the subscriber's iteration ends after the buffered ones."""
        self._closed = True

    def fail(self, err: BaseException) -> None:
        """End with ``err``: the subscriber gets it after the buffered items."""
        self._error = err
        self._closed = True

    # -- consuming ---------------------------------------------------------------

    def _subscribe(self, *, is_async: bool) -> None:
        if self._is_async is None:
            raise TypeError(
                "StreamChannel has not been bound yet. "
                "Register the transformer with a StreamMux first."
            )
        if self._is_async and not is_async:
            raise TypeError(
                "This StreamChannel is bound to async mode — use 'async for' instead."
            )
        if is_async and not self._is_async:
            raise TypeError(
                "This StreamChannel is bound to sync mode — use 'for' instead."
            )
        if self._subscribed:
            fan_out = ".atee(n)" if is_async else ".tee(n)"
            raise RuntimeError(
                f"StreamChannel already has a subscriber; use {fan_out} for fan-out."
            )
        self._subscribed = True

    def __iter__(self) -> Iterator[T]:
        """Subscribe (once) and iterate, driving the run when the buffer is empty.

        Raises:
            TypeError: unbound, or bound to an async run.
            RuntimeError: someone already subscribed.
        """
        self._subscribe(is_async=False)
        return self._cursor()

    def _cursor(self) -> Iterator[T]:
        items = self._items
        while True:
            if items:
                yield items.popleft()[1]
            elif self._closed:
                if self._error is not None:
                    raise self._error
                return
            elif (self._request_more is None or not self._request_more()) and not (
                items or self._closed
            ):
                return  # the run cannot advance and nothing came

    def __aiter__(self) -> AsyncIterator[T]:
        """Async twin of ``__iter__`` (for channels of an async run)."""
        self._subscribe(is_async=True)
        return self._acursor()

    async def _acursor(self) -> AsyncIterator[T]:
        items = self._items
        while True:
            if items:
                yield items.popleft()[1]
            elif self._closed:
                if self._error is not None:
                    raise self._error
                return
            elif (
                self._arequest_more is None or not await self._arequest_more()
            ) and not (items or self._closed):
                return

    def tee(self, n: int = 2) -> tuple[Iterator[T], ...]:
        """Subscribe and return ``n`` iterators that each see every item.

        Raises:
            ValueError: ``n`` < 1. (And as ``__iter__``.)
        """
        if n < 1:
            raise ValueError("tee() requires n >= 1")
        source = iter(self)
        buffers: list[deque[T]] = [deque() for _ in range(n)]
        done = False

        def branch(buffer: deque[T]) -> Iterator[T]:
            nonlocal done
            while True:
                if buffer:
                    yield buffer.popleft()
                    continue
                if done:
                    return
                try:
                    item = next(source)
                except StopIteration:
                    done = True
                    return
                for other in buffers:
                    other.append(item)

        return tuple(branch(buffer) for buffer in buffers)

    def atee(self, n: int = 2) -> tuple[AsyncIterator[T], ...]:
        """Async twin of :meth:`tee`; branches take turns pulling from the source.

        Raises:
            ValueError: ``n`` < 1. (And as ``__aiter__``.)
        """
        if n < 1:
            raise ValueError("atee() requires n >= 1")
        source = self.__aiter__()
        buffers: list[deque[T]] = [deque() for _ in range(n)]
        state: dict[str, Any] = {"done": False, "error": None}
        lock = asyncio.Lock()

        async def branch(buffer: deque[T]) -> AsyncIterator[T]:
            while True:
                if buffer:
                    yield buffer.popleft()
                    continue
                if state["done"]:
                    if state["error"] is not None:
                        raise state["error"]
                    return
                async with lock:
                    if buffer or state["done"]:
                        continue
                    try:
                        item = await source.__anext__()
                    except StopAsyncIteration:
                        state["done"] = True
                        continue
                    except Exception as exc:
                        state["done"], state["error"] = True, exc
                        continue
                    for other in buffers:
                        other.append(item)

        return tuple(branch(buffer) for buffer in buffers)

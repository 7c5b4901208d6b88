"""Sending to a Channels group from synchronous code (workers, views, services).

``async_to_sync(layer.group_send)`` called from a plain thread runs the send on a
new event loop each time. The Redis layer keeps its connections per event loop,
so each publish then opened and closed a Redis connection: about 8 ms a publish,
most of a short run's cost in a worker. Here one daemon thread per process runs
one event loop, and one sender task on it sends every publish to such a layer in
the order they were made, over connections made once.

A publish does not wait for Redis: the caller (a worker between two steps) hands
the message over and goes on. Nothing depends on a notification arriving: the
event table is the truth, a notification only says "read the table after your
last event", and every reader also catches up from the table on its own
(``thread_feed``, the SSE streams). What can go wrong is bounded: at most
:data:`MAX_QUEUED` publishes wait at once (beyond that a publish waits up to
:data:`SEND_TIMEOUT` seconds for room, then raises ``TimeoutError`` for the caller
to log), each send gives up after :data:`SEND_TIMEOUT` seconds, and a failed send
is logged here. :func:`drain` waits for what is queued (a stopping worker).

In-memory layers (the embedded layer, Channels' own) keep ``async_to_sync``:
their sends must reach the consumers' loop, which they already arrange
(``studio.layers``), and they open no connections.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer

__all__ = ("MAX_QUEUED", "SEND_TIMEOUT", "drain", "group_send")

log = logging.getLogger(__name__)

SEND_TIMEOUT = 5.0
"""Seconds one send may take, and a publish may wait for room in the queue."""

MAX_QUEUED = 1000
"""Publishes that may wait to be sent at once (Redis slow or down)."""

_lock = threading.Lock()
_publisher: _Publisher | None = None


def group_send(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` on the default layer (no layer: nothing to do)."""
    layer = get_channel_layer()
    if layer is None:
        return
    if isinstance(layer, InMemoryChannelLayer):
        async_to_sync(layer.group_send)(group, message)
        return
    _running_publisher().submit(layer, group, message)


def drain(timeout: float = SEND_TIMEOUT) -> bool:
    """Wait until every queued publish was sent (or given up); False on timeout."""
    publisher = _publisher
    return True if publisher is None else publisher.drain(timeout)


class _Publisher:
    """One event loop in a daemon thread, and one task on it that sends in order."""

    def __init__(self) -> None:
        self.room = threading.BoundedSemaphore(MAX_QUEUED)
        self.idle = threading.Condition()
        self.queued = 0
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[tuple[BaseChannelLayer, str, dict[str, Any]]]
        ready = threading.Event()
        threading.Thread(
            target=self._serve, args=(ready,), name="channel-publisher", daemon=True
        ).start()
        ready.wait()

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.queue = asyncio.Queue()
        self.loop.create_task(self._send_forever())
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def submit(
        self, layer: BaseChannelLayer, group: str, message: dict[str, Any]
    ) -> None:
        if not self.room.acquire(timeout=SEND_TIMEOUT):
            raise TimeoutError(
                f"{MAX_QUEUED} publishes are waiting for the channel layer"
            )
        with self.idle:
            self.queued += 1
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (layer, group, message))

    async def _send_forever(self) -> None:
        while True:
            layer, group, message = await self.queue.get()
            try:
                await asyncio.wait_for(layer.group_send(group, message), SEND_TIMEOUT)
            except Exception:  # readers catch up from the event table
                log.warning(
                    "could not publish %s to %s",
                    message.get("type"),
                    group,
                    exc_info=True,
                )
            finally:
                self.room.release()
                with self.idle:
                    self.queued -= 1
                    if not self.queued:
                        self.idle.notify_all()

    def drain(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.idle:
            while self.queued:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.idle.wait(left)
        return True

    def running(self) -> bool:
        return self.loop.is_running()


def _forget_after_fork() -> None:
    global _publisher, _lock
    _publisher, _lock = None, threading.Lock()  # the thread did not survive the fork


os.register_at_fork(after_in_child=_forget_after_fork)


def _running_publisher() -> _Publisher:
    """The process's publisher, started on first use (again after a fork)."""
    global _publisher
    publisher = _publisher
    if publisher is not None and publisher.running():
        return publisher
    with _lock:
        if _publisher is None or not _publisher.running():
            _publisher = _Publisher()
        return _publisher

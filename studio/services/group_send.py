"""Sending to a Channels group from synchronous code (workers, views, services).

``async_to_sync(layer.group_send)`` called from a plain thread runs the send on a
new event loop each time. The Redis layer keeps its connections per event loop,
so each publish then opened and closed a Redis connection: about 8 ms a publish,
most of a short run's cost in a worker. Here one daemon thread per process runs
one event loop for every publish to such a layer, so the connection is made once
and a publish costs a round trip to Redis.

In-memory layers (the embedded layer, Channels' own) keep ``async_to_sync``:
their sends must reach the consumers' loop, which they already arrange
(``studio.layers``), and they open no connections.

A publish waits for the layer (at most :data:`SEND_TIMEOUT` seconds) so events of
one thread go out in order; failures are the caller's to log: the event table is
the truth, and every reader catches up from it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

__all__ = ("SEND_TIMEOUT", "group_send")

SEND_TIMEOUT = 5.0
"""Seconds a publish waits for the channel layer before it gives up."""

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def group_send(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` on the default layer (no layer: nothing to do)."""
    layer = get_channel_layer()
    if layer is None:
        return
    if isinstance(layer, InMemoryChannelLayer):
        async_to_sync(layer.group_send)(group, message)
        return
    done = asyncio.run_coroutine_threadsafe(
        layer.group_send(group, message), _publishing_loop()
    )
    try:
        done.result(timeout=SEND_TIMEOUT)
    except TimeoutError:
        done.cancel()
        raise


def _publishing_loop() -> asyncio.AbstractEventLoop:
    """The process's publishing loop, started on first use in a daemon thread."""
    global _loop
    loop = _loop
    if loop is not None and loop.is_running():
        return loop
    with _lock:
        if _loop is None or not _loop.is_running():
            ready = threading.Event()
            fresh = asyncio.new_event_loop()

            def serve() -> None:
                asyncio.set_event_loop(fresh)
                fresh.call_soon(ready.set)
                fresh.run_forever()

            threading.Thread(
                target=serve, name="channel-publisher", daemon=True
            ).start()
            ready.wait()
            _loop = fresh
        return _loop

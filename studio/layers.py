"""The embedded channel layer: Channels' in-memory layer, safe to publish to from threads.

Channels' ``InMemoryChannelLayer`` keeps one ``asyncio.Queue`` per channel, bound to
the event loop of the consumers that wait on it (Daphne's). The embedded worker is a
plain thread: its ``async_to_sync(layer.group_send)`` runs on a loop of its own, so
the queue's waiter is woken from the wrong thread and the consumer's loop is never
told (and is touched from two threads). Messages then sit unseen until something else
wakes that loop (measured with nothing else going on: not within 10 s), which would
make live updates depend on polling.

This layer remembers the loop its consumers receive on and runs every send there
(``run_coroutine_threadsafe``), so a publish from any thread wakes the consumers at
once. Scale-out uses Redis instead (``REDIS_URL``), which needs none of this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import InMemoryChannelLayer

__all__ = ("HOP_TIMEOUT", "EmbeddedChannelLayer")

HOP_TIMEOUT = 5.0
"""Seconds a send from another thread waits for the consumers' loop to run it."""


class EmbeddedChannelLayer(InMemoryChannelLayer):  # type: ignore[misc]
    """``InMemoryChannelLayer`` whose sends always run on the consumers' event loop."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._home: asyncio.AbstractEventLoop | None = None

    async def receive(self, channel: str) -> Any:
        self._home = asyncio.get_running_loop()
        return await super().receive(channel)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._at_home(super().send, channel, message)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self._at_home(super().group_send, group, message)

    async def _at_home(
        self, method: Callable[..., Awaitable[None]], *args: Any
    ) -> None:
        home = self._home
        if home is None or not home.is_running() or home is asyncio.get_running_loop():
            await method(*args)
            return
        done = asyncio.run_coroutine_threadsafe(_call(method, *args), home)
        # A loop that stopped without closing would never run it: give up (the
        # event is in the table; the browser catches up on its next connect).
        await asyncio.wait_for(asyncio.wrap_future(done), HOP_TIMEOUT)


async def _call(method: Callable[..., Awaitable[None]], *args: Any) -> None:
    await method(*args)

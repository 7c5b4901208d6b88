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
once. Scale-out uses Redis instead (``REDIS_URL``): :class:`RedisLayer`.

:class:`RedisLayer` is channels-redis' layer, made to ride out a Redis outage. Its
``receive`` used to raise as soon as Redis went away, which ended every consumer
of the process (each WebSocket closed with 1011), and a restarted Redis has lost
every group membership, so a socket that lived through it would never hear of an
event again. Here a receiver waits instead: every :data:`RETRY_SECONDS` it tries
to join its channel's groups again (the layer remembers them in this process),
and when that works Redis is back and it receives as before. Meanwhile
:attr:`RedisLayer.down` is true, so the consumers read the event table
themselves (the table is the truth; the layer only wakes readers up). It also
sends to a group no one listens to in one round trip (:meth:`RedisLayer.group_send`).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import InMemoryChannelLayer
from channels_redis.core import RedisChannelLayer  # type: ignore[import-untyped]
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ("HOP_TIMEOUT", "RETRY_SECONDS", "EmbeddedChannelLayer", "RedisLayer")

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0
"""While Redis is away, how often a receiver tries to join its groups again."""
_LOST = (RedisConnectionError, RedisTimeoutError, OSError)

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


_LIVE_MEMBERS = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1])
return redis.call('ZCARD', KEYS[1])
"""
"""Drop a group's expired members, then count those left: one round trip."""
_LIVE_MEMBERS_SHA = hashlib.sha1(_LIVE_MEMBERS.encode()).hexdigest()


class RedisLayer(RedisChannelLayer):  # type: ignore[misc]
    """``RedisChannelLayer`` whose receivers wait out a Redis outage (see the module
    doc), and whose sends to a group no one listens to cost one round trip."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._joined: dict[str, set[str]] = collections.defaultdict(set)
        self._lost: set[str] = set()
        """Channels whose groups must be joined again before they receive."""

    @property
    def down(self) -> bool:
        """Redis failed a call, and some channel of this process is not back in its
        groups yet (its socket reads the table meanwhile)."""
        return bool(self._lost)

    async def group_add(self, group: str, channel: str) -> None:
        """Join (remembered first: a receiver joins again once Redis is back)."""
        self._joined[channel].add(group)
        try:
            await super().group_add(group, channel)
        except _LOST:
            self._lost.add(channel)
            raise

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send to ``group``'s members, when it has some.

        channels-redis sends a group two commands before it looks at the members
        (drop the expired ones, list them), and nothing more when there are none.
        Most notifications go to such a group (a thread no one has open: every
        event batch of a worker's run is one), so that check is here one script
        doing both; a group with members is then sent to as channels-redis does
        (one round trip more than before for it: ~0.5 ms on a 12 ms event delay
        with two viewers, in ``benchmarks/studio_api.py``).
        """
        self.require_valid_group_name(group)  # raises TypeError for a bad one
        connection = self.connection(self.consistent_hash(group))
        key = self._group_key(group)
        expired = int(time.time()) - self.group_expiry
        try:
            members = await connection.evalsha(_LIVE_MEMBERS_SHA, 1, key, expired)
        except NoScriptError:  # a new or restarted Redis: EVAL caches it again
            members = await connection.eval(_LIVE_MEMBERS, 1, key, expired)
        if members:
            await super().group_send(group, message)

    async def group_discard(self, group: str, channel: str) -> None:
        groups = self._joined.get(channel)
        if groups is not None:
            groups.discard(group)
            if not groups:
                del self._joined[channel]
                self._lost.discard(channel)
        await super().group_discard(group, channel)

    async def receive(self, channel: str) -> Any:
        while True:
            if channel in self._lost:
                # Not straight back to receiving: Redis may have come back (empty,
                # without our groups) between a failed join and the next receive,
                # and a channel that receives again without joining hears nothing.
                await asyncio.sleep(RETRY_SECONDS)
                if not await self._join_again(channel):
                    continue
            try:
                return await super().receive(channel)
            except _LOST:
                if not self._lost:
                    log.warning("channel layer: Redis is unreachable; waiting for it")
                self._lost.add(channel)

    async def _join_again(self, channel: str) -> bool:
        """Join ``channel``'s groups again; True when that worked (Redis is back)."""
        try:
            for group in list(self._joined.get(channel, ())):
                await super().group_add(group, channel)
            if not self._joined.get(channel):
                await super().group_discard("layer-probe", channel)  # a round trip
        except _LOST:
            return False
        self._lost.discard(channel)
        if not self._lost:
            log.warning("channel layer: Redis answers again")
        return True

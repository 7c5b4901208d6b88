"""WebSocket consumers. Thin: check access, join a group, replay, forward (STYLE.md 7).

``/ws/threads/<thread_id>/?after=<event_id>`` streams a thread's run events.
On connect the consumer sends the stored events after ``after`` (so a browser
that reconnects misses nothing), then every new event as the worker publishes
it. ``format=html`` (the default, for htmx's ws extension) sends out-of-band
HTML fragments; ``format=json`` sends one JSON object per event.

The sockets of one thread in one process share a
:class:`~studio.services.thread_feed.ThreadFeed`: one table read per new event for
all of them, and each fragment rendered once.

The channel layer is at-most-once (channels-redis drops a message now and then,
e.g. when another consumer's ``receive`` is cancelled at the wrong moment), and a
run's last event has no later notification to bring it along: while a run of
the thread is pending or running, a socket that heard nothing for
:data:`POLL_SECONDS` reads the table itself, as the SSE follower does. While
Redis is away (``studio.layers.RedisLayer.down``) every socket reads the table
that way, run or no run, and once more when Redis is back: the socket stays
open through the outage and misses nothing.

Close codes: 4401 no session, 4403 not allowed to see the thread (also for a
thread that does not exist: the socket does not reveal which), 4404 no socket at
that address (:class:`NoSuchSocket`). Frames a client sends that are not a small
JSON object (binary, malformed, deeply nested) are ignored: they never close the
socket with an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from studio import json_input
from studio.groups import thread_group
from studio.services import thread_feed
from studio.services.thread_feed import ThreadFeed

__all__ = (
    "CLOSE_FORBIDDEN",
    "CLOSE_NOT_FOUND",
    "CLOSE_UNAUTHENTICATED",
    "NoSuchSocket",
    "ThreadConsumer",
)

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
MAX_FRAME = 4096
"""The longest client frame read (clients send ``{"after": id}`` at most)."""
POLL_SECONDS = 1.0
"""While a run is active, the longest a socket goes without reading the table."""
POLL_SHARE = 0.5
"""A poll is served by a read of the shared feed at most this many seconds old."""


class ThreadConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Live events of one thread."""

    group: str = ""
    last_id: int = 0
    format: str = "html"
    active: bool = False
    """A run of the thread is pending or running, as far as the events sent tell."""
    heard: float = 0.0
    poller: asyncio.Task[None] | None = None
    feed: ThreadFeed | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accept, then close with an application code: a handshake refusal would reach
        # the browser as 1006, which the htmx ws extension retries forever.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        if not await thread_feed.may_watch(user, thread_id):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.format = "json" if query.get("format", ["html"])[0] == "json" else "html"
        try:
            self.last_id = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_id = 0
        self.thread_id = thread_id
        self.group = thread_group(thread_id)
        self.sending = asyncio.Lock()
        self.feed = thread_feed.subscribe(thread_id)
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except Exception:  # Redis is away: read the table until the layer is back
            log.warning("thread socket: the channel layer is unreachable")
        joined = time.monotonic()
        self.active = await thread_feed.run_active(thread_id)
        if self.format == "json":
            await self.send_json(
                {"type": "hello", "thread_id": thread_id, "after": self.last_id}
            )
        await self._send_after(read_since=joined)
        self.poller = asyncio.create_task(self._poll())

    async def disconnect(self, code: int) -> None:
        if self.poller is not None:
            self.poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.poller
        if self.group:
            with contextlib.suppress(Exception):  # Redis is away: nothing to leave
                await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.feed is not None:
            thread_feed.unsubscribe(self.feed)
            self.feed = None

    def _layer_down(self) -> bool:
        return bool(getattr(self.channel_layer, "down", False))

    async def _poll(self) -> None:
        """Catch up from the table when a run is active and the layer went quiet,
        all the time while the layer is down, and once when it is back."""
        loop = asyncio.get_running_loop()
        self.heard = loop.time()
        was_down = False
        try:
            while True:
                await asyncio.sleep(max(0.05, self.heard + POLL_SECONDS - loop.time()))
                down = self._layer_down()
                if loop.time() - self.heard >= POLL_SECONDS or was_down != down:
                    self.heard = loop.time()
                    if self.active or down or was_down:
                        await self._send_after(read_since=time.monotonic() - POLL_SHARE)
                was_down = down
        except Exception:  # the socket is gone: there is nobody left to catch up
            return

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """A text frame holding a small JSON object, or nothing happens."""
        if text_data is None or len(text_data) > MAX_FRAME:
            return
        try:
            content = json_input.loads(text_data)
        except ValueError:
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients have nothing to send; a ``{"after": id}`` message asks for a catch-up."""
        if isinstance(content, dict) and isinstance(content.get("after"), int):
            self.last_id = max(self.last_id, content["after"])
            await self._send_after(read_since=time.monotonic() - POLL_SHARE)

    async def run_event(self, message: dict[str, Any]) -> None:
        """A worker published an event: send everything newer than what we sent."""
        self.heard = asyncio.get_running_loop().time()
        event_id = int(message.get("event_id", 0))
        if event_id > self.last_id:
            await self._send_after(at_least=event_id)

    async def _send_after(
        self, *, at_least: int = 0, read_since: float | None = None
    ) -> None:
        feed = self.feed
        if feed is None:
            return
        async with self.sending:  # the poller and the messages: one sender at a time
            events = await feed.after(
                self.last_id, at_least=at_least, read_since=read_since
            )
            for event in events:
                if event["id"] <= self.last_id:
                    continue
                self.last_id = event["id"]
                if event["kind"] == "run.status":
                    self.active = not event["finished"]
                if self.format == "json":
                    await self.send_json({"type": "event", **event})
                else:
                    await self.send(text_data=feed.html(event))


class NoSuchSocket(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Any other ``/ws/`` address (a thread id with a ``/``, a typo): closed with 4404.

    Without it the router raised in the handshake and Daphne answered with a 500.
    """

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)

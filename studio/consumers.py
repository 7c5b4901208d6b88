"""WebSocket consumers. Thin: check access, join a group, replay, forward (STYLE.md 7).

``/ws/threads/<thread_id>/?after=<event_id>`` streams a thread's run events.
On connect the consumer sends the stored events after ``after`` (so a browser
that reconnects misses nothing), then every new event as the worker publishes
it. ``format=html`` (the default, for htmx's ws extension) sends out-of-band
HTML fragments; ``format=json`` sends one JSON object per event.

The channel layer is at-most-once (channels-redis drops a message now and then,
e.g. when another consumer's ``receive`` is cancelled at the wrong moment), and a
run's last event has no later notification to bring it along: while a run of
the thread is pending or running, a socket that heard nothing for
:data:`POLL_SECONDS` reads the table itself, as the SSE follower does.

Close codes: 4401 no session, 4403 not allowed to see the thread (also for a
thread that does not exist: the socket does not reveal which).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.template.loader import render_to_string

from studio.groups import thread_group
from studio.models import Run, RunEvent, Thread
from studio.services.access import can_see
from studio.services.live import event_view

__all__ = ("CLOSE_FORBIDDEN", "CLOSE_UNAUTHENTICATED", "ThreadConsumer")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
BACKLOG_LIMIT = 1000
POLL_SECONDS = 1.0
"""While a run is active, the longest a socket goes without reading the table."""


def _may_see(user: Any, thread_id: str) -> bool:
    thread = Thread.objects.filter(pk=thread_id).first()
    return thread is not None and can_see(user, thread)


def _run_active(thread_id: str) -> bool:
    return Run.objects.filter(
        thread_id=thread_id, status__in=(Run.Status.PENDING, Run.Status.RUNNING)
    ).exists()


def _events_after(thread_id: str, after: int) -> list[dict[str, Any]]:
    rows = (
        RunEvent.objects.filter(thread_id=thread_id, id__gt=after)
        .exclude(kind=RunEvent.STREAM)  # API clients' SSE chunks: not activity
        .order_by("id")[:BACKLOG_LIMIT]
    )
    return [event_view(row) for row in rows]


class ThreadConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Live events of one thread."""

    group: str = ""
    last_id: int = 0
    format: str = "html"
    active: bool = False
    """A run of the thread is pending or running, as far as the events sent tell."""
    heard: float = 0.0
    poller: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accept, then close with an application code: a handshake refusal would reach
        # the browser as 1006, which the htmx ws extension retries forever.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        if not await database_sync_to_async(_may_see)(user, thread_id):
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
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.active = await database_sync_to_async(_run_active)(thread_id)
        if self.format == "json":
            await self.send_json(
                {"type": "hello", "thread_id": thread_id, "after": self.last_id}
            )
        await self._send_after()
        self.poller = asyncio.create_task(self._poll())

    async def disconnect(self, code: int) -> None:
        if self.poller is not None:
            self.poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.poller
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _poll(self) -> None:
        """Catch up from the table when a run is active and the layer went quiet."""
        loop = asyncio.get_running_loop()
        self.heard = loop.time()
        try:
            while True:
                await asyncio.sleep(max(0.05, self.heard + POLL_SECONDS - loop.time()))
                if loop.time() - self.heard >= POLL_SECONDS:
                    self.heard = loop.time()
                    if self.active:
                        await self._send_after()
        except Exception:  # the socket is gone: there is nobody left to catch up
            return

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients have nothing to send; a ``{"after": id}`` message asks for a catch-up."""
        if isinstance(content, dict) and isinstance(content.get("after"), int):
            self.last_id = max(self.last_id, content["after"])
            await self._send_after()

    async def run_event(self, message: dict[str, Any]) -> None:
        """A worker published an event: send everything newer than what we sent."""
        self.heard = asyncio.get_running_loop().time()
        if int(message.get("event_id", 0)) > self.last_id:
            await self._send_after()

    async def _send_after(self) -> None:
        async with self.sending:  # the poller and the messages: one sender at a time
            events = await database_sync_to_async(_events_after)(
                self.thread_id, self.last_id
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
                    html = render_to_string(
                        "components/_run_event.html", {"event": event}
                    )
                    await self.send(text_data=html)

"""A thread's activity events, read from the table once per process for all its sockets.

Every socket watching a thread (``studio.consumers.ThreadConsumer``) used to read
the event table itself on each notification: with 200 viewers of one run, 200
identical queries per event on the process's one database thread, and the last
socket got its frame seconds late. A :class:`ThreadFeed` is shared by the sockets
of one thread in one process: the first socket that needs events newer than the
feed holds reads them (one query), the others are served from memory, and each
event's HTML fragment is rendered once.

The feed keeps the last :data:`KEEP` events. A socket that resumes from an older
id (a reconnect after a long gap) reads the table on its own, as before.

What the feed knows: every activity event with ``base < id <= read_upto`` as of
its last read (``read_at``). It reads again when a socket asks for events past
``read_upto`` (a notification names its event id) or when its knowledge is older
than the caller accepts (the sockets' catch-up poll while a run is active).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from studio.models import Run, RunEvent, Thread
from studio.services.access import can_see
from studio.services.activity import event_view

__all__ = (
    "BACKLOG_LIMIT",
    "KEEP",
    "ThreadFeed",
    "may_watch",
    "run_active",
    "subscribe",
    "unsubscribe",
)

BACKLOG_LIMIT = 1000
"""Events one read returns at most (a socket far behind gets the rest on the next)."""
KEEP = 2000
"""Events a feed keeps in memory."""

_feeds: dict[tuple[asyncio.AbstractEventLoop, str], ThreadFeed] = {}
"""By event loop too: a feed's lock and sockets belong to one loop (tests run many)."""


def _read(thread_id: str, after: int) -> list[dict[str, Any]]:
    rows = (
        RunEvent.objects.filter(thread_id=thread_id, id__gt=after)
        .exclude(kind=RunEvent.STREAM)  # API clients' SSE chunks: not activity
        .order_by("id")[:BACKLOG_LIMIT]
    )
    return [event_view(row) for row in rows]


def _may_watch(user: Any, thread_id: str) -> bool:
    thread = Thread.objects.filter(pk=thread_id).first()
    return thread is not None and can_see(user, thread)


def _run_active(thread_id: str) -> bool:
    return Run.objects.filter(
        thread_id=thread_id, status__in=(Run.Status.PENDING, Run.Status.RUNNING)
    ).exists()


may_watch = database_sync_to_async(_may_watch)
"""``await may_watch(user, thread_id)``: the thread exists and ``user`` may see it."""
run_active = database_sync_to_async(_run_active)
"""``await run_active(thread_id)``: a run of the thread is pending or running."""
_read_async = database_sync_to_async(_read)


class ThreadFeed:
    """The recent activity events of one thread, shared by this process's sockets."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.subscribers = 0
        self.events: list[dict[str, Any]] = []
        self.base: int | None = None
        """Every event with ``base < id <= read_upto`` is in :attr:`events` (None: nothing read)."""
        self.read_upto = 0
        self.read_at = float("-inf")
        self._reading = asyncio.Lock()
        self._html: dict[int, str] = {}

    def _holds(self, after: int, at_least: int, read_since: float | None) -> bool:
        return (
            self.base is not None
            and self.base <= after
            and at_least <= self.read_upto
            and (read_since is None or self.read_at >= read_since)
        )

    def _cached_after(self, after: int) -> list[dict[str, Any]]:
        return [event for event in self.events if event["id"] > after]

    async def after(
        self, after: int, *, at_least: int = 0, read_since: float | None = None
    ) -> list[dict[str, Any]]:
        """Events with ``id > after``, oldest first (at most :data:`BACKLOG_LIMIT`).

        ``at_least``: an event id the caller knows exists (from a notification);
        ``read_since``: a ``time.monotonic()`` the feed's last read must have
        started at or after (a socket that just joined its group passes the time
        it joined, so no event published before that is missed).
        """
        if self._holds(after, at_least, read_since):
            return self._cached_after(after)
        if self.base is not None and after < self.base:
            return list(await _read_async(self.thread_id, after))  # far behind
        async with self._reading:
            if not self._holds(after, at_least, read_since):
                await self._read_more(after)
        if self.base is not None and after < self.base:  # trimmed while we waited
            return list(await _read_async(self.thread_id, after))
        return self._cached_after(after)[:BACKLOG_LIMIT]

    async def _read_more(self, after: int) -> None:
        start = after if self.base is None else self.read_upto
        read_at = time.monotonic()
        fresh = await _read_async(self.thread_id, start)
        if self.base is None:
            self.base = start
        self.events.extend(fresh)
        self.read_upto = fresh[-1]["id"] if fresh else max(self.read_upto, start)
        self.read_at = read_at
        if len(self.events) > KEEP:
            dropped, self.events = self.events[:-KEEP], self.events[-KEEP:]
            self.base = dropped[-1]["id"]
            for event in dropped:
                self._html.pop(event["id"], None)

    def html(self, event: dict[str, Any]) -> str:
        """The event's fragment, rendered once per process: an Activity entry, or
        for a ``token`` event a piece of the transcript's streamed message."""
        found = self._html.get(event["id"])
        if found is None:
            template = (
                "components/_token.html"
                if event.get("token")
                else "components/_run_event.html"
            )
            found = render_to_string(template, {"event": event})
            if self.base is not None and event["id"] > self.base:  # one we keep
                self._html[event["id"]] = found
        return found


def subscribe(thread_id: str) -> ThreadFeed:
    """The process's feed of ``thread_id`` for one more socket (call on the event loop)."""
    key = (asyncio.get_running_loop(), thread_id)
    feed = _feeds.get(key)
    if feed is None:
        feed = _feeds[key] = ThreadFeed(thread_id)
    feed.subscribers += 1
    return feed


def unsubscribe(feed: ThreadFeed) -> None:
    """One socket fewer; the feed is dropped with its last socket."""
    feed.subscribers -= 1
    if feed.subscribers <= 0:
        for key, held in list(_feeds.items()):
            if held is feed:
                del _feeds[key]

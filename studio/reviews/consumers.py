"""``/ws/reviews/``: the live review count badge (and the queue, on the queue page).

Thin (STYLE.md 7): check the session is a reviewer's (else close 4401 / 4403),
join the ``reviews`` group, and on every ``reviews.changed`` send the badge
fragment (and, with ``?view=queue``, the queue table) rendered for this user.
Fragments carry the ids they replace; the htmx ws extension swaps them.

While the channel layer is down (Redis away: ``RedisLayer.down``) the socket
still opens and shows the queue; notifications are lost meanwhile, so it sends
the state again every :data:`CATCH_UP_SECONDS`, and once when the layer is back
(the layer joins the group again by itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from studio.reviews import console
from studio.reviews.queue import REVIEWS_GROUP, pending_count
from studio.services.access import review_levels

__all__ = ("ReviewsConsumer",)

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CATCH_UP_SECONDS = 5.0
"""While the channel layer is down, how often a socket sends the state again."""


class ReviewsConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
    joined = False
    catch_up: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(review_levels)(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.view = query.get("view", [""])[0]
        self.filters = {
            key: query.get(key, [""])[0][:200]
            for key in ("vendor", "category", "level")
        }
        self.joined = True
        try:
            await self.channel_layer.group_add(REVIEWS_GROUP, self.channel_name)
        except Exception:  # Redis is away: the state is sent again meanwhile
            log.warning("review socket: the channel layer is unreachable")
        await self._send_state()
        self.catch_up = asyncio.create_task(self._catch_up())

    async def disconnect(self, code: int) -> None:
        if self.catch_up is not None:
            self.catch_up.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.catch_up
        if self.joined:
            with contextlib.suppress(Exception):  # Redis is away: nothing to leave
                await self.channel_layer.group_discard(REVIEWS_GROUP, self.channel_name)

    async def _catch_up(self) -> None:
        """Send the state every few seconds while the layer is down, and once
        when it is back (what changed meanwhile was never announced)."""
        was_down = False
        while True:
            await asyncio.sleep(CATCH_UP_SECONDS)
            down = bool(getattr(self.channel_layer, "down", False))
            if down or was_down:
                await self._send_state()
            was_down = down

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Clients have nothing to send; any message asks for the current state."""
        await self._send_state()

    async def reviews_changed(self, message: dict[str, Any]) -> None:
        await self._send_state()

    async def _send_state(self) -> None:
        html = await database_sync_to_async(self._render)()
        await self.send(text_data=html)

    def _render(self) -> str:
        user = self.scope["user"]
        html = render_to_string(
            "components/_review_badge.html", {"review_count": pending_count(user)}
        )
        if self.view == "queue":
            page = console.queue_page(user, **self.filters)
            html += render_to_string("reviews/queue.html#review-queue", {"page": page})
        return html

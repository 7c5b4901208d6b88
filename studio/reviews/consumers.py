"""``/ws/reviews/``: the live review count badge (and the queue, on the queue page).

Thin (STYLE.md 7): check the session is a reviewer's (else close 4401 / 4403),
join the ``reviews`` group, and on every ``reviews.changed`` send the badge
fragment (and, with ``?view=queue``, the queue table) rendered for this user.
Fragments carry the ids they replace; the htmx ws extension swaps them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from studio.reviews import console
from studio.reviews.queue import REVIEWS_GROUP, pending_count
from studio.services.access import review_levels

__all__ = ("ReviewsConsumer",)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class ReviewsConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
    joined = False

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
        await self.channel_layer.group_add(REVIEWS_GROUP, self.channel_name)
        self.joined = True
        await self._send_state()

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await self.channel_layer.group_discard(REVIEWS_GROUP, self.channel_name)

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

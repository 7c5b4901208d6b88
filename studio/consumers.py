"""WebSocket consumers. Thin: check access, join a group, forward events (STYLE.md 7)."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

__all__ = ("CLOSE_UNAUTHENTICATED", "ThreadConsumer")

CLOSE_UNAUTHENTICATED = 4401


class ThreadConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Live events of one thread at ``/ws/threads/<thread_id>/``.

    For now it only greets; the event stream arrives with the run worker.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accept, then close with an application code: a handshake refusal would reach
        # the browser as 1006, which the htmx ws extension retries forever.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        await self.send_json({"type": "hello", "thread_id": thread_id})

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients have nothing to send yet; ignore what arrives."""

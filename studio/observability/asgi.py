"""ASGI middleware that counts open WebSocket connections and SSE streams.

Wraps the HTTP and WebSocket applications in ``studio.asgi``. A WebSocket counts
from its ``websocket.accept`` until the consumer returns; an HTTP response
counts as an SSE stream from a ``text/event-stream`` start until its body ends.
The gauge is ``studio_open_connections{kind="websocket"|"sse"}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from studio.observability.metrics import CONNECTIONS

__all__ = ("CountConnections",)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[..., Awaitable[None]]
"""Any ASGI app (Django's and Channels' type their scope and messages differently)."""


def _opens(kind: str, message: Message) -> bool:
    if kind == "websocket":
        return bool(message.get("type") == "websocket.accept")
    if message.get("type") != "http.response.start":
        return False
    for name, value in message.get("headers") or ():
        if bytes(name).lower() == b"content-type":
            return bytes(value).split(b";")[0].strip().lower() == b"text/event-stream"
    return False


class CountConnections:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = {"websocket": "websocket", "http": "sse"}.get(scope["type"])
        if kind is None:
            await self.app(scope, receive, send)
            return
        gauge = CONNECTIONS.labels(kind)
        opened = False

        async def counting_send(message: Message) -> None:
            nonlocal opened
            if not opened and _opens(kind, message):
                opened = True
                gauge.inc()
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            if opened:
                gauge.dec()

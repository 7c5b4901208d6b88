from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from studio.asgi import application
from studio.consumers import CLOSE_UNAUTHENTICATED

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")


@sync_to_async
def _session_cookie() -> bytes:
    user = User.objects.create_user("ada", password="x")
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def _communicator(
    *headers: tuple[bytes, bytes], thread_id: str = "t-1"
) -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application, f"/ws/threads/{thread_id}/", headers=list(headers)
    )


async def test_signed_in_user_is_accepted_and_greeted() -> None:
    communicator = _communicator(
        ORIGIN, (b"cookie", await _session_cookie()), thread_id="t-42"
    )

    connected, _ = await communicator.connect()
    hello: dict[str, Any] = await communicator.receive_json_from()

    assert connected
    assert hello == {"type": "hello", "thread_id": "t-42"}
    await communicator.disconnect()


async def test_anonymous_socket_is_closed_with_4401() -> None:
    communicator = _communicator(ORIGIN)

    await communicator.connect()
    closing = await communicator.receive_output()

    assert (closing["type"], closing["code"]) == (
        "websocket.close",
        CLOSE_UNAUTHENTICATED,
    )


async def test_socket_from_a_foreign_origin_is_refused() -> None:
    communicator = _communicator(
        (b"origin", b"https://evil.example"), (b"cookie", await _session_cookie())
    )

    connected, _ = await communicator.connect()

    assert not connected

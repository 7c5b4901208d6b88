"""``/ws/reviews/``: the live review count (and queue) for reviewers only."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client, override_settings

from studio.asgi import application
from studio.reviews.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from studio.reviews.decisions import decide
from tests._support.reviews import PURCHASE_GRAPHS, decision, member, purchase
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")

_graphs = serve_graphs(PURCHASE_GRAPHS)


@sync_to_async
def _cookie(username: str, *groups: str) -> bytes:
    user = member(username, *groups)
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@sync_to_async
def _purchase(requester: str, request_id: str) -> str:
    return purchase(
        User.objects.get(username=requester), request_id=request_id
    ).thread_id


@sync_to_async
def _approve(reviewer: str, thread_id: str, request_id: str) -> None:
    decide(
        User.objects.get(username=reviewer),
        thread_id,
        decision(request_id),
        strings=False,
    )


def _badge(html: str) -> int:
    found = re.search(r'id="review-badge"[^>]*>(\d+)</span>', html)
    assert found, html
    return int(found.group(1))


async def test_the_badge_counts_new_reviews_and_decisions_live() -> None:
    cookie = await _cookie("rex", "reviewers")
    await sync_to_async(member)("rita")
    socket = WebsocketCommunicator(
        application, "/ws/reviews/?view=queue", headers=[ORIGIN, (b"cookie", cookie)]
    )
    connected, _ = await socket.connect()
    assert connected
    assert _badge(await socket.receive_from(timeout=3)) == 0

    thread_id = await _purchase("rita", "PO-<b>1</b>")
    html = await socket.receive_from(timeout=3)

    assert _badge(html) == 1
    assert 'id="review-queue"' in html and "PO-&lt;b&gt;1&lt;/b&gt;" in html
    await _approve("rex", thread_id, "PO-<b>1</b>")
    assert _badge(await socket.receive_from(timeout=3)) == 0
    await socket.disconnect()


async def test_a_non_reviewer_socket_is_closed_with_4403() -> None:
    socket = WebsocketCommunicator(
        application,
        "/ws/reviews/",
        headers=[ORIGIN, (b"cookie", await _cookie("rita"))],
    )

    await socket.connect()
    closing = await socket.receive_output()

    assert closing["code"] == CLOSE_FORBIDDEN


async def test_an_anonymous_socket_is_closed_with_4401() -> None:
    socket = WebsocketCommunicator(application, "/ws/reviews/", headers=[ORIGIN])

    await socket.connect()
    closing = await socket.receive_output()

    assert closing["code"] == CLOSE_UNAUTHENTICATED


DEAD_REDIS = {
    "default": {
        "BACKEND": "studio.layers.RedisLayer",
        "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},  # nothing listens there
    }
}


async def test_the_queue_opens_and_catches_up_while_redis_is_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reviewer's socket opens while the channel layer cannot reach Redis (it
    used to fail the handshake), shows the queue, and sends it again while the
    layer is down, so a purchase made meanwhile shows up without a reload."""
    monkeypatch.setattr("studio.reviews.consumers.CATCH_UP_SECONDS", 0.2)
    cookie = await _cookie("rex", "reviewers")
    await sync_to_async(member)("rita")
    with override_settings(CHANNEL_LAYERS=DEAD_REDIS):
        socket = WebsocketCommunicator(
            application,
            "/ws/reviews/?view=queue",
            headers=[ORIGIN, (b"cookie", cookie)],
        )
        connected, _ = await socket.connect()
        assert connected
        assert _badge(await socket.receive_from(timeout=3)) == 0

        await _purchase("rita", "PO-OUTAGE")
        for _ in range(20):  # the notification is lost; a catch-up send is not
            html = await socket.receive_from(timeout=3)
            if _badge(html) == 1:
                break
        assert _badge(html) == 1 and "PO-OUTAGE" in html
        await socket.disconnect()

"""The sockets of one thread share one table read per new event (``services.thread_feed``).

Before, each socket read the event table itself on every notification: 200 viewers
of a run made 200 identical queries per event, and the last socket got its frame
seconds late (benchmarks/studio_api.py). These tests count the reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from studio.asgi import application
from studio.models import Run, Thread
from studio.services import run_log, thread_feed

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")
SOCKETS = 12


@sync_to_async
def _owner_cookie_and_thread() -> tuple[bytes, str]:
    user = User.objects.create_user("ada", password="x")
    client = Client()
    client.force_login(user)
    thread = Thread.objects.create(graph="purchase", owner=user)
    Run.objects.create(thread=thread, graph="purchase", status=Run.Status.RUNNING)
    return f"sessionid={client.cookies['sessionid'].value}".encode(), thread.thread_id


@sync_to_async
def _append(thread_id: str, step: int) -> int:
    run = Run.objects.get(thread_id=thread_id)
    return run_log.append(
        run, "task.end", {"node": "n", "step": step, "duration": 0.01}
    ).id


@pytest.fixture(autouse=True)
def _no_feeds_left() -> Any:
    thread_feed._feeds.clear()
    yield
    thread_feed._feeds.clear()


class _CountedReads:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[int] = []
        read = thread_feed._read

        def counted(thread_id: str, after: int) -> list[dict[str, Any]]:
            self.calls.append(after)
            return read(thread_id, after)

        monkeypatch.setattr(thread_feed, "_read_async", sync_to_async(counted))


async def _open(cookie: bytes, thread_id: str, fmt: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        application,
        f"/ws/threads/{thread_id}/?format={fmt}",
        headers=[ORIGIN, (b"cookie", cookie)],
    )
    connected, _ = await socket.connect()
    assert connected
    if fmt == "json":
        assert (await socket.receive_json_from())["type"] == "hello"
    return socket


async def test_many_sockets_share_one_read_per_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cookie, thread_id = await _owner_cookie_and_thread()
    reads = _CountedReads(monkeypatch)
    sockets = [await _open(cookie, thread_id, "json") for _ in range(SOCKETS)]
    await asyncio.sleep(0.3)  # the sockets' first reads (after their hello)
    connect_reads = len(reads.calls)

    ids = [await _append(thread_id, step) for step in range(5)]
    got = [[(await s.receive_json_from(timeout=3))["id"] for _ in ids] for s in sockets]

    assert got == [ids] * SOCKETS  # every socket, every event, in order, once
    # A socket that connects needs a read that began after it joined its group
    # (one in flight may not have seen what came just before); then one read
    # per event serves all of them.
    assert 1 <= connect_reads <= SOCKETS
    assert 1 <= len(reads.calls) - connect_reads <= len(ids) < SOCKETS
    for s in sockets:
        assert await s.receive_nothing(timeout=0.05)
        await s.disconnect()
    assert not thread_feed._feeds  # the last socket took the feed with it


async def test_html_sockets_get_the_same_fragment_rendered_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cookie, thread_id = await _owner_cookie_and_thread()
    renders: list[int] = []
    html = thread_feed.ThreadFeed.html

    def counted(self: thread_feed.ThreadFeed, event: dict[str, Any]) -> str:
        renders.append(event["id"])
        return html(self, event)

    sockets = [await _open(cookie, thread_id, "html") for _ in range(3)]
    await asyncio.sleep(0.3)
    feed = next(iter(thread_feed._feeds.values()))
    rendered_before = len(feed._html)
    monkeypatch.setattr(thread_feed.ThreadFeed, "html", counted)

    event_id = await _append(thread_id, 1)
    fragments = [await s.receive_from(timeout=3) for s in sockets]

    assert len(set(fragments)) == 1 and f'data-last-event="{event_id}"' in fragments[0]
    assert renders == [event_id] * 3  # asked three times ...
    assert len(feed._html) == rendered_before + 1  # ... rendered once
    for s in sockets:
        await s.disconnect()


async def test_a_socket_behind_the_feed_reads_the_table_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(thread_feed, "KEEP", 3)
    cookie, thread_id = await _owner_cookie_and_thread()
    first = await _open(cookie, thread_id, "json")
    ids = [await _append(thread_id, step) for step in range(6)]
    assert [(await first.receive_json_from(timeout=3))["id"] for _ in ids] == ids
    feed = next(iter(thread_feed._feeds.values()))
    assert feed.base is not None and feed.base > 0  # the oldest events were let go

    late = await _open(cookie, thread_id, "json")  # from the start: behind the feed
    assert [(await late.receive_json_from(timeout=3))["id"] for _ in ids] == ids
    newer = await _append(thread_id, 7)
    for s in (first, late):
        assert (await s.receive_json_from(timeout=3))["id"] == newer
        assert await s.receive_nothing(timeout=0.05)
        await s.disconnect()


async def test_a_lost_notification_is_caught_up_once_for_all_sockets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cookie, thread_id = await _owner_cookie_and_thread()
    reads = _CountedReads(monkeypatch)
    sockets = [await _open(cookie, thread_id, "json") for _ in range(4)]
    await asyncio.sleep(0.3)
    # the layer drops the notification
    monkeypatch.setattr(run_log, "publish", lambda record: None)
    connect_reads = len(reads.calls)

    event_id = await _append(thread_id, 1)
    got = [(await s.receive_json_from(timeout=4))["id"] for s in sockets]

    assert got == [event_id] * 4  # the run is active: each socket polls after 1 s ...
    assert len(reads.calls) - connect_reads <= 2  # ... and their polls share reads
    for s in sockets:
        await s.disconnect()
    await asyncio.sleep(0)

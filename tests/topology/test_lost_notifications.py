"""A WebSocket viewer gets a run's last event even when its notification was lost.

The channel layer is at-most-once: channels-redis loses a message now and then
(a ``receive`` cancelled while its ``BZPOPMIN`` reply was on the way). Events
in the middle of a run are caught up by the next notification, but nothing
follows a run's last event: in the scale-out test a viewer waited for the
``run.status`` success that every other viewer had. While a run is active the
consumer now reads the table itself once the layer has been quiet for
``POLL_SECONDS``. Here the notification is lost on purpose: the event is only
written to the table.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from studio.asgi import application
from studio.consumers import POLL_SECONDS
from studio.models import Run, RunEvent, Thread
from studio.services import run_log

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def _running_thread() -> tuple[bytes, Run]:
    user = User.objects.create_user("ada", password="x")
    client = Client()
    client.force_login(user)
    thread = Thread.objects.create(graph="purchase", owner=user)
    run = Run.objects.create(thread=thread, graph="purchase", status=Run.Status.RUNNING)
    return f"sessionid={client.cookies['sessionid'].value}".encode(), run


@sync_to_async
def _write_only(run: Run, kind: str, payload: dict[str, Any]) -> int:
    """Store an event without publishing it: a notification the layer lost."""
    Run.objects.filter(pk=run.pk).update(status=payload.get("status", run.status))
    return RunEvent.objects.create(
        run=run, thread_id=run.thread_id, kind=kind, payload=payload
    ).id


async def test_a_run_s_last_event_arrives_without_its_notification() -> None:
    cookie, run = await _running_thread()
    started = await sync_to_async(run_log.append)(
        run, "run.status", {"status": "running", "attempt": 1}
    )
    communicator = WebsocketCommunicator(
        application,
        f"/ws/threads/{run.thread_id}/?format=json&after={started.id}",
        headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)],
    )
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from())["type"] == "hello"

    ended = await _write_only(run, "task.end", {"node": "n", "step": 1, "ns": []})
    done = await _write_only(run, "run.status", {"status": "success", "error": None})
    got = [
        await communicator.receive_json_from(timeout=POLL_SECONDS + 3) for _ in range(2)
    ]

    assert [e["id"] for e in got] == [ended, done]
    assert got[-1]["finished"] is True
    # the run is over: nothing more, and nothing twice
    assert await communicator.receive_nothing(timeout=POLL_SECONDS + 0.5)
    await communicator.disconnect()

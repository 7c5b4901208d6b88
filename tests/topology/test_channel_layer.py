"""The scale-out channel layer keeps waiting through quiet spells.

channels-redis waits for messages with a 5 s ``BZPOPMIN``; redis-py 8 gives every
read a 5 s socket timeout by default, so a Daphne that heard nothing for 5 s got
``redis.exceptions.TimeoutError`` in some consumer's ``receive``: the message
popped at that moment was lost and that consumer's WebSocket closed with 1011
(the scale-out test saw a viewer miss its run's last event this way). The
layer that ``studio.settings`` builds from ``REDIS_URL`` must deliver a
message sent after more than 5 s of silence.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.redis_service import redis_url

pytestmark = [pytest.mark.redis, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import asyncio, time
import django
django.setup()
from channels.layers import get_channel_layer

async def main():
    layer = get_channel_layer()
    channel = await layer.new_channel()

    async def later():
        await asyncio.sleep(6.5)  # longer than channels-redis's 5 s BZPOPMIN
        await layer.send(channel, {"type": "probe"})

    sender = asyncio.create_task(later())
    started = time.monotonic()
    message = await asyncio.wait_for(layer.receive(channel), 15)
    await sender
    print(message["type"], round(time.monotonic() - started, 1))

asyncio.run(main())
"""


def test_a_consumer_waits_through_a_quiet_spell_longer_than_five_seconds() -> None:
    kind, waited = _run_with_redis_layer(_PROBE)
    assert kind == "probe"
    assert float(waited) >= 6


def _run_with_redis_layer(script: str, redis: str | None = None) -> list[str]:
    """Run ``script`` in a process with the studio's scale-out layer; its output words."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "SECRET_KEY": "k",
        "REDIS_URL": redis or redis_url(),
        "STUDIO_EMBEDDED_WORKER": "0",
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


_PUBLISHES = """
import asyncio, threading
import django
django.setup()
import redis
from channels.layers import get_channel_layer
from django.conf import settings
from studio.services.group_send import group_send

COUNT = 40

async def main():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("probe-group", channel)
    stats = redis.Redis.from_url(settings.REDIS_URL)
    before = stats.info("stats")["total_connections_received"]

    def publish():  # a worker thread, as the studio's workers publish
        for i in range(COUNT):
            group_send("probe-group", {"type": "probe", "n": i})

    sender = threading.Thread(target=publish)
    sender.start()
    got = [(await asyncio.wait_for(layer.receive(channel), 10))["n"] for _ in range(COUNT)]
    sender.join()
    after = stats.info("stats")["total_connections_received"]
    print(got == list(range(COUNT)), after - before)

asyncio.run(main())
"""


def test_publishes_from_a_thread_reuse_one_redis_connection() -> None:
    # async_to_sync from a plain thread made a new event loop per publish, and the
    # Redis layer a new connection per loop: ~8 ms a publish in a worker.
    in_order, connections = _run_with_redis_layer(_PUBLISHES)
    assert in_order == "True"
    assert int(connections) <= 10, f"{connections} Redis connections for 40 publishes"


_UNREACHABLE = """
import logging, time
import django
django.setup()
from studio.services import group_send as gs

logging.disable(logging.CRITICAL)  # the failed sends are logged; not this test's output
gs.SEND_TIMEOUT = 0.5
started = time.monotonic()
for i in range(20):
    gs.group_send("probe-group", {"type": "probe", "n": i})
handed_over = time.monotonic() - started
drained = gs.drain(30)
print(round(handed_over, 2), drained)
"""


def test_a_publish_never_waits_for_redis() -> None:
    # A worker used to wait for each publish (up to 5 s when Redis was slow or
    # down) between two steps of a run. It now hands the notification over and
    # goes on; readers catch up from the event table, and failed sends are logged.
    env_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    handed_over, drained = _run_with_redis_layer(_UNREACHABLE, redis=env_url)
    assert float(handed_over) < 1.0, f"20 publishes held the caller {handed_over} s"
    assert drained == "True"

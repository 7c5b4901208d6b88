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
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "SECRET_KEY": "k",
        "REDIS_URL": redis_url(),
        "STUDIO_EMBEDDED_WORKER": "0",
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    kind, waited = done.stdout.split()
    assert kind == "probe"
    assert float(waited) >= 6

"""``RedisLayer.group_send``: one round trip for a group no one listens to.

Most notifications a worker sends go to a thread no one has open; channels-redis
spent two commands on each before finding that out. Real Redis: the commands are
counted by the server (``INFO commandstats``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from studio.layers import RedisLayer
from tests._support.redis_service import redis_url

pytestmark = pytest.mark.redis


@pytest.fixture
async def layer() -> AsyncIterator[RedisLayer]:
    opened = RedisLayer(hosts=[redis_url()], prefix=f"studio-tests-{uuid.uuid4().hex}")
    yield opened
    await opened.flush()
    await opened.close_pools()


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    """A plain client on the same server, to look at and change what the layer keeps."""
    opened = redis.Redis.from_url(redis_url())
    yield opened
    opened.close()


def _calls(client: redis.Redis) -> dict[str, int]:
    """Commands the server ran so far, by name."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): row["calls"] for name, row in stats.items()}


def _spent(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        name: after[name] - before.get(name, 0)
        for name in after
        if after[name] != before.get(name, 0)
        and name not in ("info", "hello", "select")  # the counting client's
    }


async def test_a_group_no_one_listens_to_costs_one_script_call(
    layer: RedisLayer, client: redis.Redis
) -> None:
    await layer.group_send("thread-warm", {"type": "run.event"})  # script cached
    before = _calls(client)

    await layer.group_send("thread-nobody", {"type": "run.event", "event_id": 1})

    spent = _spent(before, _calls(client))
    # one call from the client; the script's own two count as well
    assert spent.get("evalsha") == 1, spent
    assert spent.get("zrange", 0) == 0, spent  # channels-redis lists the members
    assert spent.get("zremrangebyscore") == 1 and spent.get("zcard") == 1, spent


async def test_a_group_with_a_member_is_sent_to(layer: RedisLayer) -> None:
    channel = await layer.new_channel()
    await layer.group_add("thread-watched", channel)

    await layer.group_send("thread-watched", {"type": "run.event", "event_id": 7})

    assert await layer.receive(channel) == {"type": "run.event", "event_id": 7}


async def test_an_expired_member_is_dropped_and_hears_nothing(
    layer: RedisLayer, client: redis.Redis
) -> None:
    channel = await layer.new_channel()
    await layer.group_add("thread-old", channel)
    key = layer._group_key("thread-old")
    # joined longer ago than the group expiry allows
    client.zadd(key, {channel: int(time.time()) - layer.group_expiry - 10})

    await layer.group_send("thread-old", {"type": "run.event", "event_id": 1})

    assert client.zcard(key) == 0
    later = await layer.new_channel()
    await layer.group_add("thread-old", later)
    await layer.group_send("thread-old", {"type": "run.event", "event_id": 2})
    assert await layer.receive(later) == {"type": "run.event", "event_id": 2}
    assert await _nothing_for(layer, channel)


async def _nothing_for(layer: RedisLayer, channel: str) -> bool:
    """Whether ``channel`` receives nothing within 0.3 s."""
    try:
        await asyncio.wait_for(layer.receive(channel), 0.3)
    except TimeoutError:
        return True
    return False


async def test_a_redis_that_forgot_the_script_still_gets_the_send(
    layer: RedisLayer, client: redis.Redis
) -> None:
    channel = await layer.new_channel()
    await layer.group_add("thread-flushed", channel)
    client.script_flush()  # as after a restart

    await layer.group_send("thread-flushed", {"type": "run.event", "event_id": 3})

    assert await layer.receive(channel) == {"type": "run.event", "event_id": 3}


async def test_an_invalid_group_name_is_refused_before_redis_is_asked(
    layer: RedisLayer,
) -> None:
    with pytest.raises(TypeError):
        await layer.group_send("bad name with spaces", {"type": "run.event"})

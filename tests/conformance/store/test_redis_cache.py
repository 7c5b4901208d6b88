"""What only ``RedisCache`` has: its key layout, Redis-side expiry, prefixes,
failing open, asyncio clients. The shared contract is in ``test_cache.py``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypedDict

import pytest
import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from engine.cache.redis import RedisCache
from engine.graph import START, StateGraph
from engine.types import CachePolicy
from tests._support.redis_service import redis_url

pytestmark = pytest.mark.redis

NODE = ("writes", "summarize")


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url())
    yield connection
    connection.close()


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    prefix = f"test:{uuid.uuid4().hex}:"
    yield prefix
    for key in client.scan_iter(match=prefix + "*"):
        client.delete(key)


@pytest.fixture
def cache(client: redis.Redis, prefix: str) -> RedisCache[Any]:
    return RedisCache(client, prefix=prefix)


def test_keys_and_values_are_laid_out_as_langgraphs(
    cache: RedisCache[Any], client: redis.Redis, prefix: str
) -> None:
    cache.set({(NODE, "k"): ({"x": 1}, None), ((), "top"): ("v", None)})

    assert client.get(f"{prefix}writes:summarize:k") == b'json:{"x":1}'
    assert client.get(f"{prefix}top") == b'json:"v"'


def test_the_default_prefix_is_langgraphs(client: redis.Redis) -> None:
    assert RedisCache(client).prefix == "langgraph:cache:"


def test_redis_expires_entries_with_millisecond_precision(
    cache: RedisCache[Any], client: redis.Redis, prefix: str
) -> None:
    cache.set({(NODE, "short"): (1, 1.5), (NODE, "forever"): (2, None)})

    assert 1000 < client.pttl(f"{prefix}writes:summarize:short") <= 1500
    assert client.pttl(f"{prefix}writes:summarize:forever") == -1


def test_separators_inside_labels_do_not_collide(cache: RedisCache[Any]) -> None:
    cache.set(
        {
            (("a:b",), "k"): (1, None),
            (("a", "b"), "k"): (2, None),
            (("a",), "b:k"): (3, None),
            (("a\\",), "k"): (4, None),
        }
    )

    assert cache.get(
        [(("a:b",), "k"), (("a", "b"), "k"), (("a",), "b:k"), (("a\\",), "k")]
    ) == {
        (("a:b",), "k"): 1,
        (("a", "b"), "k"): 2,
        (("a",), "b:k"): 3,
        (("a\\",), "k"): 4,
    }

    cache.clear([("a",)])

    assert cache.get([(("a",), "b:k"), (("a", "b"), "k"), (("a:b",), "k")]) == {
        (("a", "b"), "k"): 2,
        (("a:b",), "k"): 1,
    }


def test_glob_characters_in_a_namespace_match_literally(cache: RedisCache[Any]) -> None:
    cache.set({(("a*",), "k"): (1, None), (("ab",), "k"): (2, None)})

    cache.clear([("a*",)])

    assert cache.get([(("a*",), "k"), (("ab",), "k")]) == {(("ab",), "k"): 2}


def test_clear_touches_only_its_own_prefix(
    cache: RedisCache[Any], client: redis.Redis, prefix: str
) -> None:
    neighbour = RedisCache(client, prefix=prefix + "other:")
    neighbour.set({(NODE, "k"): ("kept", None)})
    cache.set({(NODE, "k"): ("gone", None), ((), "top"): ("gone", None)})

    cache.clear([()])
    assert cache.get([((), "top"), (NODE, "k")]) == {(NODE, "k"): "gone"}
    RedisCache(client, prefix=prefix + "x").clear()

    assert neighbour.get([(NODE, "k")]) == {(NODE, "k"): "kept"}


def test_an_unreadable_entry_is_a_miss(
    cache: RedisCache[Any], client: redis.Redis, prefix: str
) -> None:
    client.set(f"{prefix}writes:summarize:bad", b"pickle:\x80\x04")
    client.set(f"{prefix}writes:summarize:untagged", b"plain")

    assert cache.get([(NODE, "bad"), (NODE, "untagged")]) == {}


def test_get_and_set_fail_open_when_redis_is_down_but_clear_raises() -> None:
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    cache: RedisCache[Any] = RedisCache(down)

    assert cache.get([(NODE, "k")]) == {}
    cache.set({(NODE, "k"): (1, None)})
    with pytest.raises(redis.ConnectionError):
        cache.clear()


def test_a_cached_node_runs_once(cache: RedisCache[Any]) -> None:
    class State(TypedDict):
        n: int

    calls: list[int] = []

    def slow(state: State) -> dict[str, int]:
        calls.append(state["n"])
        return {"n": state["n"] * 10}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("slow", slow, cache_policy=CachePolicy(ttl=60))
    builder.add_edge(START, "slow")
    graph = builder.compile(cache=cache)

    assert graph.invoke({"n": 2}) == {"n": 20}
    assert graph.invoke({"n": 2}) == {"n": 20}
    assert calls == [2]


# -- asyncio clients -------------------------------------------------------------------


@pytest.fixture
async def acache(prefix: str) -> AsyncIterator[RedisCache[Any]]:
    connection = redis.asyncio.Redis.from_url(redis_url())
    yield RedisCache(connection, prefix=prefix)
    await connection.aclose()


async def test_an_asyncio_client_serves_the_async_methods(
    acache: RedisCache[Any],
) -> None:
    await acache.aset({(NODE, "k"): ({"v": 1}, None), (("other",), "k"): (2, 60)})
    assert await acache.aget([(NODE, "k"), (("other",), "k")]) == {
        (NODE, "k"): {"v": 1},
        (("other",), "k"): 2,
    }

    await acache.aclear([NODE])
    assert await acache.aget([(NODE, "k"), (("other",), "k")]) == {(("other",), "k"): 2}
    await acache.aclear()
    assert await acache.aget([(("other",), "k")]) == {}


async def test_an_asyncio_client_refuses_the_sync_methods(
    acache: RedisCache[Any],
) -> None:
    with pytest.raises(TypeError, match=r"aget\(\)"):
        acache.get([(NODE, "k")])
    with pytest.raises(TypeError, match=r"aset\(\)"):
        acache.set({(NODE, "k"): (1, None)})
    with pytest.raises(TypeError, match=r"aclear\(\)"):
        acache.clear()


async def test_a_sync_client_serves_the_async_methods_too(
    cache: RedisCache[Any],
) -> None:
    await cache.aset({(NODE, "k"): (1, None)})

    assert await cache.aget([(NODE, "k")]) == {(NODE, "k"): 1}

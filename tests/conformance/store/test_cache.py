"""Node result caches: get / set / ttl (seconds) / clear and their async twins, on
memory, SQLite and Postgres."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest

from engine.cache.base import BaseCache, InvalidCacheKeyError
from engine.cache.sqlite import SqliteCache
from engine.errors import SerializationError

NODE = ("writes", "summarize")
OTHER = ("writes", "translate")


def test_set_then_get(cache: BaseCache[Any]) -> None:
    writes = [("summary", "short text"), ("count", 3)]
    cache.set({(NODE, "k1"): (writes, None), (NODE, "k2"): ({"x": 1}, 60)})

    assert cache.get([(NODE, "k1"), (NODE, "k2")]) == {
        (NODE, "k1"): writes,
        (NODE, "k2"): {"x": 1},
    }


def test_missing_keys_are_absent(cache: BaseCache[Any]) -> None:
    cache.set({(NODE, "k1"): (1, None)})

    assert cache.get([(NODE, "nope"), (OTHER, "k1"), (("writes",), "k1")]) == {}
    assert cache.get([]) == {}


def test_values_round_trip_through_the_serializer(cache: BaseCache[Any]) -> None:
    value = {
        "when": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "pair": (1, "a"),
        "raw": b"\x00\xff",
        "none": None,
    }
    cache.set(
        {
            (NODE, "k"): (value, None),
            (NODE, "none"): (None, None),
            (NODE, "b"): (b"x", None),
        }
    )

    got = cache.get([(NODE, "k"), (NODE, "none"), (NODE, "b")])

    assert got == {(NODE, "k"): value, (NODE, "none"): None, (NODE, "b"): b"x"}
    assert type(got[(NODE, "k")]["pair"]) is tuple


def test_set_overwrites(cache: BaseCache[Any]) -> None:
    cache.set({(NODE, "k"): ("old", None)})
    cache.set({(NODE, "k"): ("new", None)})

    assert cache.get([(NODE, "k")]) == {(NODE, "k"): "new"}


def test_namespaces_are_compared_label_by_label(cache: BaseCache[Any]) -> None:
    cache.set(
        {(("a,b",), "k"): (1, None), (("a", "b"), "k"): (2, None), ((), "k"): (3, None)}
    )

    assert cache.get([(("a,b",), "k"), (("a", "b"), "k"), ((), "k")]) == {
        (("a,b",), "k"): 1,
        (("a", "b"), "k"): 2,
        ((), "k"): 3,
    }


def test_get_accepts_a_list_namespace_and_answers_with_a_tuple(
    cache: BaseCache[Any],
) -> None:
    cache.set({(NODE, "k"): (1, None)})

    assert cache.get([(["writes", "summarize"], "k")]) == {(NODE, "k"): 1}  # type: ignore[list-item]


def test_expired_entries_are_never_returned(cache: BaseCache[Any]) -> None:
    cache.set(
        {
            (NODE, "short"): ("v", 0.3),
            (NODE, "long"): ("v", 60),
            (NODE, "none"): ("v", None),
        }
    )
    assert len(cache.get([(NODE, "short"), (NODE, "long"), (NODE, "none")])) == 3

    time.sleep(0.6)

    assert cache.get([(NODE, "short"), (NODE, "long"), (NODE, "none")]) == {
        (NODE, "long"): "v",
        (NODE, "none"): "v",
    }


def test_an_expired_entry_can_be_set_again(cache: BaseCache[Any]) -> None:
    cache.set({(NODE, "k"): ("v1", 0.3)})
    time.sleep(0.6)
    cache.set({(NODE, "k"): ("v2", None)})

    assert cache.get([(NODE, "k")]) == {(NODE, "k"): "v2"}


def test_clear_namespaces_keeps_the_rest(cache: BaseCache[Any]) -> None:
    sub = (*NODE, "sub")
    cache.set({(NODE, "k"): (1, None), (OTHER, "k"): (2, None), (sub, "k"): (3, None)})

    cache.clear([NODE])

    assert cache.get([(NODE, "k"), (OTHER, "k"), (sub, "k")]) == {
        (OTHER, "k"): 2,
        (sub, "k"): 3,
    }


def test_clear_everything(cache: BaseCache[Any]) -> None:
    cache.set({(NODE, "k"): (1, None), (OTHER, "k"): (2, 60)})

    cache.clear()

    assert cache.get([(NODE, "k"), (OTHER, "k")]) == {}
    cache.clear([("never", "used")])


def test_many_keys_at_once(cache: BaseCache[Any]) -> None:
    pairs = {(NODE, f"k{n}"): (n, None) for n in range(1000)}
    cache.set(pairs)

    got = cache.get(list(pairs))

    assert got == {key: n for key, (n, _) in pairs.items()}


@pytest.mark.parametrize(
    "key",
    [
        ("writes", "k"),
        (NODE, 1),
        (NODE,),
        "k",
        ((1,), "k"),
        (NODE, "a\x00"),
    ],
)
def test_bad_keys_are_rejected(cache: BaseCache[Any], key: object) -> None:
    with pytest.raises(InvalidCacheKeyError):
        cache.get([key])  # type: ignore[list-item]
    with pytest.raises(InvalidCacheKeyError):
        cache.set({key: (1, None)})  # type: ignore[dict-item]


@pytest.mark.parametrize("ttl", [0, -1, "10", True, float("nan")])
def test_bad_ttls_are_rejected(cache: BaseCache[Any], ttl: object) -> None:
    with pytest.raises(InvalidCacheKeyError, match="positive number of seconds"):
        cache.set({(NODE, "k"): (1, ttl)})  # type: ignore[dict-item]


def test_entries_must_be_value_ttl_pairs(cache: BaseCache[Any]) -> None:
    with pytest.raises(InvalidCacheKeyError, match=r"\(value, ttl_seconds\)"):
        cache.set({(NODE, "k"): "value"})  # type: ignore[dict-item]


def test_a_bad_entry_stores_nothing(cache: BaseCache[Any]) -> None:
    with pytest.raises(SerializationError):
        cache.set({(NODE, "ok"): (1, None), (NODE, "bad"): (object(), None)})

    assert cache.get([(NODE, "ok")]) == {}


async def test_async_twins(cache: BaseCache[Any]) -> None:
    await cache.aset({(NODE, "k"): ({"v": 1}, None), (OTHER, "k"): (2, 0.3)})
    assert await cache.aget([(NODE, "k"), (OTHER, "k")]) == {
        (NODE, "k"): {"v": 1},
        (OTHER, "k"): 2,
    }

    await asyncio.sleep(0.6)
    assert await cache.aget([(OTHER, "k")]) == {}

    await cache.aclear([NODE])
    assert await cache.aget([(NODE, "k")]) == {}
    await cache.aset({(NODE, "k"): (1, None)})
    await cache.aclear()
    assert await cache.aget([(NODE, "k")]) == {}


def test_sqlite_cache_persists_across_opens(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with SqliteCache(path) as first:
        first.set({(NODE, "k"): ("kept", None)})

    with SqliteCache(path) as second:
        assert second.get([(NODE, "k")]) == {(NODE, "k"): "kept"}
        second.setup()  # migrations are idempotent


def test_sqlite_cache_in_memory() -> None:
    with SqliteCache(":memory:") as cache:
        cache.set({(NODE, "k"): (1, None)})
        assert cache.get([(NODE, "k")]) == {(NODE, "k"): 1}

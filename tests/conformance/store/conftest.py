"""Store and cache fixtures: each test runs once per backend.

``store``: memory | sqlite | postgres. ``astore``: memory | sqlite | sqlite-async
(``AsyncSqliteStore``) | postgres (the sync store's async twins, run in threads) |
postgres-async (``AsyncPostgresStore``). ``cache``: memory |
sqlite | postgres | redis. Postgres params carry the ``postgres`` marker and get a fresh
database per test: they skip locally without ``ENGINE_TEST_PG_DSN`` and fail in CI.
The redis param (``redis`` marker) uses ``TEST_REDIS_URL`` under a prefix of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from engine.cache.base import BaseCache
from engine.cache.memory import InMemoryCache
from engine.cache.postgres import PostgresCache
from engine.cache.redis import RedisCache
from engine.cache.sqlite import SqliteCache
from engine.store.base import BaseStore
from engine.store.memory import InMemoryStore
from engine.store.postgres import AsyncPostgresStore, PostgresStore
from engine.store.sqlite import AsyncSqliteStore, SqliteStore
from tests._support.postgres import fresh_database, pg_dsn
from tests._support.redis_service import redis_url

POSTGRES = pytest.mark.postgres
REDIS = pytest.mark.redis


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=POSTGRES)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "sqlite":
        with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as lite:
            yield lite
        return
    with (
        fresh_database(pg_dsn()) as dsn,
        PostgresStore.from_conn_string(dsn, max_size=2) as pg_store,
    ):
        pg_store.setup()
        yield pg_store


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        "sqlite-async",
        pytest.param("postgres", marks=POSTGRES),
        pytest.param("postgres-async", marks=POSTGRES),
    ]
)
async def astore(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "sqlite":
        with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as lite:
            yield lite
        return
    if request.param == "sqlite-async":
        path = str(tmp_path / "store.sqlite")
        async with AsyncSqliteStore.from_conn_string(path) as alite:
            yield alite
        return
    with fresh_database(pg_dsn()) as dsn:
        if request.param == "postgres":
            with PostgresStore.from_conn_string(dsn, max_size=2) as pg_store:
                pg_store.setup()
                yield pg_store
        else:
            async with AsyncPostgresStore.from_conn_string(dsn, max_size=2) as apg:
                await apg.setup()
                yield apg


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("postgres", marks=POSTGRES),
        pytest.param("redis", marks=REDIS),
    ]
)
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCache[Any]]:
    if request.param == "memory":
        yield InMemoryCache()
    elif request.param == "sqlite":
        with SqliteCache(tmp_path / "cache.sqlite") as sqlite_cache:
            yield sqlite_cache
    elif request.param == "redis":
        yield from _redis_cache()
    else:
        with (
            fresh_database(pg_dsn()) as dsn,
            PostgresCache.from_conn_string(dsn, max_size=2) as pg_cache,
        ):
            pg_cache.setup()
            yield pg_cache


def _redis_cache() -> Iterator[RedisCache[Any]]:
    """A cache under a prefix of its own on ``TEST_REDIS_URL``, emptied afterwards."""
    client = redis.Redis.from_url(redis_url())
    cache: RedisCache[Any] = RedisCache(client, prefix=f"test:{uuid.uuid4().hex}:")
    try:
        yield cache
    finally:
        cache.clear()
        client.close()

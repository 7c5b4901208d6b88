"""Store and cache fixtures: each test runs once per backend.

``store``: memory | postgres. ``astore``: memory | postgres (the sync store's async
twins, run in threads) | postgres-async (``AsyncPostgresStore``). ``cache``: memory |
sqlite | postgres. Postgres params carry the ``postgres`` marker and get a fresh
database per test: they skip locally without ``ENGINE_TEST_PG_DSN`` and fail in CI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.cache.base import BaseCache
from engine.cache.memory import InMemoryCache
from engine.cache.postgres import PostgresCache
from engine.cache.sqlite import SqliteCache
from engine.store.base import BaseStore
from engine.store.memory import InMemoryStore
from engine.store.postgres import AsyncPostgresStore, PostgresStore
from tests._support.postgres import fresh_database, pg_dsn

POSTGRES = pytest.mark.postgres


@pytest.fixture(params=["memory", pytest.param("postgres", marks=POSTGRES)])
def store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
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
        pytest.param("postgres", marks=POSTGRES),
        pytest.param("postgres-async", marks=POSTGRES),
    ]
)
async def astore(request: pytest.FixtureRequest) -> AsyncIterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
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


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=POSTGRES)])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCache[Any]]:
    if request.param == "memory":
        yield InMemoryCache()
    elif request.param == "sqlite":
        with SqliteCache(tmp_path / "cache.sqlite") as sqlite_cache:
            yield sqlite_cache
    else:
        with (
            fresh_database(pg_dsn()) as dsn,
            PostgresCache.from_conn_string(dsn, max_size=2) as pg_cache,
        ):
            pg_cache.setup()
            yield pg_cache

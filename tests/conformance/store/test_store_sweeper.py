"""start_ttl_sweeper / stop_ttl_sweeper on the SQL stores (sync thread, async task)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.store.base import InvalidStoreInputError
from engine.store.postgres import AsyncPostgresStore, PostgresStore
from engine.store.sqlite import AsyncSqliteStore, SqliteStore
from tests._support.postgres import fresh_database, pg_dsn

SWEEP = 0.005
"""Minutes between sweeps: 0.3 seconds."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SqliteStore | PostgresStore]:
    if request.param == "sqlite":
        with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as lite:
            yield lite
        return
    with fresh_database(pg_dsn()) as dsn, PostgresStore.from_conn_string(dsn) as pg:
        pg.setup()
        yield pg


def count_rows(store: SqliteStore | PostgresStore) -> int:
    if isinstance(store, SqliteStore):
        return int(
            store.conn.execute("SELECT count(*) FROM engine_store").fetchone()[0]
        )
    with store._cursor() as cur:
        row = cur.execute("SELECT count(*) FROM engine_store").fetchone()
        return int(row[0]) if row else 0


def test_the_sweeper_deletes_expired_rows_until_stopped(
    sql_store: SqliteStore | PostgresStore,
) -> None:
    sql_store.put(("t",), "short", {"v": 1}, ttl=0.005)
    sql_store.put(("t",), "long", {"v": 1}, ttl=60)

    future = sql_store.start_ttl_sweeper(sweep_interval_minutes=SWEEP)
    assert sql_store.start_ttl_sweeper(SWEEP) is future  # already running
    deadline = time.monotonic() + 5
    while count_rows(sql_store) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)

    assert count_rows(sql_store) == 1
    assert sql_store.stop_ttl_sweeper(timeout=5) is True
    assert future.result(timeout=1) is None
    assert sql_store.stop_ttl_sweeper() is True  # not running: nothing to do


def test_cancelling_the_future_stops_the_sweeper(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "s.sqlite")) as store:
        future = store.start_ttl_sweeper(sweep_interval_minutes=10)

        assert future.cancel()
        assert store.stop_ttl_sweeper(timeout=5) is True


def test_the_interval_comes_from_the_ttl_config_and_must_be_positive(
    tmp_path: Path,
) -> None:
    with (
        SqliteStore.from_conn_string(
            str(tmp_path / "s.sqlite"), ttl={"sweep_interval_minutes": -1}
        ) as store,
        pytest.raises(InvalidStoreInputError, match="sweep_interval_minutes"),
    ):
        store.start_ttl_sweeper()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "backend",
    ["sqlite-async", pytest.param("postgres-async", marks=pytest.mark.postgres)],
)
async def test_the_async_sweeper_is_a_task(backend: str, tmp_path: Path) -> None:
    async def run(store: AsyncSqliteStore | AsyncPostgresStore) -> None:
        await store.aput(("t",), "short", {"v": 1}, ttl=0.005)
        task = await store.start_ttl_sweeper(sweep_interval_minutes=SWEEP)
        deadline = time.monotonic() + 5
        while (
            await store.asearch(("t",), refresh_ttl=False)
            and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # a sweep after expiry
        assert await store.asweep_ttl() == 0  # the sweeper already deleted it
        assert await store.stop_ttl_sweeper(timeout=5) is True
        assert task.done()

    if backend == "sqlite-async":
        async with AsyncSqliteStore.from_conn_string(
            str(tmp_path / "s.sqlite")
        ) as lite:
            await run(lite)
        return
    with fresh_database(pg_dsn()) as dsn:
        async with AsyncPostgresStore.from_conn_string(dsn) as apg:
            await apg.setup()
            await run(apg)

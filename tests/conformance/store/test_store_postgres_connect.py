"""How the Postgres stores connect: pipeline mode, pool settings, custom deserializers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from engine.store.base import GetOp, PutOp, SearchOp
from engine.store.postgres import AsyncPostgresStore, PoolConfig, PostgresStore
from tests._support.postgres import fresh_database, pg_dsn

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database(pg_dsn()) as fresh:
        yield fresh


def test_pipeline_mode_uses_one_connection_and_works(dsn: str) -> None:
    with PostgresStore.from_conn_string(dsn, pipeline=True) as store:
        assert store.pipe is not None
        assert isinstance(store.conn, psycopg.Connection)
        assert store.supports_pipeline is True
        store.setup()

        results = store.batch(
            [PutOp(("d",), "k", {"v": 1}), GetOp(("d",), "k"), SearchOp(("d",))]
        )

    assert results[1] is not None and results[1].value == {"v": 1}  # type: ignore[union-attr]
    assert [item.key for item in results[2]] == ["k"]  # type: ignore[union-attr]


def test_pool_config_sets_the_pool_and_wins_over_pipeline(dsn: str) -> None:
    config = PoolConfig(min_size=1, max_size=3, kwargs={"application_name": "mem"})
    with PostgresStore.from_conn_string(
        dsn, pipeline=True, pool_config=config
    ) as store:
        assert isinstance(store.conn, ConnectionPool)
        assert store.pipe is None
        assert store.conn.max_size == 3
        store.setup()
        with store._cursor() as cur:
            row = cur.execute("SHOW application_name").fetchone()

    assert row == ("mem",)


def test_a_pipe_needs_its_own_connection_not_a_pool(dsn: str) -> None:
    with (
        PostgresStore.from_conn_string(dsn) as pooled,
        psycopg.connect(dsn, autocommit=True) as conn,
        conn.pipeline() as pipe,
        pytest.raises(ValueError, match="not a pool"),
    ):
        PostgresStore(pooled.conn, pipe=pipe)  # type: ignore[arg-type]


def test_a_deserializer_gets_the_stored_json_bytes(dsn: str) -> None:
    seen: list[bytes] = []

    def load(raw: bytes) -> dict[str, Any]:
        seen.append(raw)
        return {"raw": raw.decode()}

    with PostgresStore.from_conn_string(dsn) as setup_store:
        setup_store.setup()
        setup_store.put(("d",), "k", {"pair": (1, 2)})
    with psycopg.connect(dsn, autocommit=True) as conn:
        store = PostgresStore(conn, deserializer=load)
        item = store.get(("d",), "k")
        (found,) = store.search(("d",))

    assert item is not None and found.value == item.value
    assert item.value == {"raw": '{"pair":{"v":[1,2],"__t":"tuple"}}'}
    assert len(seen) == 2


@pytest.mark.asyncio
async def test_async_pipeline_mode(dsn: str) -> None:
    async with AsyncPostgresStore.from_conn_string(dsn, pipeline=True) as store:
        assert store.pipe is not None
        await store.setup()
        await store.aput(("d",), "k", {"v": 1})

        item = await store.aget(("d",), "k")

    assert item is not None and item.value == {"v": 1}

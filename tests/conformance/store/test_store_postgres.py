"""What only the Postgres store has: migrations, connection modes, SQL pushdown."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from engine.store.base import PutOp
from engine.store.postgres import AsyncPostgresStore, PostgresStore
from engine.store.postgres._sql import CURRENT_VERSION, MIGRATIONS
from tests._support.postgres import fresh_database, pg_dsn

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database(pg_dsn()) as fresh:
        yield fresh


def test_setup_is_idempotent_and_records_every_migration(dsn: str) -> None:
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
        store.setup()
    with psycopg.connect(dsn) as conn:
        versions = [
            row[0]
            for row in conn.execute("SELECT v FROM engine_store_migrations ORDER BY v")
        ]

    assert versions == list(range(len(MIGRATIONS)))
    assert len(MIGRATIONS) - 1 == CURRENT_VERSION


def test_concurrent_setups_migrate_once(dsn: str) -> None:
    errors: list[BaseException] = []

    def setup() -> None:
        try:
            with PostgresStore.from_conn_string(dsn, max_size=1) as store:
                store.setup()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=setup) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM engine_store_migrations").fetchone()
    assert row == (len(MIGRATIONS),)


def test_values_are_stored_as_readable_tagged_jsonb(dsn: str) -> None:
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
        store.put(("users", "alice"), "k", {"pair": (1, 2), "n": 1})
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT prefix, key, value, jsonb_typeof(value) FROM engine_store"
        ).fetchone()

    assert row == (
        "users.alice",
        "k",
        {"pair": {"__t": "tuple", "v": [1, 2]}, "n": 1},
        "object",
    )


def test_a_single_autocommit_connection_works(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        store = PostgresStore(conn)
        store.setup()
        store.put(("d",), "k", {"v": 1})

        item = store.get(("d",), "k")

    assert item is not None and item.value == {"v": 1}


def test_a_connection_without_autocommit_is_refused(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        store = PostgresStore(conn)
        with pytest.raises(ValueError, match="autocommit=True"):
            store.setup()


def test_a_failing_batch_rolls_back(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        store = PostgresStore(conn)
        store.setup()
        conn.execute(
            "ALTER TABLE engine_store ADD CONSTRAINT small CHECK (key <> 'boom')"
        )
        with pytest.raises(psycopg.errors.CheckViolation):
            store.batch(
                [PutOp(("d",), "ok", {"v": 1}), PutOp(("d",), "boom", {"v": 1})]
            )

        assert store.get(("d",), "ok") is None


def test_prefix_search_can_use_the_prefix_index(dsn: str) -> None:
    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN SELECT key FROM engine_store "
                "WHERE prefix = 'a.b' OR prefix LIKE 'a.b.%'"
            )
        )

    assert "engine_store_prefix_idx" in plan


async def test_async_store_on_a_single_connection(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        store = AsyncPostgresStore(conn)
        await store.setup()
        await store.aput(("d",), "k", {"v": 1})

        assert await store.alist_namespaces() == [("d",)]


async def test_async_store_refuses_sync_calls_on_its_own_loop(dsn: str) -> None:
    async with AsyncPostgresStore.from_conn_string(dsn, max_size=1) as store:
        await store.setup()

        with pytest.raises(RuntimeError, match="would deadlock"):
            store.get(("d",), "k")

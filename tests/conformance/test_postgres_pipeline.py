"""Postgres savers on a caller's psycopg pipeline (LangGraph's ``pipe`` argument)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from engine.checkpoint.postgres import PostgresSaver
from engine.checkpoint.postgres.aio import AsyncPostgresSaver
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import CheckpointConflictError
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    save_chain,
    save_steps,
)
from tests._support.postgres import fresh_database, pg_dsn

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database(pg_dsn()) as fresh:
        yield fresh


def _watch_pipelines(conn: psycopg.Connection, monkeypatch) -> list:
    """Record the pipeline each ``conn.pipeline()`` block of the saver runs in."""
    used: list = []
    original = conn.pipeline

    @contextmanager
    def pipeline():
        with original() as pipe:
            used.append(pipe)
            yield pipe

    monkeypatch.setattr(conn, "pipeline", pipeline)
    return used


def test_statements_go_through_the_callers_pipeline(dsn, monkeypatch) -> None:
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        conn.pipeline() as pipe,
    ):
        saver = PostgresSaver(conn, pipe)
        saver.setup()
        used = _watch_pipelines(conn, monkeypatch)

        ids = save_steps(saver, "t1", 3)

        assert used and all(p is pipe for p in used)
        with psycopg.connect(dsn) as other:  # every call committed when it returned
            rows = other.execute(
                "SELECT count(*) FROM engine_checkpoints WHERE thread_id = 't1'"
            ).fetchall()
        assert rows == [(4,)]
        latest = saver.get_tuple(make_config("t1"))
        assert latest is not None
        assert latest.checkpoint["id"] == ids[-1]
        assert latest.checkpoint["channel_values"] == {"n": 3, "log": [0, 1, 2]}


def test_a_failed_call_leaves_the_pipeline_usable(dsn) -> None:
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        conn.pipeline() as pipe,
    ):
        saver = PostgresSaver(conn, pipe)
        saver.setup()
        configs = save_chain(saver, "t1", 2)
        stale = saver.get_tuple(configs[0])
        assert stale is not None

        with pytest.raises(CheckpointConflictError):
            saver.put(fenced(configs[0], "not-the-head"), stale.checkpoint, {}, {})

        save_chain(saver, "t2", 2)
        assert len(list(saver.list(make_config("t2")))) == 2
        assert conn.execute("SELECT 1").fetchall() == [(1,)]


def test_from_conn_string_with_a_pipeline(dsn) -> None:
    with PostgresSaver.from_conn_string(dsn, pipeline=True) as saver:
        assert isinstance(saver.conn, psycopg.Connection)
        assert saver.pipe is not None
        saver.setup()
        save_steps(saver, "t1", 2)
        assert len(list(saver.list(make_config("t1")))) == 3


def test_a_pipeline_needs_its_own_single_connection(dsn) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.pipeline() as pipe:
        pool: ConnectionPool = ConnectionPool(dsn, open=False)
        with pytest.raises(ValueError, match="single connection, not a pool"):
            PostgresSaver(pool, pipe)
        with (
            psycopg.connect(dsn, autocommit=True) as other,
            pytest.raises(ValueError, match="another connection"),
        ):
            PostgresSaver(other, pipe)


def test_serde_is_the_third_positional_argument(dsn) -> None:
    serde = JsonPlusSerializer()
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert PostgresSaver(conn, None, serde).serde is serde


@pytest.mark.asyncio
async def test_the_async_saver_on_a_callers_pipeline(dsn) -> None:
    async with (
        await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn,
        conn.pipeline() as pipe,
    ):
        saver = AsyncPostgresSaver(conn, pipe)
        await saver.setup()
        checkpoint_configs = []
        for step in range(3):
            checkpoint = make_checkpoint({"n": step}, step=step)
            checkpoint_configs.append(
                await saver.aput(
                    make_config("t1"),
                    checkpoint,
                    make_metadata(step),
                    checkpoint["channel_versions"],
                )
            )
        await saver.aput_writes(checkpoint_configs[-1], [("n", 9)], "task-a")

        latest = await saver.aget_tuple(make_config("t1"))
        assert latest is not None
        assert latest.checkpoint["channel_values"] == {"n": 2}
        assert latest.pending_writes == [("task-a", "n", 9)]
    async with AsyncPostgresSaver.from_conn_string(dsn, pipeline=True) as piped:
        assert piped.pipe is not None
        assert len([t async for t in piped.alist(make_config("t1"))]) == 3


def test_a_long_list_sent_in_parts_through_the_callers_pipeline(dsn) -> None:
    items = [{"id": i, "text": f"item number {i}"} for i in range(5000)]
    root = make_checkpoint({"items": items})
    with PostgresSaver.from_conn_string(dsn, pipeline=True) as saver:
        saver.setup()
        saver.put(make_config("t1"), root, make_metadata(), root["channel_versions"])

        loaded = saver.get_tuple(make_config("t1"))

    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["items"] == items

"""The saver's transactions sent through libpq directly (``_libpq_pipeline``).

The same parameters reach the database and the same rows come back as through
a psycopg cursor; a failure at any point leaves the connection idle, out of
pipeline mode and out of any transaction; statements prepared on a connection
are tracked even when a transaction fails or someone else drops them.
"""

from __future__ import annotations

import asyncio
import gc
import select
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.pq import PipelineStatus, TransactionStatus

from engine.checkpoint._sqlcore.dialect import Stmt
from engine.checkpoint.base import EXPECTED_HEAD
from engine.checkpoint.postgres import PostgresSaver
from engine.checkpoint.postgres import _libpq_pipeline as libpq
from engine.checkpoint.postgres._libpq_pipeline import (
    AsyncLibpqTransaction,
    LibpqTransaction,
    available_on,
    to_libpq,
)
from engine.checkpoint.postgres._sql import BEGIN_WRITE, PLANNING
from engine.checkpoint.postgres.aio import AsyncPostgresSaver
from engine.errors import CheckpointConflictError
from tests._support.builders import make_checkpoint, make_config, make_metadata
from tests._support.postgres import fresh_database, pg_dsn

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database(pg_dsn()) as fresh:
        yield fresh


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn, autocommit=True) as made:
        made.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v BYTEA)")
        yield made


@pytest.fixture
def fresh_names(monkeypatch) -> None:
    """Statement names start again: every statement is a first use."""
    monkeypatch.setattr(libpq, "_NAMES", libpq._Names())


def _idle(conn: psycopg.Connection[Any]) -> bool:
    return (
        conn.pgconn.pipeline_status == PipelineStatus.OFF
        and conn.pgconn.transaction_status == TransactionStatus.IDLE
    )


def _transaction(conn: psycopg.Connection[Any]) -> LibpqTransaction:
    assert available_on(conn)
    return LibpqTransaction(conn, BEGIN_WRITE, PLANNING)


# --- placeholders ------------------------------------------------------------------


def test_placeholders_are_numbered_for_libpq() -> None:
    assert to_libpq("SELECT %s, %s WHERE a LIKE 'x%%'") == (
        b"SELECT $1, $2 WHERE a LIKE 'x%'"
    )
    assert to_libpq("SELECT 1") == b"SELECT 1"


def test_other_placeholders_are_refused() -> None:
    with pytest.raises(ValueError, match="%d"):
        to_libpq("SELECT %d")
    with pytest.raises(ValueError, match=r"%\("):
        to_libpq("SELECT %(name)s")


# --- values ------------------------------------------------------------------------

_VALUES = (
    "text with 'quotes' and \\ and ünïcode",
    b"\x00\xffbytes",
    -4,
    2**40,
    1.5,
    None,
    True,
    datetime(2026, 12, 5, 20, 1, 2, 345678, tzinfo=UTC),
    ["a", "b,c", '"d"', ""],
)
_ROUND_TRIP = (
    "SELECT %s::text, %s::bytea, %s::int, %s::bigint, %s::float8, %s::text, "
    "%s::bool, %s::timestamptz, %s::text[], '{\"j\": [1, 2]}'::json"
)


def test_parameters_and_rows_are_what_a_cursor_sends_and_returns(conn) -> None:
    expected = conn.execute(_ROUND_TRIP, _VALUES).fetchall()
    txn = _transaction(conn)

    rows = txn.run((Stmt(_ROUND_TRIP, _VALUES, fetch=True),), last=True)

    assert rows == [expected]
    assert _idle(conn)


def test_a_connection_s_transactions_share_one_transformer_and_keep_no_result(
    conn,
) -> None:
    expected = conn.execute(_ROUND_TRIP, _VALUES).fetchall()
    first = _transaction(conn)
    assert first.run((Stmt(_ROUND_TRIP, _VALUES, fetch=True),), last=True) == [expected]
    second = _transaction(conn)

    rows = second.run((Stmt(_ROUND_TRIP, _VALUES, fetch=True),), last=True)

    assert rows == [expected]  # the dumpers and loaders found the first time
    assert second.tx is first.tx
    assert second.tx.pgresult is None  # the rows read are not kept meanwhile
    with psycopg.connect(conn.info.dsn, autocommit=True) as other:
        elsewhere = _transaction(other)
        assert elsewhere.tx is not first.tx  # one per connection
        elsewhere.abandon()


def test_a_connection_s_session_goes_with_the_connection(dsn) -> None:
    made = psycopg.connect(dsn, autocommit=True)
    _transaction(made).run((Stmt("SELECT %s::text", ("x",), fetch=True),), last=True)
    gone = weakref.ref(made)
    assert made in libpq._SESSIONS

    made.close()
    del made
    gc.collect()

    assert gone() is None  # the session's transformer did not keep it alive
    assert all(kept is not None for kept in libpq._SESSIONS)


def test_statements_queue_until_rows_are_needed_and_commit_with_the_last(
    conn,
) -> None:
    txn = _transaction(conn)
    insert = "INSERT INTO t (k, v) VALUES (%s, %s)"

    assert txn.run((Stmt(insert, ("a", b"1")),), last=False) == [None]
    assert conn.pgconn.pipeline_status == PipelineStatus.ON  # nothing read yet
    many = Stmt(insert, many=[("b", b"2"), ("c", b"3")])
    read = Stmt("SELECT k FROM t ORDER BY k", fetch=True)
    assert txn.run((many, read), last=False) == [None, [("a",), ("b",), ("c",)]]
    with psycopg.connect(conn.info.dsn) as other:  # not committed yet
        assert other.execute("SELECT count(*) FROM t").fetchone() == (0,)
    txn.run((Stmt("DELETE FROM t WHERE k = %s", ("b",)),), last=True)

    assert txn.committed and _idle(conn)
    assert conn.execute("SELECT k FROM t ORDER BY k").fetchall() == [("a",), ("c",)]


def test_large_parameters_are_sent_as_they_are_queued(conn, monkeypatch) -> None:
    # 4 MiB in 64 KiB statements, nothing read until the commit: what is queued
    # goes out every SEND_BYTES instead of piling up in libpq's buffer.
    flushes: list[int] = []
    flush = LibpqTransaction._flush

    def counted(self: LibpqTransaction) -> Any:
        flushes.append(self._unsent)
        return flush(self)

    monkeypatch.setattr(LibpqTransaction, "_flush", counted)
    txn = _transaction(conn)
    insert = "INSERT INTO t (k, v) VALUES (%s, %s)"
    part = bytes(range(256)) * 256
    txn.run(tuple(Stmt(insert, (str(i), part)) for i in range(64)), last=True)

    assert len(flushes) >= 15  # 16 sends of ~256 KiB, and the commit's
    assert max(flushes) < libpq.SEND_BYTES + 2 * len(part)
    assert conn.execute("SELECT count(*), sum(length(v)) FROM t").fetchone() == (
        64,
        64 * len(part),
    )


# --- failures ----------------------------------------------------------------------


def test_a_failing_statement_rolls_the_whole_transaction_back(conn) -> None:
    txn = _transaction(conn)
    insert = Stmt("INSERT INTO t (k, v) VALUES (%s, %s)", ("a", b"1"))

    with pytest.raises(errors.UniqueViolation) as raised:
        txn.run((insert, insert, Stmt("SELECT 1", fetch=True)), last=True)

    assert raised.value.diag.constraint_name == "t_pkey"
    assert _idle(conn)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_failure_read_mid_transaction_leaves_the_connection_idle(conn) -> None:
    txn = _transaction(conn)
    txn.run((Stmt("INSERT INTO t (k) VALUES (%s)", ("a",)),), last=False)

    with pytest.raises(errors.DivisionByZero):
        txn.run((Stmt("SELECT 1 / %s", (0,), fetch=True),), last=False)
    txn.abandon()  # what the saver does next

    assert _idle(conn)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_transaction_abandoned_before_it_read_anything_is_rolled_back(
    conn,
) -> None:
    txn = _transaction(conn)
    txn.run((Stmt("INSERT INTO t (k) VALUES (%s)", ("a",)),), last=False)

    txn.abandon()

    assert _idle(conn)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_statement_that_fails_to_prepare_is_prepared_again_next_time(
    conn, fresh_names
) -> None:
    broken = Stmt("SELECT k FROM missing_table WHERE k = %s", ("a",), fetch=True)

    with pytest.raises(errors.UndefinedTable):
        _transaction(conn).run((broken,), last=True)
    conn.execute("CREATE TABLE missing_table (k TEXT)")

    assert _transaction(conn).run((broken,), last=True) == [[]]


def test_statements_aborted_before_they_were_prepared_are_prepared_later(
    conn, fresh_names
) -> None:
    # The second statement's Parse comes after the failure: the database
    # skips it, so its name must not count as prepared.
    later = Stmt("SELECT %s::text || 'later'", ("x",), fetch=True)

    with pytest.raises(errors.DivisionByZero):
        _transaction(conn).run((Stmt("SELECT 1 / 0"), later), last=True)

    assert _transaction(conn).run((later,), last=True) == [[("xlater",)]]


@contextmanager
def _one_checkpoint_on_one_connection(
    dsn: str,
) -> Iterator[tuple[psycopg.Connection[Any], PostgresSaver, Any]]:
    """A saver on one connection, set up, with one checkpoint on thread ``t``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        config = make_config("t")
        saver.put(config, make_checkpoint(), make_metadata(), {})
        yield conn, saver, config


def test_statements_dropped_by_someone_else_fail_once_then_are_prepared_anew(
    dsn,
) -> None:
    with _one_checkpoint_on_one_connection(dsn) as (conn, saver, config):
        assert saver.get_tuple(config) is not None

        conn.execute("DEALLOCATE ALL")
        with pytest.raises(errors.InvalidSqlStatementName):
            saver.get_tuple(config)

        assert _idle(conn)
        assert saver.get_tuple(config) is not None
        saver.put(config, make_checkpoint(), make_metadata(), {})


_POLL = select.poll


class _InterruptedPoll:
    """``select.poll`` whose first wait once armed is cut off by Ctrl-C."""

    armed = False
    interrupted = False

    def __init__(self) -> None:
        self._poll = _POLL()

    def register(self, *args: Any) -> None:
        self._poll.register(*args)

    def modify(self, *args: Any) -> None:
        self._poll.modify(*args)

    def poll(self, *args: Any) -> Any:
        if _InterruptedPoll.armed:
            _InterruptedPoll.armed = False
            _InterruptedPoll.interrupted = True
            raise KeyboardInterrupt
        return self._poll.poll(*args)


@pytest.fixture
def interrupted(monkeypatch) -> type[_InterruptedPoll]:
    _InterruptedPoll.armed = _InterruptedPoll.interrupted = False
    monkeypatch.setattr(select, "poll", _InterruptedPoll)
    return _InterruptedPoll


def test_an_interrupted_read_leaves_the_connection_usable(dsn, interrupted) -> None:
    with _one_checkpoint_on_one_connection(dsn) as (conn, saver, config):
        interrupted.armed = True

        with pytest.raises(KeyboardInterrupt):
            saver.get_tuple(config)

        assert interrupted.interrupted and _idle(conn)
        assert saver.get_tuple(config) is not None
        saver.put(config, make_checkpoint(), make_metadata(), {})
        assert len(list(saver.list(config))) == 2


def test_what_an_interrupted_read_prepared_is_asked_of_the_database(
    conn, fresh_names, interrupted
) -> None:
    # The interrupt comes before the results are read: whether the second
    # statement's Parse ran (it did not: the first statement failed) is only
    # known by asking the database.
    later = Stmt("SELECT %s::text || 'later'", ("x",), fetch=True)
    txn = _transaction(conn)
    interrupted.armed = True

    with pytest.raises(KeyboardInterrupt):
        txn.run((Stmt("SELECT 1 / 0"), later), last=True)
    txn.abandon()

    assert interrupted.interrupted and _idle(conn)
    assert _transaction(conn).run((later,), last=True) == [[("xlater",)]]


def test_abandoning_on_a_lost_connection_raises_nothing_of_its_own(conn) -> None:
    txn = _transaction(conn)
    txn.run((Stmt("INSERT INTO t (k) VALUES (%s)", ("a",)),), last=False)
    with psycopg.connect(conn.info.dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))

    txn.abandon()  # no error of its own: the saver's error is the one raised

    assert conn.closed


# --- the saver ---------------------------------------------------------------------


def _opened(monkeypatch: pytest.MonkeyPatch, cls: type[Any]) -> list[Any]:
    """The transactions of ``cls`` opened from now on."""
    opened: list[Any] = []
    init = cls.__init__

    def recorded(self: Any, *args: Any) -> None:
        opened.append(self)
        init(self, *args)

    monkeypatch.setattr(cls, "__init__", recorded)
    return opened


def test_the_saver_sends_through_libpq_unless_given_a_pipeline(
    dsn, monkeypatch
) -> None:
    opened = _opened(monkeypatch, LibpqTransaction)
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        saver.put(make_config("t"), make_checkpoint(), make_metadata(), {})
    assert len(opened) == 1
    opened.clear()
    with PostgresSaver.from_conn_string(dsn, pipeline=True) as saver:
        assert saver.get_tuple(make_config("t")) is not None
    assert opened == []


def test_a_fencing_conflict_through_libpq_leaves_the_pool_connection_idle(
    dsn,
) -> None:
    with PostgresSaver.from_conn_string(dsn, max_size=1) as saver:
        saver.setup()
        config = make_config("t")
        saver.put(config, make_checkpoint(), make_metadata(), {})
        stale = {"configurable": {**config["configurable"], EXPECTED_HEAD: "x"}}
        with pytest.raises(CheckpointConflictError):
            saver.put(stale, make_checkpoint(), make_metadata(), {})
        with saver._connection() as conn:
            assert _idle(conn)
        assert saver.get_tuple(config) is not None


def test_statement_shapes_past_the_limit_are_sent_unnamed(
    dsn, monkeypatch, fresh_names
) -> None:
    monkeypatch.setattr(libpq, "MAX_PREPARED", 0)
    with _one_checkpoint_on_one_connection(dsn) as (conn, saver, config):
        assert saver.get_tuple(config) is not None
        prepared = conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE '\\_engine%%'"
        ).fetchone()
    assert prepared == (0,)


# --- the async saver -----------------------------------------------------------------


async def test_async_parameters_and_rows_are_what_a_cursor_returns(dsn) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        expected = await (await conn.execute(_ROUND_TRIP, _VALUES)).fetchall()
        assert available_on(conn)
        txn = AsyncLibpqTransaction(conn, BEGIN_WRITE, PLANNING)

        rows = await txn.run((Stmt(_ROUND_TRIP, _VALUES, fetch=True),), last=True)

        assert rows == [expected]
        assert _idle(conn)


async def test_the_async_saver_sends_through_libpq_unless_given_a_pipeline(
    dsn, monkeypatch
) -> None:
    opened = _opened(monkeypatch, AsyncLibpqTransaction)
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        await saver.aput(make_config("t"), make_checkpoint(), make_metadata(), {})
        assert await saver.aget_tuple(make_config("t")) is not None
    assert len(opened) == 2
    opened.clear()
    async with AsyncPostgresSaver.from_conn_string(dsn, pipeline=True) as saver:
        assert await saver.aget_tuple(make_config("t")) is not None
    assert opened == []


async def test_an_async_fencing_conflict_leaves_the_connection_idle(dsn) -> None:
    async with AsyncPostgresSaver.from_conn_string(dsn, max_size=1) as saver:
        await saver.setup()
        config = make_config("t")
        await saver.aput(config, make_checkpoint(), make_metadata(), {})
        stale = {"configurable": {**config["configurable"], EXPECTED_HEAD: "x"}}
        with pytest.raises(CheckpointConflictError):
            await saver.aput(stale, make_checkpoint(), make_metadata(), {})
        async with saver._connection() as conn:
            assert _idle(conn)
        assert await saver.aget_tuple(config) is not None


async def test_a_cancelled_async_read_leaves_the_connection_usable(dsn) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        saver = AsyncPostgresSaver(conn)
        await saver.setup()
        config = make_config("t")
        await saver.aput(config, make_checkpoint(), make_metadata(), {})
        slow = AsyncLibpqTransaction(conn, BEGIN_WRITE, PLANNING)
        task = asyncio.create_task(
            slow.run((Stmt("SELECT pg_sleep(%s)", (5,), fetch=True),), last=True)
        )
        await asyncio.sleep(0.2)

        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await conn.cancel_safe()  # the server's statement, as psycopg's own does
        await slow.abandon()

        assert _idle(conn)
        assert await saver.aget_tuple(config) is not None
        await saver.aput(config, make_checkpoint(), make_metadata(), {})
        assert len([c async for c in saver.alist(config)]) == 2

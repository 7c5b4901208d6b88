"""What a run's saves send Postgres: one fence statement per step.

Each statement costs client work even inside a pipeline, so a run's step checks
its thread lease and the thread's head in one statement (both server functions
in one select list, the lease first), and a resumed run takes its lease without
reading the lease row back. Every transaction plans
its statements once per connection with index plans (``PLANNING``), and a
whole-table read under those settings is never JIT-compiled.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import psycopg
import pytest

from engine.checkpoint._sqlcore.dialect import SqlDialect, Stmt
from engine.checkpoint._sqlcore.saves import GUESS_VALUE_BYTES
from engine.checkpoint.base import EXPECTED_HEAD
from engine.checkpoint.postgres import PostgresSaver
from engine.checkpoint.postgres import _libpq_pipeline as libpq
from engine.checkpoint.postgres._libpq_pipeline import LibpqTransaction
from engine.checkpoint.postgres._sql import (
    DIALECT,
    MERGED_BYTES,
    MERGED_ROWS,
    PLANNING,
    PLANNING_FOR,
)
from engine.errors import CheckpointConflictError, ThreadLeaseLostError
from engine.graph import END, START, StateGraph
from engine.types import Command, interrupt
from tests._support.builders import make_checkpoint
from tests._support.postgres import fresh_database, pg_dsn
from tests._support.sql_ops import insert_rows

pytestmark = pytest.mark.postgres


class LoopState(TypedDict):
    n: int
    limit: int


def _tick(state: LoopState) -> dict[str, Any]:
    return {"n": state["n"] + 1}


def _route(state: LoopState) -> str:
    return "tick" if state["n"] < state["limit"] else END


@pytest.fixture
def saver() -> Iterator[PostgresSaver]:
    with (
        fresh_database(pg_dsn()) as dsn,
        PostgresSaver.from_conn_string(dsn) as made,
    ):
        made.setup()
        yield made


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[Stmt]:
    """Every statement the saver's transactions send from now on."""
    sent: list[Stmt] = []
    send = LibpqTransaction.send

    def recorded(self: LibpqTransaction, stmt: Stmt) -> Any:
        sent.append(stmt)
        return send(self, stmt)

    monkeypatch.setattr(LibpqTransaction, "send", recorded)
    return sent


def _loop(
    saver: PostgresSaver,
    node: Any = _tick,
    *,
    schema: Any = LoopState,
    route: Any = _route,
) -> Any:
    """A loop of one step, ``tick`` (``node``), until ``route`` ends it, compiled
    on ``saver``: by default the counter loop."""
    builder = StateGraph(schema)
    builder.add_node("tick", node)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", route)
    return builder.compile(checkpointer=saver)


def test_each_step_sends_one_fence_statement(
    saver: PostgresSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = _recording(monkeypatch)
    out = _loop(saver).invoke(
        {"n": 0, "limit": 5},
        {"configurable": {"thread_id": "t"}},
        durability="sync",
    )
    sent = [stmt.sql for stmt in recorded]

    assert out["n"] == 5
    both = [s for s in sent if "engine_checkpoint_expect_head" in s]
    alone = [s for s in sent if "engine_thread_lease_check" in s and s not in both]
    saved = list(saver.list({"configurable": {"thread_id": "t"}}))
    assert len(both) == len(saved)  # every checkpoint of the run, each fenced
    assert all("engine_thread_lease_check" in s for s in both)
    assert alone == []
    assert not any(s.startswith("SELECT holder") for s in sent)  # taken: RETURNING


class AskState(TypedDict, total=False):
    n: int
    note: str
    answers: list[Any]


def _ask(state: AskState) -> dict[str, Any]:
    answer = interrupt(state["n"])
    return {"n": state["n"] + 1, "answers": [*state["answers"], answer]}


def test_a_resumed_run_reads_only_the_values_its_saver_did_not_keep(
    saver: PostgresSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The saver keeps the small values it stored with its guess of the head:
    a resume on the same saver reads from the values table only what is too
    large to keep (``saves.GUESS_VALUE_BYTES``), and its node sees the state
    whole, unchanged channels included."""
    builder = StateGraph(AskState)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "ask")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    note = "x" * (GUESS_VALUE_BYTES + 1)
    graph.invoke({"n": 0, "note": "short", "answers": []}, config)
    sent = _recording(monkeypatch)

    def read() -> list[list[str]]:
        """The channels each values read asked for."""
        values = [stmt for stmt in sent if stmt.sql == DIALECT["blobs_for_keys"]]
        return [sorted(stmt.params[2]) for stmt in values]

    for answer in ("a", "b"):
        graph.invoke(Command(resume=answer), config)
    assert read() == []  # n, note, answers: kept by the saver that stored them
    assert graph.get_state(config).values == {
        "n": 2,
        "note": "short",
        "answers": ["a", "b"],
    }
    graph.update_state(config, {"note": note})  # a large value: not kept
    sent.clear()
    graph.invoke(Command(resume="c"), config)
    assert read() == [["note"]]
    assert graph.get_state(config).values["answers"] == ["a", "b", "c"]
    assert graph.get_state(config).values["note"] == note


def test_a_save_after_losing_the_lease_is_refused_as_such(saver: PostgresSaver) -> None:
    """The lease is checked before the head in the shared statement: a run
    that lost its thread is told so, even when the head moved on too."""
    config: Any = {"configurable": {"thread_id": "t"}}
    _loop(saver).invoke({"n": 0, "limit": 1}, config)

    def steal(state: LoopState) -> dict[str, Any]:
        # another process takes the thread over and moves its head meanwhile
        with saver._connection() as conn:
            conn.execute(
                "UPDATE engine_thread_leases SET holder = 'other', "
                "expires_at = clock_timestamp() + interval '1 minute'"
            )
        saver.put(
            saver.get_tuple(config).config,  # type: ignore[union-attr]
            {**saver.get_tuple(config).checkpoint, "id": "1f" + "0" * 34},  # type: ignore[union-attr]
            {"source": "update", "step": 99, "parents": {}},
            {},
        )
        return _tick(state)

    with pytest.raises(ThreadLeaseLostError):
        _loop(saver, steal).invoke({"n": 0, "limit": 3}, config, durability="sync")


def test_reads_keep_one_plan_that_never_scans_a_table_whole() -> None:
    # Postgres keeps a prepared statement's generic plan for the connection's
    # life; chosen while a table is nearly empty it would scan the table whole,
    # and go on doing so as the table grows. Every saver transaction plans
    # without sequential scans (PLANNING), so the reads are prepared once and
    # their one plan looks rows up by key however the tables grow.
    with (
        fresh_database(pg_dsn()) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        saver = PostgresSaver(conn)
        saver.setup()
        builder = StateGraph(LoopState)
        builder.add_node("tick", _tick)
        builder.add_edge(START, "tick")
        builder.add_conditional_edges("tick", _route)
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke({"n": 0, "limit": 3}, config)
        conn.execute("ANALYZE")  # statistics of nearly empty tables
        for _ in range(12):  # past psycopg's prepare threshold and Postgres' five
            assert saver.get_tuple(config) is not None
        _assert_reads_use_indexes(conn, saver, config)
        for index in range(40):  # the tables grow past what the plans saw
            graph.invoke(
                {"n": 0, "limit": 30}, {"configurable": {"thread_id": f"g{index}"}}
            )
        _assert_reads_use_indexes(conn, saver, config)  # the plans kept
        conn.execute("ANALYZE")
        _assert_reads_use_indexes(conn, saver, config)  # the plans made anew


def _assert_reads_use_indexes(
    conn: psycopg.Connection[Any], saver: PostgresSaver, config: Any
) -> None:
    """The plan each prepared read of values and writes runs under ``PLANNING``."""
    head = saver.get_tuple(config)
    assert head is not None
    prepared = dict(
        conn.execute(
            "SELECT statement, name FROM pg_prepared_statements "
            "WHERE statement LIKE '%%engine_checkpoint_%%'"
        ).fetchall()
    )
    checkpoint_id = head.config["configurable"]["checkpoint_id"]
    reads = {  # name -> arguments
        next(
            name
            for sql, name in prepared.items()
            if "FROM engine_checkpoint_writes" in sql
        ): f"'{{t}}', '{{\"\"}}', '{{{checkpoint_id}}}'",
        next(
            name
            for sql, name in prepared.items()
            if sql.startswith("WITH RECURSIVE wanted")
        ): "'{t}', '{\"\"}', '{n}', '{x}'",
    }
    with conn.transaction():
        conn.execute(PLANNING)
        for statement, arguments in reads.items():
            plan = "\n".join(
                row[0]
                for row in conn.execute(f"EXPLAIN EXECUTE {statement}({arguments})")
            )
            assert "Seq Scan" not in plan, plan
            assert "Index" in plan, plan


def test_a_whole_table_read_under_the_planning_settings_is_not_compiled() -> None:
    # A disabled sequential scan raises a plan's cost past the JIT thresholds:
    # without jit off, the metadata search of delete_for_runs (a whole-table
    # read) would be compiled at each run (50-90 ms on a large table).
    with (
        fresh_database(pg_dsn()) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        PostgresSaver(conn).setup()
        search = DIALECT["metadata_select"] + " WHERE metadata->>'run_id' = 'r1'"
        with conn.transaction():
            conn.execute(PLANNING)
            plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {search}"))
        assert "Seq Scan" in plan  # its only plan, disabled or not
        assert "JIT" not in plan, plan


@pytest.mark.parametrize("planned_before", [False, True], ids=["first", "later"])
def test_a_connection_whose_transaction_aborts_goes_on_planning(
    planned_before: bool,
) -> None:
    # The planning settings are a prepared statement: made in a pipeline the
    # database then aborts (a fencing conflict), it must not be lost or made twice.
    with fresh_database(pg_dsn()) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            PostgresSaver(conn).setup()
        with psycopg.connect(dsn, autocommit=True) as conn:
            saver = PostgresSaver(conn)
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            if planned_before:
                assert saver.get_tuple(config) is None
            stale = {"configurable": {**config["configurable"], EXPECTED_HEAD: "gone"}}
            with pytest.raises(CheckpointConflictError):
                saver.put(stale, make_checkpoint(), _INPUT, {})
            for _ in range(8):  # past every prepare threshold
                saver.put(config, make_checkpoint(), _INPUT, {})
                assert saver.get_tuple(config) is not None


_INPUT: Any = {"source": "input", "step": -1, "parents": {}}


def test_a_runs_last_save_gives_its_lease_back_in_its_check(
    saver: PostgresSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of quick steps saves them in one batch with its lease's release:
    the batch's lease check is the release (one statement, no share lock)."""
    recorded = _recording(monkeypatch)
    out = _loop(saver).invoke(
        {"n": 0, "limit": 3}, {"configurable": {"thread_id": "t"}}
    )
    sent = [stmt.sql for stmt in recorded]

    assert out["n"] == 3
    ended = [s for s in sent if s == DIALECT["lease_end_and_head"]]
    assert len(ended) == 1
    assert DIALECT["lease_release"] not in sent
    assert saver.get_lease("t", "") is None
    assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 5


# --- inserts of several rows ------------------------------------------------------


class AppendingState(TypedDict, total=False):
    n: int
    limit: int
    note: str | None
    answers: Annotated[list[Any], operator.add]  # stored as deltas within a run


def _append(state: AppendingState) -> dict[str, Any]:
    n = state["n"]
    return {"n": n + 1, "answers": [f"word {n}", -(70_000**n), {"deep": [None, 1.5]}]}


def _appending(saver: PostgresSaver) -> Any:
    """The counter loop over ``AppendingState``, each step appending to a list."""
    return _loop(saver, _append, schema=AppendingState)


def test_a_step_s_values_go_in_one_insert_and_are_stored_as_row_by_row(
    saver: PostgresSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's new values are one statement (``PostgresDialect.inserts``), and
    the rows it stores are those one statement per value stores: values of
    every kind, integers of every width, None, lists stored as deltas."""
    graph = _appending(saver)
    start = [f"item {i}" for i in range(300)]

    def run(thread: str) -> dict[str, Any]:
        config = {"configurable": {"thread_id": thread}}
        return graph.invoke(
            {"n": 0, "limit": 6, "note": None, "answers": start}, config
        )

    recorded = _recording(monkeypatch)
    merged = run("merged")
    value_inserts = [
        (stmt, rows)
        for stmt in recorded
        if (rows := insert_rows(stmt, DIALECT["insert_blob"])) is not None
    ]
    # one execution of a statement carrying the step's rows (not one per row)
    assert value_inserts
    assert all(stmt.many is None and len(rows) > 1 for stmt, rows in value_inserts)
    monkeypatch.setattr(  # one statement per row, as before merging
        type(DIALECT), "inserts", SqlDialect.inserts
    )
    row_by_row = run("row_by_row")

    assert merged == row_by_row
    assert merged["answers"][-3:] == ["word 5", -(70_000**5), {"deep": [None, 1.5]}]
    columns = (
        "channel, kind, type, blob, base_version IS NULL, delta_start, chain_len, "
        "chain_bytes, root_bytes"
    )
    with psycopg.connect(saver.conn.conninfo) as conn:  # type: ignore[union-attr]
        stored = {
            thread: conn.execute(
                f"SELECT {columns} FROM engine_checkpoint_blobs "
                "WHERE thread_id = %s ORDER BY channel, version",
                (thread,),
            ).fetchall()
            for thread in ("merged", "row_by_row")
        }
    assert stored["merged"] == stored["row_by_row"]
    assert any(row[6] for row in stored["merged"])  # a delta's chain bookkeeping


def test_rows_merged_in_one_insert_keep_a_repeated_key_s_first(
    saver: PostgresSaver,
) -> None:
    """``ON CONFLICT DO NOTHING`` across the rows of one statement keeps the
    first row of a key, as one statement per row does; past ``MERGED_ROWS``
    rows or ``MERGED_BYTES`` of payload a new statement starts."""
    row = ("t", "", "c", "v1", None, None, b"first", None, None, None, None, None)
    again = (*row[:6], b"second", *row[7:])
    others = [(*row[:3], f"v{i}", *row[4:]) for i in range(2, 12)]
    stmts = list(DIALECT.inserts("insert_blob", [row, again, *others]))

    assert [len(insert_rows(s, DIALECT["insert_blob"]) or ()) for s in stmts] == [
        MERGED_ROWS,
        12 - MERGED_ROWS,
    ]
    with saver._connection() as conn:  # the saver's own pool connection
        txn = LibpqTransaction(conn, "BEGIN", PLANNING)
        txn.run(tuple(stmts), last=True)
        stored = conn.execute(
            "SELECT version, blob FROM engine_checkpoint_blobs ORDER BY version"
        ).fetchall()
    assert (("v1", b"first") in stored) and len(stored) == 11

    big = (*row[:3], "big", *row[4:6], b"x" * MERGED_BYTES, *row[7:])
    split = list(DIALECT.inserts("insert_blob", [big, *others[:3]]))
    assert [len(insert_rows(s, DIALECT["insert_blob"]) or ()) for s in split] == [
        1,
        3,
    ]


def test_upserts_and_single_rows_are_not_merged() -> None:
    """A ``DO UPDATE`` insert never meets a key twice in one statement (Postgres
    refuses that), and one row is the plain statement."""
    rows = [("t", "", "c", "k", i, "ch", "json", b"1", "") for i in range(3)]
    (replace,) = DIALECT.inserts("insert_write_replace", rows)
    (one,) = DIALECT.inserts("insert_write_keep", rows[:1])

    assert replace.sql == DIALECT["insert_write_replace"] and replace.many == rows
    assert one.sql == DIALECT["insert_write_keep"] and one.many == rows[:1]


def test_merged_inserts_are_prepared_once_per_row_count(
    saver: PostgresSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Integers go as text, so a merged insert's parameter types never depend on
    the values (psycopg types an int by its size, None not at all): one
    prepared form per row count, however the rows mix them."""
    monkeypatch.setattr(libpq, "_NAMES", libpq._Names())
    graph = _appending(saver)
    # deltas on a small and on a large list: chain sizes of two integer widths
    # (under 2**15 and over), beside the NULLs of the values stored whole
    for items, thread in ((3, "small"), (4_000, "large")):
        start = [f"item {i}" for i in range(items)]
        graph.invoke(
            {"n": 0, "limit": 4, "note": None, "answers": start},
            {"configurable": {"thread_id": thread}},
        )
    with psycopg.connect(saver.conn.conninfo) as conn:  # type: ignore[union-attr]
        (widest,) = conn.execute(
            "SELECT max(root_bytes) FROM engine_checkpoint_blobs"
        ).fetchone() or (None,)
    assert widest is not None and widest > 2**15
    forms: dict[str, set[tuple[int, ...]]] = {}
    for sql, types in libpq._NAMES._names:
        if sql.startswith("INSERT INTO engine_checkpoint_blobs") and "), (" in sql:
            forms.setdefault(sql, set()).add(types)
    assert forms and all(len(types) == 1 for types in forms.values())


# --- a lease change's settings ---------------------------------------------------


def test_a_lease_change_sets_its_commit_early_in_the_planning_statement(
    saver: PostgresSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction that starts with ``lease_commit_early`` sends it as part of
    its settings statement (``PLANNING_FOR``), not as a statement of its own;
    any other transaction sends the usual settings."""
    recorded = _recording(monkeypatch)
    graph = _loop(saver)
    graph.invoke({"n": 0, "limit": 2}, {"configurable": {"thread_id": "t"}})
    sent = [stmt.sql for stmt in recorded]

    early = PLANNING_FOR[DIALECT["lease_commit_early"]]
    assert DIALECT["lease_commit_early"] not in sent
    assert sent.count(early) == 1  # the take; the saves commit durably
    assert sent.count(PLANNING) >= 1


@pytest.mark.parametrize("first", ["lease", "other"])
def test_the_settings_statement_stands_for_the_first_when_named(first: str) -> None:
    marker = DIALECT["lease_commit_early"]
    show = Stmt("SELECT current_setting('synchronous_commit')", fetch=True)
    with fresh_database(pg_dsn()) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        (server,) = conn.execute("SHOW synchronous_commit").fetchone() or ("",)
        txn = LibpqTransaction(conn, "BEGIN", PLANNING, PLANNING_FOR)
        stmts = (Stmt(marker), show) if first == "lease" else (show,)

        rows = txn.run(stmts, last=True)

    if first == "lease":  # committed without waiting for the WAL flush
        assert rows == [None, [("off",)]]
    else:  # the server's own setting
        assert rows == [[(server,)]]

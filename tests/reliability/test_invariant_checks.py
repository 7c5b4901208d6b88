"""The invariant checker itself: silent on healthy data, loud on each broken rule.

Every check of ``tests._support.invariants`` is shown failing on a database
broken on purpose, so a fault test that ends with "no violations" means
something. Checkpoint databases are real (a graph run on SQLite and Postgres);
the studio's rules are broken in constraint-free temporary copies of its
tables (they shadow the real ones on the test's connection), since the real
tables' unique constraints refuse some of the broken rows outright.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from django.db import connection
from django.utils import timezone

from engine.checkpoint.base import BaseCheckpointSaver
from engine.graph import END, START, StateGraph
from studio.models import (
    ApprovalDecision,
    OutboundEmail,
    PurchaseOutbox,
    ReviewRequest,
    Run,
    Thread,
)
from tests._support.invariants import check_saver, check_studio
from tests._support.postgres import fresh_database, pg_dsn
from tests._support.reviews import PURCHASE_GRAPHS, decision, member, purchase, ruling
from tests._support.savers import SaverSpec
from tests._support.studio import serve_graphs


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(saver: BaseCheckpointSaver) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    for name in "abc":
        builder.add_node(name, lambda state, name=name: {"log": [name * 40]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SaverSpec]:
    """A checkpoint database holding one finished thread with two deliberate forks."""
    if request.param == "sqlite":
        made = SaverSpec("sqlite", str(tmp_path / "checkpoints.db"))
        yield _healthy(made)
    else:
        with fresh_database(pg_dsn()) as dsn:
            yield _healthy(SaverSpec("postgres", dsn))


def _healthy(spec: SaverSpec) -> SaverSpec:
    with spec.open() as saver:
        graph = _graph(saver)
        config = {"configurable": {"thread_id": "t1"}}
        graph.invoke({"log": []}, config)
        history = list(graph.get_state_history(config))
        graph.invoke(None, history[2].config)  # replay from a past step: a fork
        graph.update_state(history[3].config, {"log": ["edit"]})  # another
    return spec


def _head(spec: SaverSpec) -> str:
    return str(
        spec.execute(
            "SELECT MAX(checkpoint_id) FROM engine_checkpoints WHERE thread_id = 't1'"
        )[0][0]
    )


def test_a_healthy_thread_with_deliberate_forks_passes(spec: SaverSpec) -> None:
    assert check_saver(spec.target) == []
    sources = spec.execute("SELECT COUNT(*) FROM engine_checkpoints")[0][0]
    assert sources >= 8  # the line and both forks are there to be checked


def test_two_writers_continuing_one_checkpoint_are_a_fork(spec: SaverSpec) -> None:
    # the first step's checkpoint (source "loop"), written again as a sibling
    head = str(
        spec.execute(
            "SELECT MIN(checkpoint_id) FROM engine_checkpoints "
            "WHERE parent_checkpoint_id IS NOT NULL"
        )[0][0]
    )
    _copy_row(spec, "engine_checkpoints", f"checkpoint_id = '{head}'", head + "z")

    problems = check_saver(spec.target)

    assert len(problems) == 1 and problems[0].startswith("fork:"), problems
    assert head in problems[0] and head + "z" in problems[0]


def test_a_channel_version_without_its_value_is_reported(spec: SaverSpec) -> None:
    channel, version = spec.execute(
        "SELECT channel, version FROM engine_checkpoint_blobs WHERE thread_id = 't1' "
        "AND channel = 'log' ORDER BY version DESC LIMIT 1"
    )[0]
    spec.execute(
        "DELETE FROM engine_checkpoint_blobs WHERE channel = %s AND version = %s",
        (channel, version),
    )

    problems = check_saver(spec.target)

    assert problems and all(p.startswith("missing value:") for p in problems), problems
    assert f"'log' version {version}" in problems[0]


def test_a_delta_without_its_base_is_reported(spec: SaverSpec) -> None:
    rows = spec.execute(
        "SELECT base_version FROM engine_checkpoint_blobs WHERE base_version IS NOT NULL "
        "ORDER BY version LIMIT 1"
    )
    assert rows, "the list channel grew step by step: stored as deltas"
    spec.execute(
        "DELETE FROM engine_checkpoint_blobs WHERE channel = 'log' AND version = %s",
        (rows[0][0],),
    )

    problems = check_saver(spec.target)

    assert any(p.startswith("broken delta:") for p in problems), problems


def test_a_write_of_a_missing_checkpoint_is_reported(spec: SaverSpec) -> None:
    with spec.open(setup=False) as saver:
        saver.put_writes(
            {
                "configurable": {
                    "thread_id": "t1",
                    "checkpoint_ns": "",
                    "checkpoint_id": "gone",
                }
            },
            [("log", ["x"])],
            "task-1",
        )

    problems = check_saver(spec.target)

    assert problems == [
        "orphan write: 1 write(s) of task task-1 on thread 't1' ns '' belong to "
        "checkpoint gone, which is not stored"
    ]


def test_threads_narrow_the_check(spec: SaverSpec) -> None:
    with spec.open(setup=False) as saver:
        saver.put_writes(
            {
                "configurable": {
                    "thread_id": "t2",
                    "checkpoint_ns": "",
                    "checkpoint_id": "x",
                }
            },
            [("log", ["x"])],
            "task-1",
        )
    assert check_saver(spec.target, threads=["t1"]) == []
    assert len(check_saver(spec.target, threads=["t1", "t2"])) == 1


def test_an_unreadable_checkpoint_is_reported(spec: SaverSpec) -> None:
    head = _head(spec)
    spec.execute(
        "UPDATE engine_checkpoints SET checkpoint_type = 'bogus' "
        "WHERE checkpoint_id = %s",
        (head,),
    )
    assert any(p.startswith("unreadable:") for p in check_saver(spec.target))


def _copy_row(spec: SaverSpec, table: str, where: str, new_id: str) -> None:
    """Insert a copy of one row of ``table`` with another ``checkpoint_id``."""
    script = [
        f"CREATE TEMP TABLE copied AS SELECT * FROM {table} WHERE {where}",
        f"UPDATE copied SET checkpoint_id = '{new_id}'",
        f"INSERT INTO {table} SELECT * FROM copied",
    ]
    if spec.kind == "sqlite":
        import sqlite3  # noqa: PLC0415

        conn = sqlite3.connect(spec.target)
        with conn:
            for sql in script:
                conn.execute(sql)
        conn.close()
    else:
        import psycopg  # noqa: PLC0415

        with psycopg.connect(spec.target) as pg:
            for sql in script:
                pg.execute(sql)  # type: ignore[arg-type]


# -- the studio ----------------------------------------------------------------------


_graphs = serve_graphs(PURCHASE_GRAPHS)


@pytest.mark.django_db(transaction=True)
def test_an_approved_and_executed_purchase_passes() -> None:
    rita = member("rita")
    rex = member("rex", "reviewers")
    run = purchase(rita, request_id="PO-OK", amount_minor=120_00)
    ruling(rex, run.thread_id, decision("PO-OK"))

    assert PurchaseOutbox.objects.filter(request_id="PO-OK").count() == 1
    assert ReviewRequest.objects.get(request_id="PO-OK").outcome == "executed"
    assert check_studio() == []


TABLES = (Thread, Run, ApprovalDecision, ReviewRequest, PurchaseOutbox, OutboundEmail)


@pytest.fixture
def loose(db: None) -> Iterator[Any]:
    """Constraint-free empty copies of the studio's tables, shadowing the real ones
    on this connection (SQLite and Postgres look in temporary tables first)."""
    schema = "main" if connection.vendor == "sqlite" else "public"
    with connection.cursor() as cursor:
        for model in TABLES:
            table = model._meta.db_table
            cursor.execute(
                f"CREATE TEMP TABLE {table} AS SELECT * FROM {schema}.{table} WHERE 1 = 0"
            )

    def insert(model: Any, **values: Any) -> None:
        columns = ", ".join(values)
        marks = ", ".join(["%s"] * len(values))
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {model._meta.db_table} ({columns}) VALUES ({marks})",
                list(values.values()),
            )

    yield insert
    with connection.cursor() as cursor:
        for model in TABLES:
            cursor.execute(
                f"DROP TABLE temp.{model._meta.db_table}"
                if connection.vendor == "sqlite"
                else f"DROP TABLE pg_temp.{model._meta.db_table}"
            )


def _decision(insert: Any, decision_id: str, **values: Any) -> None:
    row = {
        "id": values.pop("id", abs(hash(decision_id)) % 10**9),
        "decision_id": decision_id,
        "thread_id": "t1",
        "request_id": "PO-1",
        "approval_version": 1,
        "level": 1,
        "action": "approve",
        "amount_minor": 100,
        "run_id": "",
    }
    row.update(values)
    insert(ApprovalDecision, **row)


def _run(insert: Any, run_id: str, status: str = "success", **values: Any) -> None:
    insert(
        Run,
        run_id=run_id,
        thread_id=values.pop("thread_id", "t1"),
        status=status,
        **values,
    )


def test_a_run_left_running_past_its_lease_is_reported(loose: Any) -> None:
    now = timezone.now()
    _run(loose, "r-live", "running", lease_expires_at=now + timedelta(seconds=30))
    _run(
        loose,
        "r-dead",
        "running",
        thread_id="t2",
        lease_expires_at=now - timedelta(seconds=60),
    )

    assert check_studio(now=now, lease_grace=90) == []
    problems = check_studio(now=now)
    assert len(problems) == 1 and problems[0].startswith("stale run: run r-dead"), (
        problems
    )


def test_two_running_runs_on_one_thread_are_reported(loose: Any) -> None:
    later = timezone.now() + timedelta(seconds=30)
    _run(loose, "r1", "running", lease_expires_at=later)
    _run(loose, "r2", "running", lease_expires_at=later)

    assert check_studio() == ["two running: thread 't1' has 2 running runs"]


def test_two_decisions_on_one_level_are_reported(loose: Any) -> None:
    _run(loose, "r1")
    _decision(loose, "d1", run_id="r1")
    _decision(loose, "d2", action="reject")

    problems = check_studio()
    assert "double decision: PO-1 v1 level 1 has 2 decisions" in problems
    # the rejection is final too and queued nothing
    assert any(p.startswith("resume: final decision d2") for p in problems), problems


def test_a_final_decision_without_its_resume_is_reported(loose: Any) -> None:
    loose(
        ReviewRequest,
        id=1,
        thread_id="t1",
        request_id="PO-1",
        approval_version=1,
        levels_required=2,
    )
    _decision(loose, "d1")  # level 1 of 2: not final, needs no run
    assert check_studio() == []
    _decision(loose, "d2", level=2)

    assert check_studio() == [
        "resume: final decision d2 (approve PO-1 v1) queued no run to resume the thread"
    ]


def test_a_resume_run_that_does_not_exist_or_answers_twice_is_reported(
    loose: Any,
) -> None:
    _decision(loose, "d1", run_id="r-gone")
    _decision(loose, "d2", approval_version=2, run_id="r-gone")
    _decision(loose, "d3", request_id="PO-2", run_id="r-a")
    _decision(loose, "d4", request_id="PO-2", level=2, run_id="r-b")
    _run(loose, "r-a")
    _run(loose, "r-b")

    problems = check_studio()

    assert "resume: decision d1 names run r-gone, which does not exist" in problems
    assert "resume: run r-gone answers 2 decisions" in problems
    assert any(p.startswith("resume: PO-2 v1 was resumed by 2 runs") for p in problems)


@pytest.mark.parametrize(
    ("amount", "version", "action", "approvals"),
    [
        (999, 1, "approve", "0 of 1"),
        (100, 2, "approve", "0 of 1"),
        (100, 1, "reject", "0 of 1"),
    ],
)
def test_a_purchase_without_an_exact_approval_is_reported(
    loose: Any, amount: int, version: int, action: str, approvals: str
) -> None:
    _run(loose, "r1")
    _decision(
        loose,
        "d1",
        amount_minor=amount,
        approval_version=version,
        action=action,
        run_id="r1",
    )
    loose(
        PurchaseOutbox,
        id=1,
        request_id="PO-1",
        approval_version=1,
        amount_minor=100,
        thread_id="t1",
    )

    problems = check_studio()

    assert any(
        p.startswith(
            f"unapproved purchase: PO-1 v1 for 100 is in the outbox with {approvals}"
        )
        for p in problems
    ), problems


def test_a_purchase_missing_its_second_level_is_reported(loose: Any) -> None:
    loose(
        ReviewRequest,
        id=1,
        thread_id="t1",
        request_id="PO-1",
        approval_version=1,
        levels_required=2,
    )
    _run(loose, "r1")
    _decision(loose, "d1")
    loose(
        PurchaseOutbox,
        id=1,
        request_id="PO-1",
        approval_version=1,
        amount_minor=100,
        thread_id="t1",
    )
    assert any("with 1 of 2 approving" in p for p in check_studio())
    _decision(loose, "d2", level=2, run_id="r1")
    assert check_studio() == []


def test_a_side_effect_recorded_twice_or_missing_is_reported(loose: Any) -> None:
    _run(loose, "r1")
    _decision(loose, "d1", id=7, run_id="r1")
    for pk in (1, 2):
        loose(
            PurchaseOutbox,
            id=pk,
            request_id="PO-1",
            approval_version=1,
            amount_minor=100,
            thread_id="t1",
        )
        loose(
            OutboundEmail, id=pk, thread_id="t1", tool_call_id="call-1", decision_id=7
        )
    loose(
        ReviewRequest,
        id=1,
        thread_id="t2",
        graph="purchase",
        request_id="PO-9",
        approval_version=1,
        outcome="executed",
    )

    problems = check_studio()

    assert problems == [
        "side effect: PO-1 is in the outbox 2 times",
        "side effect: tool call call-1 of thread 't1' sent 2 emails",
        "side effect: PO-9 v1 says executed but nothing is in the outbox",
    ]


def test_an_email_its_decision_rejected_is_reported(loose: Any) -> None:
    _run(loose, "r1")
    _decision(loose, "d1", id=7, action="reject", run_id="r1")
    loose(OutboundEmail, id=1, thread_id="t1", tool_call_id="call-1", decision_id=7)

    assert check_studio() == [
        "side effect: tool call call-1 of thread 't1' sent an email its decision did "
        "not approve (reject)"
    ]

"""Two processes on one interrupted thread, the engine used as a library.

The finding these tests hold down: both processes resumed the thread at once
(one approving, one rejecting) and the node after the interrupt ran in both,
so its side effect happened twice. With thread leases exactly one runs it; the
other is refused before it runs anything, or waits and then finds nothing left
to resume; a process paused past its lease writes nothing once another took
the thread over. Real savers (SQLite file, Postgres), real processes (spawn).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.lease_runs import (
    interrupted_thread,
    join_or_dump,
    resume_in_child,
    traces,
)
from tests._support.postgres import fresh_database, pg_dsn
from tests._support.savers import SaverSpec

CTX = multiprocessing.get_context("spawn")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SaverSpec]:
    if request.param == "sqlite":
        yield SaverSpec("sqlite", str(tmp_path / "checkpoints.db"))
    else:
        with fresh_database(pg_dsn()) as dsn:
            yield SaverSpec("postgres", dsn)


def _race(spec: SaverSpec, trace: str, **options) -> dict[str, str]:
    """Resume the thread as "approve" and "reject" in two processes at once."""
    results = CTX.Queue()
    barrier = CTX.Barrier(2)
    children = [
        CTX.Process(
            target=resume_in_child,
            args=(spec, trace, "t1", who, results, barrier),
            kwargs=options,
        )
        for who in ("approve", "reject")
    ]
    for child in children:
        child.start()
    for child in children:
        join_or_dump(child, trace)
        assert child.exitcode == 0
    return dict(results.get(timeout=30) for _ in children)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_two_processes_resuming_at_once_run_the_side_effect_once(
    spec: SaverSpec, tmp_path: Path, durability: str
) -> None:
    trace = str(tmp_path / "trace.txt")
    interrupted_thread(spec, trace, "t1")

    outcomes = _race(spec, trace, durability=durability)

    winners = [who for who, outcome in outcomes.items() if outcome.startswith("ok:")]
    assert len(winners) == 1, outcomes
    (winner,) = winners
    (loser,) = set(outcomes) - {winner}
    assert outcomes[winner] == f"ok:{winner}"
    assert outcomes[loser].startswith("ThreadBusyError:"), outcomes
    assert "THREAD_BUSY" in outcomes[loser]
    lines = traces(trace)
    assert lines.count(f"act:{winner}") == 1
    assert [line for line in lines if line.endswith(f":{loser}")] == [f"start:{loser}"]
    with spec.open(setup=False) as saver:
        head = saver.get_tuple(
            {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        )
        assert head.checkpoint["channel_values"]["done"] == winner
        assert saver.get_lease("t1", "") is None  # released at the end


def test_waiting_process_runs_after_the_first_and_finds_nothing_to_resume(
    spec: SaverSpec, tmp_path: Path
) -> None:
    trace = str(tmp_path / "trace.txt")
    interrupted_thread(spec, trace, "t1")

    outcomes = _race(spec, trace, on_busy="wait")

    winners = [who for who, outcome in outcomes.items() if outcome.startswith("ok:")]
    assert len(winners) == 1, outcomes
    (winner,) = winners
    (waiter,) = set(outcomes) - {winner}
    # it waited for the winner's whole run, then read the head the winner left:
    # the interrupt is answered, so its resume has nothing to answer
    assert outcomes[waiter].startswith("InvalidResumeError:"), outcomes
    assert "nothing to resume" in outcomes[waiter]
    lines = traces(trace)
    assert [line for line in lines if line.startswith(("act:", "after:"))] == [
        f"act:{winner}",
        f"after:{winner}",
    ]


def test_waiting_continuation_runs_on_the_head_the_first_run_left(
    spec: SaverSpec, tmp_path: Path
) -> None:
    trace = str(tmp_path / "trace.txt")
    interrupted_thread(spec, trace, "t1")
    results = CTX.Queue()
    first = CTX.Process(
        target=resume_in_child, args=(spec, trace, "t1", "approve", results)
    )
    first.start()
    _wait_for(trace, "act:approve")
    second = CTX.Process(
        target=resume_in_child,
        args=(spec, trace, "t1", "again", results),
        kwargs={"resume": False, "on_busy": "wait"},
    )
    second.start()
    for child in (first, second):
        join_or_dump(child, trace)

    outcomes = dict(results.get(timeout=30) for _ in range(2))

    assert outcomes == {"approve": "ok:approve", "again": "ok:approve"}
    lines = traces(trace)
    assert lines.count("act:approve") == 1 and "after:approve" in lines
    assert not [line for line in lines if line.startswith(("act:again", "after:again"))]


def test_paused_process_writes_nothing_after_losing_its_lease(
    spec: SaverSpec, tmp_path: Path
) -> None:
    trace = str(tmp_path / "trace.txt")
    interrupted_thread(spec, trace, "t1")
    results = CTX.Queue()
    zombie = CTX.Process(
        target=resume_in_child,
        args=(spec, trace, "t1", "zombie", results),
        # act sleeps long enough that the pause lands inside it on a busy machine
        kwargs={"lease_seconds": 1.0, "act_seconds": 3.0},
    )
    zombie.start()
    _wait_for(trace, "act:zombie")
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        with spec.open(setup=False) as saver:
            written_before = _checkpoints_by(saver, "zombie")
        time.sleep(1.5)  # past its lease
        # another process continues the thread (as a worker would, after a crash)
        rescuer = CTX.Process(
            target=resume_in_child,
            args=(spec, trace, "t1", "rescuer", results),
            kwargs={"resume": False},
        )
        rescuer.start()
        join_or_dump(rescuer, trace)
        assert rescuer.exitcode == 0
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    join_or_dump(zombie, trace)

    outcomes = dict(results.get(timeout=30) for _ in range(2))

    assert outcomes["rescuer"] == "ok:zombie"  # the decision saved before the pause
    assert outcomes["zombie"].startswith("ThreadLeaseLostError:"), outcomes
    lines = traces(trace)
    assert "after:rescuer" in lines and "after:zombie" not in lines
    with spec.open(setup=False) as saver:
        assert _checkpoints_by(saver, "zombie") == written_before
        head = saver.get_tuple(
            {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        )
        assert head.metadata.get("who") == "rescuer"
        assert head.checkpoint["channel_values"]["done"] == "zombie"


def _checkpoints_by(saver, who: str) -> list[str]:
    return sorted(
        item.config["configurable"]["checkpoint_id"]
        for item in saver.list({"configurable": {"thread_id": "t1"}})
        if item.metadata.get("who") == who
    )


def _wait_for(trace: str, line: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while line not in traces(trace):
        if time.monotonic() > deadline:
            raise AssertionError(f"{line!r} never appeared in {traces(trace)}")
        time.sleep(0.02)

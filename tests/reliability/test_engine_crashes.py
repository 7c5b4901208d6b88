"""The engine as a library, killed, stopped and restarted at its fault points.

Real processes (``python -m tests.reliability.crash_graphs``), real savers
(SQLite files; Postgres with ``ENGINE_TEST_PG_DSN``), each durability mode, each
case repeated. After every case the checkpoint database is checked
(``tests._support.invariants.check_saver``): no fork, no channel version without
its value, no write of a missing checkpoint.

* A SIGKILL in a step of two parallel tasks, ``b`` finished and ``c`` returned
  but not saved (``after_task_before_writes/c=kill``): the restarted process
  runs ``c`` only (sync; async too, whose writes of a finished task are saved at
  once as well); with ``exit`` nothing was saved, so it starts over. Each side
  effect is recorded once; the final state holds each node's write once.
* A SIGKILL inside a checkpoint write, after the values and before the
  checkpoint row (``between_values_and_checkpoint=kill@n``, at the 1st and 3rd
  save): the transaction is gone, the restart carries on from the last
  whole checkpoint.
* A zombie: the process stops (SIGSTOP) after ``c`` returned, past its thread
  lease; another process takes the thread over and finishes the run; the
  zombie, continued, is refused and writes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.invariants import check_saver
from tests._support.postgres import fresh_database, pg_dsn
from tests._support.savers import SaverSpec
from tests.reliability.crash_graphs import effects, main, run_counts

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
DURABILITIES = ["sync", "async", "exit"]
REPEATS = range(int(os.environ.get("RELIABILITY_REPEATS", "2")))
"""How many times each case runs (a soak sets more)."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SaverSpec]:
    if request.param == "sqlite":
        made = SaverSpec("sqlite", str(tmp_path / "checkpoints.db"))
        with made.open():
            pass
        yield made
    else:
        with fresh_database(pg_dsn()) as dsn:
            made = SaverSpec("postgres", dsn)
            with made.open():
                pass
            yield made


def _start(
    spec: SaverSpec, workdir: Path, durability: str, faults: str = ""
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "ENGINE_FAULTS"}
    if faults:
        env["ENGINE_FAULTS"] = faults
        env["ENGINE_FAULTS_LOG"] = str(workdir / "faults.log")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.reliability.crash_graphs",
            spec.kind,
            spec.target,
            str(workdir),
            "t1",
            durability,
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _run(
    spec: SaverSpec, workdir: Path, durability: str, faults: str = ""
) -> tuple[int, str]:
    child = _start(spec, workdir, durability, faults)
    out, _ = child.communicate(timeout=90)
    return child.returncode, out


def _restart(spec: SaverSpec, workdir: Path, durability: str) -> int:
    """Carry the thread on in this process, as a restarted one would."""
    return main([spec.kind, spec.target, str(workdir), "t1", durability])


def _final_log(spec: SaverSpec) -> list[str]:
    with spec.open(setup=False) as saver:
        head = saver.get_tuple(
            {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        )
    assert head is not None
    return sorted(head.checkpoint["channel_values"]["log"])


@pytest.mark.parametrize("repeat", REPEATS)
@pytest.mark.parametrize("durability", DURABILITIES)
def test_kill_after_one_parallel_task_finished_reruns_only_the_other(
    spec: SaverSpec, tmp_path: Path, durability: str, repeat: int
) -> None:
    code, out = _run(spec, tmp_path, durability, "after_task_before_writes/c=kill")
    assert code == -9, out
    assert run_counts(tmp_path) == {"a": 1, "b": 1, "c": 1, "d": 0}

    assert _restart(spec, tmp_path, durability) == 0

    again = 1 if durability == "exit" else 0  # exit: nothing was saved
    assert run_counts(tmp_path) == {"a": 1 + again, "b": 1 + again, "c": 2, "d": 1}
    assert effects(tmp_path, "t1") == {"a": 1 + again, "b": 1 + again, "c": 2, "d": 1}
    assert _final_log(spec) == ["a", "b", "c", "d"]
    assert check_saver(spec.target) == []


@pytest.mark.parametrize("nth", [1, 3])  # the first save, and one mid-run
@pytest.mark.parametrize("durability", DURABILITIES)
def test_kill_inside_a_checkpoint_write_leaves_whole_checkpoints(
    spec: SaverSpec, tmp_path: Path, durability: str, nth: int
) -> None:
    code, out = _run(
        spec, tmp_path, durability, f"between_values_and_checkpoint=kill@{nth}"
    )
    if code == 0:  # fewer saves than ``nth`` (exit durability saves once)
        assert durability == "exit" and nth > 1, out
        assert not (tmp_path / "faults.log").exists()
    else:
        assert code == -9, out
        assert (tmp_path / "faults.log").read_text().split()[1:] == [
            "between_values_and_checkpoint",
            "-",
            "kill",
        ]
        assert check_saver(spec.target) == []  # before the restart too

        assert _restart(spec, tmp_path, durability) == 0

    counts = run_counts(tmp_path)
    assert all(1 <= counts[node] <= 2 for node in counts), counts
    # one row per node; a node killed before its effect started once more
    done = effects(tmp_path, "t1")
    assert set(done) == set(counts), done
    assert all(1 <= done[node] <= counts[node] for node in counts), (done, counts)
    assert _final_log(spec) == ["a", "b", "c", "d"]
    assert check_saver(spec.target) == []


@pytest.mark.parametrize("repeat", REPEATS)
@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_zombie_past_its_lease_writes_nothing(
    spec: SaverSpec, tmp_path: Path, durability: str, repeat: int
) -> None:
    zombie = _start(spec, tmp_path, durability, "after_task_before_writes/c=pause:3")
    log = tmp_path / "faults.log"
    deadline = time.monotonic() + 60
    while not log.exists():
        assert time.monotonic() < deadline and zombie.poll() is None
        time.sleep(0.02)
    before = _checkpoint_ids(spec)

    # this process takes the thread over once the paused one's lease ended
    assert _restart(spec, tmp_path, durability) == 0
    after_rescue = _checkpoint_ids(spec)
    out, _ = zombie.communicate(timeout=60)
    assert zombie.returncode == 3, out  # refused: ThreadLeaseLostError
    assert "no longer holds thread" in out
    assert _checkpoint_ids(spec) == after_rescue  # the zombie wrote nothing
    assert before <= after_rescue
    again = 1 if durability == "exit" else 0
    assert run_counts(tmp_path) == {"a": 1 + again, "b": 1 + again, "c": 2, "d": 1}
    assert _final_log(spec) == ["a", "b", "c", "d"]
    assert check_saver(spec.target) == []


def _checkpoint_ids(spec: SaverSpec) -> set[tuple[str, str]]:
    rows = spec.execute(
        "SELECT checkpoint_id, task_id FROM engine_checkpoint_writes "
        "UNION ALL SELECT checkpoint_id, '' FROM engine_checkpoints"
    )
    return {(str(a), str(b)) for a, b in rows}

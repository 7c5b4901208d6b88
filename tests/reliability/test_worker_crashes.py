"""``manage.py studio_worker`` processes killed, stopped and stopped politely mid-run.

One deployment for the module (Postgres, Redis, one Daphne; ``tests._support.
topology``) and, per case, real ``studio_worker`` processes: one armed with a
fault point (``ENGINE_FAULTS``), then a healthy one that takes the run over when
the first one's lease (2 s) has run out. The graph is the topology test's:
``prepare`` -> ``left`` + ``right`` in parallel -> ``merge``, twice, ->
``finish``; every task start is logged with its step and pid
(``TOPOLOGY_TASK_LOG``), so a task run twice shows.

After every case, the invariants are checked on the deployment's database: the
checkpoints (``check_saver``) and the studio's tables (``check_studio``: no run
left running past its lease, one running run per thread, ...).
"""

from __future__ import annotations

import collections
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests._support.invariants import check_saver, check_studio
from tests._support.postgres import pg_dsn
from tests._support.redis_service import redis_url
from tests._support.topology import Process, Topology, topology
from tests.topology.graphs import expected_trail, read_task_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.timeout(240),
]

GRAPH = "topology"
LEASE_SECONDS = 2.0


@pytest.fixture(scope="module")
def deploy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    workdir = tmp_path_factory.mktemp("deploy")
    with topology(
        workdir,
        pg_dsn=pg_dsn(),
        redis_url=redis_url(),
        graphs={GRAPH: "tests.topology.graphs:build"},
        daphnes=1,
        workers=0,
        lease_seconds=LEASE_SECONDS,
        extra_env={"TOPOLOGY_TASK_LOG": str(workdir / "tasks.log")},
        tokens=("requester",),
    ) as deployment:
        yield deployment


@pytest.fixture
def api(deploy: Topology) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {deploy.tokens['requester']}"}
    with httpx.Client(base_url=deploy.urls[0], headers=headers, timeout=60) as client:
        yield client


@pytest.fixture(autouse=True)
def no_workers_left(deploy: Topology) -> Iterator[None]:
    yield
    deploy.stop_workers(*list(deploy.workers))


def _worker(deploy: Topology, name: str, faults: str = "") -> Process:
    """Start a worker (armed with ``faults``) and wait until it waits for runs."""
    saved = dict(deploy.env)
    if faults:
        deploy.env["ENGINE_FAULTS"] = faults
        deploy.env["ENGINE_FAULTS_LOG"] = str(deploy.workdir / f"{name}.faults")
    try:
        process = deploy.start_worker(name)
    finally:
        deploy.env.clear()
        deploy.env.update(saved)
    deploy.wait_ready()
    return process


def _start_run(api: httpx.Client, durability: str) -> tuple[str, str]:
    thread = api.post("/api/threads", json={}).json()["thread_id"]
    made = api.post(
        f"/api/threads/{thread}/runs",
        json={"assistant_id": GRAPH, "input": {"label": "x"}, "durability": durability},
    )
    assert made.status_code == 200, made.text
    return thread, made.json()["run_id"]


def _wait_run(
    api: httpx.Client, thread: str, run_id: str, timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = api.get(f"/api/threads/{thread}/runs/{run_id}").json()
        if run["status"] not in ("pending", "running"):
            return dict(run)
        assert time.monotonic() < deadline, run
        time.sleep(0.1)


def _wait_file(path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)
    return path.read_text()


def _starts(deploy: Topology, thread: str) -> collections.Counter[str]:
    """How many times each task (``node@step``) of the thread started."""
    if not (deploy.workdir / "tasks.log").exists():  # no task started yet
        return collections.Counter()
    return collections.Counter(
        f"{node}@{step}"
        for t, node, step, phase, _pid in read_task_log(deploy.workdir / "tasks.log")
        if t == thread and phase == "start"
    )


def _trail(api: httpx.Client, thread: str) -> list[str]:
    state = api.get(f"/api/threads/{thread}/state").json()
    return sorted(state["values"]["trail"])


def _attempt(deploy: Topology, run_id: str) -> int:
    with psycopg.connect(deploy.database_dsn) as conn:
        row = conn.execute(
            "SELECT attempt FROM studio_run WHERE run_id = %s", (run_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _assert_invariants(deploy: Topology) -> None:
    problems = check_saver(deploy.database_dsn)
    with psycopg.connect(deploy.database_dsn, autocommit=True) as conn:
        problems += check_studio(conn)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_worker_killed_after_one_parallel_task_finished(
    deploy: Topology, api: httpx.Client, durability: str
) -> None:
    name = f"killed-{durability}"
    doomed = _worker(deploy, name, "after_task_before_writes/right=kill")
    thread, run_id = _start_run(api, durability)
    assert doomed.popen.wait(timeout=60) == -signal.SIGKILL
    deploy.workers.pop(name)
    assert "right" in _wait_file(deploy.workdir / f"{name}.faults")
    before = _starts(deploy, thread)
    assert before["left@2"] == before["right@2"] == 1, before

    _worker(deploy, f"rescuer-{durability}")
    run = _wait_run(api, thread, run_id)

    assert run["status"] == "success", run
    assert _attempt(deploy, run_id) == 2
    starts = _starts(deploy, thread)
    again = {"prepare@1", "left@2"} if durability == "exit" else set()
    want = {task: 2 if task in again or task == "right@2" else 1 for task in starts}
    assert dict(starts) == want, starts  # left@2 finished: not run again
    assert sorted(starts) == expected_trail()
    assert _trail(api, thread) == expected_trail()  # every write once
    _assert_invariants(deploy)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_worker_killed_inside_a_checkpoint_write(
    deploy: Topology, api: httpx.Client, durability: str
) -> None:
    name = f"torn-{durability}"
    doomed = _worker(deploy, name, "between_values_and_checkpoint=kill@3")
    thread, run_id = _start_run(api, durability)
    assert doomed.popen.wait(timeout=60) == -signal.SIGKILL
    deploy.workers.pop(name)
    _wait_file(deploy.workdir / f"{name}.faults")
    _assert_invariants_but_the_stale_run(deploy)

    _worker(deploy, f"restarted-{durability}")
    run = _wait_run(api, thread, run_id)

    assert run["status"] == "success", run
    starts = _starts(deploy, thread)
    assert sorted(starts) == expected_trail()
    assert all(count <= 2 for count in starts.values()), starts
    assert _trail(api, thread) == expected_trail()
    _assert_invariants(deploy)


def test_zombie_worker_resumed_after_its_lease_writes_nothing(
    deploy: Topology, api: httpx.Client
) -> None:
    zombie = _worker(deploy, "zombie", "after_task_before_writes/right=pause:15")
    thread, run_id = _start_run(api, "sync")
    _wait_file(deploy.workdir / "zombie.faults")  # stopped, its lease running out
    deploy.workers.pop("zombie")  # not ready while stopped

    _worker(deploy, "successor")
    run = _wait_run(api, thread, run_id)
    assert run["status"] == "success", run
    seen = _snapshot(deploy, thread)
    deadline = time.monotonic() + 60
    while "lease lost" not in zombie.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, zombie.tail()
        time.sleep(0.1)
    time.sleep(0.5)  # anything it would still write, it writes now

    assert zombie.alive()  # refused, and went back to waiting for runs
    deploy.workers["zombie"] = zombie  # stopped with the others
    now = _snapshot(deploy, thread)
    changed = [
        (what, [r for r in now[i] if r not in seen[i]])
        for i, what in enumerate(SNAPSHOT)
        if seen[i] != now[i]
    ]
    assert changed == [], (
        f"the zombie wrote after waking up: {changed}\n{deploy.diagnostics(60)}\n"
        f"--- zombie ---\n{zombie.tail(60)}"
    )
    assert _starts(deploy, thread)["right@2"] == 2  # once in each worker
    assert _trail(api, thread) == expected_trail()
    _assert_invariants(deploy)


def test_sigterm_drains_the_run_at_a_step_boundary_then_exits(
    deploy: Topology, api: httpx.Client
) -> None:
    """The stopping worker finishes the step in progress, saves it, gives the run
    back (not counted as an attempt) and exits; the next worker continues from
    that step. No task runs twice."""
    worker = _worker(deploy, "stopping")
    thread, run_id = _start_run(api, "sync")
    deadline = time.monotonic() + 60
    while not _starts(deploy, thread)["left@2"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)

    os.kill(worker.pid, signal.SIGTERM)

    assert worker.popen.wait(timeout=60) == 0, worker.tail()
    assert "stopped, connections closed" in worker.tail()
    with psycopg.connect(deploy.database_dsn) as conn:
        status, attempt, output = conn.execute(
            "SELECT status, attempt, output FROM studio_run WHERE run_id = %s",
            (run_id,),
        ).fetchone()
    assert (status, attempt) == ("pending", 0), (status, attempt, worker.tail())
    assert output == {"drained": True}
    started = _starts(deploy, thread)
    assert started["right@2"] == 1 and not started["merge@3"], (
        started
    )  # stopped after step 2

    deploy.stop_workers("stopping")  # it exited: not one to wait for
    _worker(deploy, "next")
    run = _wait_run(api, thread, run_id, timeout=60)
    assert run["status"] == "success", run
    assert _attempt(deploy, run_id) == 1
    starts = _starts(deploy, thread)
    assert dict(starts) == dict.fromkeys(expected_trail(), 1), starts
    assert _trail(api, thread) == expected_trail()
    _assert_invariants(deploy)


def _assert_invariants_but_the_stale_run(deploy: Topology) -> None:
    """Right after a kill: the run is still ``running`` (its lease may not have
    ended yet), everything else must already hold."""
    problems = check_saver(deploy.database_dsn)
    with psycopg.connect(deploy.database_dsn, autocommit=True) as conn:
        problems += check_studio(conn, lease_grace=60)
    assert problems == [], "\n".join(problems)


def _snapshot(deploy: Topology, thread: str) -> tuple[Any, ...]:
    """Everything a worker writes for a thread: run rows, events, checkpoints, writes."""
    with psycopg.connect(deploy.database_dsn) as conn:
        return tuple(
            conn.execute(sql, (thread,)).fetchall() for sql in SNAPSHOT.values()
        )


SNAPSHOT = {
    "runs": "SELECT run_id, status, attempt, lease_owner, updated_at, output "
    "FROM studio_run WHERE thread_id = %s ORDER BY run_id",
    "events": "SELECT id, kind, payload FROM studio_runevent WHERE thread_id = %s "
    "ORDER BY id",
    "checkpoints": "SELECT checkpoint_ns, checkpoint_id FROM engine_checkpoints "
    "WHERE thread_id = %s ORDER BY 1, 2",
    "writes": "SELECT checkpoint_id, task_id, idx FROM engine_checkpoint_writes "
    "WHERE thread_id = %s ORDER BY 1, 2, 3",
    "thread": "SELECT status, updated_at FROM studio_thread WHERE thread_id = %s",
}
"""Everything a worker writes for a thread, read back to compare."""

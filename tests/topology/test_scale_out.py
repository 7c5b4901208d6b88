"""Scale-out (issue 12): two Daphne processes and two workers serve the same threads.

Postgres (``DATABASE_URL``, the checkpointer too) and Redis (``REDIS_URL``), as
README's "Deployment" says, started on loopback by ``tests._support.topology``.
Twenty runs of a graph with steps of 0.1-0.3 s go through the API of both
Daphnes in turn with the official async SDK; each run is followed by an SSE
stream on the Daphne that started it (``runs.stream``), a join stream on the
other one, and a WebSocket viewer on each. Once a few runs are done, one worker
is killed with SIGKILL while it runs a task. Then:

- every run succeeded exactly once: status ``success`` through the API and in
  the table, one terminal ``run.status`` event, claimed once (twice for the
  killed worker's run), and its final state holds every task's write once;
- every viewer got every event of its run (SSE) or thread (WebSocket), by event
  id: exactly the ``RunEvent`` rows, in order, none twice;
- the killed worker's run went back to the queue when its lease ran out and the
  other worker finished it from the last checkpoint: by the side-effect log,
  every task of a step that had finished ran once; only the step in flight at
  the kill ran again, in the other worker, which did not start from the top.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client
from psycopg.rows import dict_row

from tests._support.postgres import pg_dsn
from tests._support.redis_service import redis_url
from tests._support.topology import Topology, ViewerLog, topology, watch_thread
from tests.topology.graphs import expected_trail, read_task_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.timeout(170),
]

GRAPH = "topology"
GRAPHS = {GRAPH: "tests.topology.graphs:build"}
RUNS = 20
KILL_AFTER = 6
"""Runs that succeed before the kill: both workers share the first ones."""
LEASE_SECONDS = 4.0
"""Short, so the killed worker's run is queued again within seconds (heartbeat every 1.3 s)."""
DRIVE_SECONDS = 120.0
MODES = ["values", "updates", "custom"]


@dataclass
class Driven:
    """One run as the SDK saw it."""

    index: int
    thread_id: str
    run_id: str
    stream: list[Any]
    """``runs.stream`` on the Daphne that started the run."""
    joined: list[Any]
    """``runs.join_stream`` on the other Daphne."""
    values: dict[str, Any]
    status: str


@dataclass
class Kill:
    run_id: str
    worker: str
    pid: int


def test_two_daphnes_and_two_workers_serve_the_same_threads(tmp_path: Path) -> None:
    dsn, redis = pg_dsn(), redis_url()
    task_log = tmp_path / "tasks.log"
    with topology(
        tmp_path / "deploy",
        pg_dsn=dsn,
        redis_url=redis,
        graphs=GRAPHS,
        daphnes=2,
        workers=2,
        lease_seconds=LEASE_SECONDS,
        extra_env={"TOPOLOGY_TASK_LOG": str(task_log)},
        tokens=("requester",),
    ) as deploy:
        pids = {name: worker.pid for name, worker in deploy.workers.items()}
        session = deploy.session_cookie("requester", "requester")
        try:
            driven, viewers, kill = asyncio.run(
                asyncio.wait_for(
                    drive(deploy, deploy.tokens["requester"], session), DRIVE_SECONDS
                )
            )
        except BaseException:
            print(deploy.diagnostics())
            raise
        runs, events = read_back(deploy.database_dsn)

    assert len(driven) == RUNS
    assert kill is not None, "no run was seen mid-way to kill its worker"
    dead, survivor = (
        pids[kill.worker],
        next(pid for name, pid in pids.items() if name != kill.worker),
    )
    tasks = _tasks_by_thread(task_log)

    for run in driven:
        killed = run.run_id == kill.run_id
        where = (run.index, run.run_id, "killed" if killed else "")

        # finished once: through the API, in the table, in the event log, in the state
        assert run.status == "success", where
        assert runs[run.run_id]["status"] == "success", where
        assert runs[run.run_id]["attempt"] == (2 if killed else 1), where
        statuses = [
            e["payload"]["status"]
            for e in events
            if e["run_id"] == run.run_id and e["kind"] == "run.status"
        ]
        assert statuses == ["running"] * (2 if killed else 1) + ["success"], where
        assert sorted(run.values["trail"]) == expected_trail(), where
        assert run.values["label"] == f"run-{run.index}", where

        # both SSE clients got the run's stored stream events, in order, once
        stored = [
            (e["id"], e["payload"]["event"])
            for e in events
            if e["run_id"] == run.run_id and e["kind"] == "stream"
        ]
        assert {name for _, name in stored} == set(MODES), where
        for parts in (run.stream, run.joined):
            assert parts[0].event == "metadata", where
            got = [(int(p.id), p.event) for p in parts[1:]]
            assert got == stored, (where, _diff(got, stored))

        # both WebSocket viewers got the thread's activity events, in order, once
        activity = [
            e["id"]
            for e in events
            if e["thread_id"] == run.thread_id and e["kind"] != "stream"
        ]
        for viewer in viewers[run.thread_id]:
            assert viewer.ids == activity, (
                where,
                viewer.url,
                _diff(viewer.ids, activity),
                viewer.close_code,
            )
            assert [f["status"] for f in viewer.terminal] == ["success"], where

        # the side effect: each task once, but for the step in flight at the kill
        executions = tasks[run.thread_id]
        starts = collections.Counter(
            (node, step) for node, step, phase, _ in executions if phase == "start"
        )
        assert sorted(f"{n}@{s}" for n, s in starts) == expected_trail(), where
        if not killed:
            assert set(starts.values()) == {1}, (where, executions)
            assert len({pid for *_, pid in executions}) == 1, (where, executions)
            continue
        before = [(n, s) for n, s, phase, pid in executions if pid == dead]
        after = [
            f"{n}@{s}"
            for n, s, phase, pid in executions
            if pid == survivor and phase == "start"
        ]
        ended_before = {
            (n, s) for n, s, phase, pid in executions if pid == dead and phase == "end"
        }
        assert before and after, (where, executions)
        assert {pid for *_, pid in executions} == {dead, survivor}, executions
        assert len(ended_before) >= 2, executions  # killed mid-run, not at its start
        in_flight = max(step for _, step in before)
        for (node, step), count in starts.items():
            # a step that had finished never ran again; the one in flight may have
            allowed = 2 if step == in_flight else 1
            assert count <= allowed, (node, step, executions)
        # the survivor went on from the last checkpoint, not from the top
        assert min(int(task.split("@")[1]) for task in after) == in_flight, executions
        again = sorted(f"{n}@{s}" for (n, s), count in starts.items() if count > 1)
        print(
            f"killed {kill.worker} in run {run.index} at step {in_flight}; "
            f"ran twice: {again or 'nothing'}; the other worker ran {after}"
        )

    # both workers ran runs from the one queue
    assert {pid for e in tasks.values() for *_, pid in e} == set(pids.values())


async def drive(
    deploy: Topology, token: str, session: str
) -> tuple[list[Driven], dict[str, list[ViewerLog]], Kill | None]:
    """Twenty runs through both Daphnes, SSE and WebSocket viewers on each; one kill."""
    timeout = httpx.Timeout(60.0, connect=10.0)
    clients = [
        get_client(url=f"{url}/api", api_key=token, timeout=timeout)
        for url in deploy.urls
    ]
    try:
        threads = await asyncio.gather(
            *(
                clients[i % 2].threads.create(metadata={"topology": i})
                for i in range(RUNS)
            )
        )
        thread_ids = [t["thread_id"] for t in threads]

        # a WebSocket viewer of every thread on each Daphne, connected before runs start
        ready: list[asyncio.Event] = []
        watchers: dict[str, list[asyncio.Task[ViewerLog]]] = {}
        for thread_id in thread_ids:
            for url in deploy.urls:
                connected = asyncio.Event()
                ready.append(connected)
                watchers.setdefault(thread_id, []).append(
                    asyncio.create_task(
                        watch_thread(
                            url,
                            thread_id,
                            session,
                            connected=connected,
                            timeout=DRIVE_SECONDS - 10,
                        )
                    )
                )
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 30)

        stop = asyncio.Event()
        killer = asyncio.create_task(kill_a_worker_mid_run(deploy, stop))
        try:
            driven = await asyncio.gather(
                *(run_one(i, thread_ids[i], clients) for i in range(RUNS))
            )
        finally:
            stop.set()
        kill = await killer
        viewers = {
            thread_id: list(await asyncio.gather(*tasks))
            for thread_id, tasks in watchers.items()
        }
    finally:
        for client in clients:
            await client.aclose()
    return list(driven), viewers, kill


async def run_one(index: int, thread_id: str, clients: list[Any]) -> Driven:
    """``runs.stream`` on one Daphne, ``runs.join_stream`` on the other, then the outcome."""
    host, other = clients[index % 2], clients[(index + 1) % 2]
    stream: list[Any] = []
    joiner: asyncio.Task[list[Any]] | None = None
    async for part in host.runs.stream(
        thread_id, GRAPH, input={"label": f"run-{index}"}, stream_mode=MODES
    ):
        stream.append(part)
        if part.event == "metadata" and joiner is None:
            joiner = asyncio.create_task(
                _collect(other.runs.join_stream(thread_id, part.data["run_id"]))
            )
    assert joiner is not None, stream
    joined = await joiner
    run_id = stream[0].data["run_id"]
    values = await host.runs.join(thread_id, run_id)
    run = await other.runs.get(thread_id, run_id)
    return Driven(index, thread_id, run_id, stream, joined, values, run["status"])


async def _collect(parts: Any) -> list[Any]:
    return [part async for part in parts]


_MID_RUN = """
SELECT r.run_id, r.lease_owner,
       (SELECT count(*) FROM studio_runevent e
         WHERE e.run_id = r.run_id AND e.kind = 'task.end'),
       (SELECT e.kind FROM studio_runevent e
         WHERE e.run_id = r.run_id AND e.kind <> 'stream'
         ORDER BY e.id DESC LIMIT 1),
       (SELECT count(*) FROM studio_run s WHERE s.status = 'success')
  FROM studio_run r
 WHERE r.status = 'running' AND r.lease_owner = ANY(%s)
"""


async def kill_a_worker_mid_run(deploy: Topology, stop: asyncio.Event) -> Kill | None:
    """SIGKILL the worker of a run seen with a finished step and a task running.

    Only once :data:`KILL_AFTER` runs succeeded, so both workers shared the
    first ones. "Seen in the table": a worker stores ``task.end`` events with
    the next ``task.start``, so two ended and a start last means that step's
    checkpoint is written and the next task sleeps (0.1-0.3 s); a short pause
    lets the asynchronous checkpoint save land before the kill.
    """
    async with await psycopg.AsyncConnection.connect(
        deploy.database_dsn, autocommit=True
    ) as conn:
        deadline = time.monotonic() + DRIVE_SECONDS / 2
        while not stop.is_set() and time.monotonic() < deadline:
            cursor = await conn.execute(_MID_RUN, (list(deploy.workers),))
            for run_id, owner, ended, last, succeeded in await cursor.fetchall():
                if succeeded >= KILL_AFTER and ended >= 2 and last == "task.start":
                    await asyncio.sleep(0.05)
                    worker = deploy.workers[owner]
                    os.kill(worker.pid, signal.SIGKILL)
                    await asyncio.to_thread(worker.popen.wait, 10)
                    return Kill(run_id=run_id, worker=owner, pid=worker.pid)
            await asyncio.sleep(0.02)
    return None


def read_back(dsn: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Runs by id and every ``RunEvent``, in id order, straight from Postgres."""
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        runs = {
            row["run_id"]: row
            for row in conn.execute(
                "SELECT run_id, thread_id, status, attempt FROM studio_run"
            )
        }
        events = list(
            conn.execute(
                "SELECT id, run_id, thread_id, kind, payload FROM studio_runevent "
                "ORDER BY id"
            )
        )
    return runs, events


def _tasks_by_thread(path: Path) -> dict[str, list[tuple[str, int, str, int]]]:
    found: dict[str, list[tuple[str, int, str, int]]] = collections.defaultdict(list)
    for thread, node, step, phase, pid in read_task_log(path):
        found[thread].append((node, step, phase, pid))
    return found


def _diff(got: list[Any], want: list[Any]) -> str:
    missing = [x for x in want if x not in got]
    extra = [x for x in got if x not in want]
    twice = [x for x, n in collections.Counter(got).items() if n > 1]
    return f"missing {missing[:10]}, unexpected {extra[:10]}, twice {twice[:10]}"

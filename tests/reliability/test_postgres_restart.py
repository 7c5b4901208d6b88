"""Postgres restarts while twenty runs go through a scale-out deployment.

One Daphne and two ``studio_worker`` processes on a private PostgreSQL server of
this test's own (the shared test server is never stopped) and Redis. Twenty runs
of the topology graph (six steps, eight tasks, about a second each) are queued
through the API with the official SDK; once a few succeeded the server is
stopped (fast shutdown: every connection is cut), kept down for a few seconds and
started again. Nobody restarts Daphne or the workers.

The rule this proves: a run whose worker loses the database is not the graph's
failure. The worker gives it back (it stays ``running`` until its lease runs out,
then any worker claims it again) and it continues from its last checkpoint. So:

- every run ends ``success``, with one terminal ``run.status`` event, and none is
  left ``running`` or ``pending``;
- its final state holds every task's write exactly once;
- by the side-effect log, a task ran twice only in the one step that was in
  flight when the database went away (at-least-once for that step, as after a
  worker's crash); every other step ran once;
- the API answers again afterwards (the runs are read back through it; its
  first requests once the server is up are not 500s), both workers are still
  alive and run a new run each;
- the SQL invariants hold.
"""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from studio.env import postgres_pool_options
from tests._support.invariants import check_saver, check_studio
from tests._support.private_postgres import PrivatePostgres, private_postgres
from tests._support.redis_service import redis_url
from tests._support.topology import Topology, topology
from tests.topology.graphs import expected_trail, read_task_log

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.timeout(200)]

GRAPH = "topology"
GRAPHS = {GRAPH: "tests.topology.graphs:build"}
RUNS = 20
STOP_AFTER = 5
"""Runs that succeed before the server stops."""
DOWN_SECONDS = 4.0
LEASE_SECONDS = 4.0
"""Short, so a run given back during the outage is claimed again within seconds."""
SETTLE_SECONDS = 120.0


def test_every_run_finishes_once_across_a_postgres_restart(tmp_path: Path) -> None:
    task_log = tmp_path / "tasks.log"
    with (
        private_postgres() as server,
        topology(
            tmp_path / "deploy",
            pg_dsn=server.dsn,
            redis_url=redis_url(),
            graphs=GRAPHS,
            daphnes=1,
            workers=2,
            lease_seconds=LEASE_SECONDS,
            extra_env={"TOPOLOGY_TASK_LOG": str(task_log)},
            tokens=("requester",),
        ) as deploy,
    ):
        try:
            outcome = asyncio.run(drive(deploy, server))
            runs, events = read_back(deploy.database_dsn)
            invariants = check_invariants(deploy.database_dsn)
        except BaseException:
            print(deploy.diagnostics(60))
            raise
        workers_alive = {name: p.alive() for name, p in deploy.workers.items()}
        logs = deploy.diagnostics(200)

    run_ids, results, after_runs = outcome
    assert len(run_ids) == RUNS
    assert all(workers_alive.values()), logs
    tasks = _tasks_by_thread(task_log)
    again_total = 0
    for index, (thread_id, run_id) in enumerate(run_ids):
        where = (index, run_id)
        assert results[run_id]["status"] == "success", (where, results[run_id], logs)
        assert runs[run_id]["status"] == "success", where
        statuses = [
            e["payload"]["status"]
            for e in events
            if e["run_id"] == run_id and e["kind"] == "run.status"
        ]
        assert statuses[-1] == "success", (where, statuses)
        assert statuses.count("success") == 1, (where, statuses)
        assert set(statuses[:-1]) == {"running"}, (where, statuses)
        # one "running" per attempt, except an attempt whose claim committed just
        # before the restart and whose first event then failed: it never started
        # (the run moved on when its lease ended, as designed)
        assert 1 <= len(statuses) - 1 <= runs[run_id]["attempt"], (where, statuses)
        assert sorted(results[run_id]["values"]["trail"]) == expected_trail(), where

        starts = collections.Counter(
            (node, step)
            for node, step, phase, _ in tasks[thread_id]
            if phase == "start"
        )
        assert sorted(f"{n}@{s}" for n, s in starts) == expected_trail(), where
        twice = {step for (_, step), count in starts.items() if count > 1}
        assert all(count <= 2 for count in starts.values()), (where, tasks[thread_id])
        assert len(twice) <= 1, (where, tasks[thread_id])  # only the step in flight
        if twice:
            assert runs[run_id]["attempt"] >= 2, (where, tasks[thread_id])
        again_total += len(twice)

    # the deployment serves new runs after the restart, on both workers
    assert [r["status"] for r in after_runs] == ["success", "success"], after_runs
    assert invariants == [], invariants
    retried = sum(1 for r in runs.values() if r["attempt"] > 1)
    print(
        f"{RUNS} runs across a {DOWN_SECONDS:g} s Postgres outage: all succeeded once; "
        f"{retried} given back and resumed, {again_total} step(s) ran again"
    )


async def drive(
    deploy: Topology, server: PrivatePostgres
) -> tuple[list[tuple[str, str]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    client = get_client(
        url=f"{deploy.urls[0]}/api",
        api_key=deploy.tokens["requester"],
        timeout=httpx.Timeout(30.0, connect=10.0),
    )
    try:
        run_ids: list[tuple[str, str]] = []
        for index in range(RUNS):
            thread = await client.threads.create(metadata={"restart": index})
            run = await client.runs.create(
                thread["thread_id"], GRAPH, input={"label": f"run-{index}"}
            )
            run_ids.append((thread["thread_id"], run["run_id"]))

        await asyncio.to_thread(_wait_for_successes, deploy.database_dsn, STOP_AFTER)
        await asyncio.to_thread(server.stop)
        await asyncio.sleep(DOWN_SECONDS)
        await asyncio.to_thread(server.start)
        await asyncio.to_thread(server.wait_until_up)

        # the first requests once the server is back are answered, not 500: the
        # pool checks a connection as it lends it (the idle ones died)
        for thread_id, run_id in run_ids[:3]:
            await client.runs.get(thread_id, run_id)  # raises on a 5xx

        # read back through the API: Daphne answers again without a restart
        results: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + SETTLE_SECONDS
        for thread_id, run_id in run_ids:
            results[run_id] = await _settled(client, thread_id, run_id, deadline)

        # and both workers still take new runs
        after = []
        for worker in deploy.workers:
            thread = await client.threads.create(metadata={"after": worker})
            run = await client.runs.create(
                thread["thread_id"], GRAPH, input={"label": f"after-{worker}"}
            )
            after.append(
                await _settled(client, thread["thread_id"], run["run_id"], deadline)
            )
        return run_ids, results, after
    finally:
        await client.aclose()


async def _settled(
    client: Any, thread_id: str, run_id: str, deadline: float
) -> dict[str, Any]:
    """The run once it is terminal (``status``, ``values``), read through the API."""
    last: Any = None
    while time.monotonic() < deadline:
        try:
            run = await client.runs.get(thread_id, run_id)
            if run["status"] not in ("pending", "running"):
                values = await client.runs.join(thread_id, run_id)
                return {"status": run["status"], "values": values}
            last = run["status"]
        except httpx.HTTPError as exc:  # the server may still be coming back
            last = repr(exc)
        await asyncio.sleep(0.5)
    raise AssertionError(f"run {run_id} did not settle: {last}")


def _wait_for_successes(dsn: str, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM studio_run WHERE status = 'success'"
            ).fetchone()
            if row and row[0] >= count:
                return
            time.sleep(0.05)
    raise AssertionError(f"{count} runs did not succeed within {timeout} s")


def read_back(dsn: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        runs = {
            row["run_id"]: row
            for row in conn.execute("SELECT run_id, status, attempt FROM studio_run")
        }
        events = list(
            conn.execute(
                "SELECT id, run_id, kind, payload FROM studio_runevent "
                "WHERE kind = 'run.status' ORDER BY id"
            )
        )
    return runs, events


def check_invariants(dsn: str) -> list[str]:
    """What does not hold: the SQL invariants, and no run left pending or running."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        broken = check_saver(dsn) + check_studio(conn)
        active = conn.execute(
            "SELECT run_id, status FROM studio_run WHERE status IN ('pending', 'running')"
        ).fetchall()
    if active:
        broken.append(f"runs left active: {active}")
    return broken


def _tasks_by_thread(path: Path) -> dict[str, list[tuple[str, int, str, int]]]:
    found: dict[str, list[tuple[str, int, str, int]]] = collections.defaultdict(list)
    for thread, node, step, phase, pid in read_task_log(path):
        found[thread].append((node, step, phase, pid))
    return found


def test_the_studio_pool_lends_no_dead_connection_after_a_restart() -> None:
    """Django's pool, as the settings configure it: after a restart its idle
    connections are dead; each is checked as it is lent and replaced, so no
    request meets one (without the check, two of three borrows failed)."""
    with private_postgres() as server:
        pool: ConnectionPool[Any] = ConnectionPool(
            server.dsn, open=False, **{**postgres_pool_options(4), "min_size": 2}
        )
        pool.open(wait=True)
        try:
            with pool.connection() as conn:
                conn.execute("SELECT 1")
            server.stop()
            server.start()
            server.wait_until_up()
            for _ in range(3):
                with pool.connection() as conn:
                    assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            pool.close()

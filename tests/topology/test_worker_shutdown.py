"""A ``studio_worker`` stopped with SIGTERM closes its pools and exits at once (issue 18).

Before: the checkpointer's psycopg pool was left to the interpreter's exit, which
gives each pool thread 5 s to stop ("couldn't stop thread 'pool-1-worker-0' within
5.0 seconds"), so an idle worker took about 20 s to exit and a supervisor's stop
timeout killed it mid-run. The worker here has run a graph (so its checkpointer
pool is open) on a real Postgres; the check is that it says it closed its
connections and psycopg never had to give up on a pool thread. The exit time is
printed (a report, not an asserted timing).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests._support.postgres import pg_dsn
from tests._support.redis_service import redis_url
from tests._support.topology import topology

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.timeout(150),
]

GRAPHS = {"topology": "tests.topology.graphs:build"}


def test_sigterm_closes_the_pools_before_exit(tmp_path: Path) -> None:
    with topology(
        tmp_path / "deploy",
        pg_dsn=pg_dsn(),
        redis_url=redis_url(),
        graphs=GRAPHS,
        daphnes=1,
        workers=1,
        tokens=("requester",),
    ) as deploy:
        headers = {"Authorization": f"Bearer {deploy.tokens['requester']}"}
        with httpx.Client(base_url=deploy.urls[0], headers=headers, timeout=60) as api:
            thread = api.post("/api/threads", json={}).json()
            done = api.post(
                f"/api/threads/{thread['thread_id']}/runs/wait",
                json={"assistant_id": "topology", "input": {"label": "t"}},
            )
            assert done.status_code == 200, done.text
            assert done.json()["trail"][-1].startswith("finish@"), done.json()

        (worker,) = deploy.workers.values()
        started = time.monotonic()
        worker.popen.terminate()
        worker.popen.wait(timeout=60)
        took = time.monotonic() - started
        log = worker.log.read_text(errors="replace")

    print(f"studio_worker exited {took:.2f} s after SIGTERM")
    assert worker.popen.returncode == 0, log
    assert "stopped, connections closed" in log
    assert "couldn't stop thread" not in log, log

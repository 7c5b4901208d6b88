"""``/readyz`` follows a real database: ready, down when Postgres stops, ready again.

The deployment (one Daphne, one worker) runs on a private PostgreSQL server of
this test's own, which it stops and starts; the shared test server is never
touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._support.private_postgres import private_postgres
from tests._support.redis_service import redis_url
from tests._support.topology import topology

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.timeout(240)]


def _wait_for(client: httpx.Client, ready: bool, timeout: float) -> dict[str, Any]:
    """Poll ``/readyz`` until its answer says ``ready``; the last answer's body."""
    wanted = 200 if ready else 503
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            response = client.get("/readyz")
        except httpx.HTTPError as exc:
            body = {"error": repr(exc)}
        else:
            body = response.json()
            if response.status_code == wanted:
                return body
        time.sleep(0.5)
    raise AssertionError(f"/readyz did not answer {wanted} in {timeout} s: {body}")


def test_readyz_fails_while_postgres_is_stopped_and_recovers(tmp_path: Path) -> None:
    with (
        private_postgres() as server,
        topology(
            tmp_path / "deploy",
            pg_dsn=server.dsn,
            redis_url=redis_url(),
            daphnes=1,
            workers=1,
            extra_env={"STUDIO_READYZ_TIMEOUT": "2"},
        ) as deploy,
        httpx.Client(base_url=deploy.urls[0], timeout=30) as client,
    ):
        diagnose: Callable[[], str] = deploy.diagnostics
        ready = _wait_for(client, ready=True, timeout=30)
        assert set(ready["checks"]) == {
            "database",
            "migrations",
            "channel_layer",
            "workers",
        }, diagnose()

        server.stop()
        down = _wait_for(client, ready=False, timeout=30)
        assert down["checks"]["database"]["ok"] is False, down
        assert down["checks"]["channel_layer"]["ok"] is True, down
        assert client.get("/healthz").status_code == 200  # alive, just not ready

        server.start()
        again = _wait_for(client, ready=True, timeout=90)
        assert all(check["ok"] for check in again["checks"].values()), again
        assert deploy.workers["worker-1"].alive(), diagnose()

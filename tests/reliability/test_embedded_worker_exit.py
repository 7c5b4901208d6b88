"""Stopping the web process (Ctrl-C on ``make run``) stops its embedded worker cleanly.

The worker used to be a thread cut off at the interpreter's exit: its run stayed
``running`` until its lease ended, and its notifications failed with tracebacks
("cannot schedule new futures after interpreter shutdown"). Now the step in
progress ends, the run goes back to the queue, and the next start continues it.
A real Daphne in embedded mode (``tests._support.live_server``), SIGTERM as a
terminal's Ctrl-C or a supervisor sends it.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests._support.live_server import live_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

GRAPHS = {"gate_twice": "tests._support.live_graphs:gate_twice"}


def _run(db: Path, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT status, attempt, output FROM studio_run WHERE run_id = ?",
            (run_id,),
        ).fetchone()
    assert row is not None, run_id
    return {"status": row[0], "attempt": row[1], "output": json.loads(row[2] or "{}")}


def _wait_for(db: Path, run_id: str, status: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _run(db, run_id)["status"] != status:
        assert time.monotonic() < deadline, (status, _run(db, run_id))
        time.sleep(0.05)


def test_a_stopped_web_process_gives_its_run_back_and_the_next_start_ends_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "db.sqlite3"
    release = tmp_path / "release"
    with live_server(tmp_path, seed=False, graphs=GRAPHS) as server:
        server.create_user("demo", "demo-password")
        run_id = server.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User; "
            "from studio.services.runs import start_run; "
            "run = start_run(graph='gate_twice', "
            "user=User.objects.get(username='demo'), "
            f"input={{'release': {str(release)!r}}}); print(run.run_id)",
        ).split()[-1]  # after the shell's own banner
        _wait_for(db, run_id, "running")  # the embedded worker waits at the gate
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        release.touch()  # the step in progress ends
        server.process.wait(timeout=30)

    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    stopped = _run(db, run_id)
    assert stopped["status"] == "pending", stopped  # back in the queue, not stuck
    assert stopped["output"].get("drained"), stopped

    with live_server(tmp_path, seed=False, graphs=GRAPHS) as server:
        _wait_for(db, run_id, "success")
    assert "Traceback" not in server.log.read_text()

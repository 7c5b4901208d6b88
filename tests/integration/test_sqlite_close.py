"""Closing a SQLite saver or store while another thread still uses it.

A lease renewal or a background save can still be running on the pool when the
``with ... from_conn_string(...)`` block ends (a run refused after losing its
lease exits at once). ``sqlite3`` crashes the interpreter when a connection is
closed under a running statement, so the savers and stores close under the
lock every call holds: the call finishes, later calls get a clear
``sqlite3.ProgrammingError``. Each case runs in a child process, where a crash
shows as a signal exit instead of killing the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_RACE = textwrap.dedent(
    """
    import sqlite3, sys, threading, time
    from engine.checkpoint.sqlite import SqliteSaver
    from engine.store.sqlite import SqliteStore

    path, kind = sys.argv[1], sys.argv[2]

    def open_one():
        if kind == "saver":
            cm = SqliteSaver.from_conn_string(path)
            saver = cm.__enter__()
            saver.acquire_lease("t", "", "h", 30.0)
            return cm, lambda: saver.renew_lease("t", "", "h", 30.0)
        cm = SqliteStore.from_conn_string(path)
        store = cm.__enter__()
        return cm, lambda: store.put(("ns",), "k", {"v": 1})

    refused = 0
    for _ in range(60):
        cm, call = open_one()
        stop = threading.Event()

        def hammer():
            global refused
            while not stop.is_set():
                try:
                    call()
                except sqlite3.ProgrammingError:
                    refused += 1
                    return

        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(0.002)
        cm.__exit__(None, None, None)
        stop.set()
        for thread in threads:
            thread.join()
    print("refused", refused)
    """
)


@pytest.mark.parametrize("kind", ["saver", "store"])
def test_closing_while_another_thread_calls_never_crashes(
    kind: str, tmp_path: Path
) -> None:
    path = tmp_path / "race.db"
    done = subprocess.run(
        [sys.executable, "-c", _RACE, str(path), kind],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    refused = int(done.stdout.split()[-1])
    assert refused > 0  # calls after the close were refused, not run on a dead handle

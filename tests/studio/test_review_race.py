"""Races on a real Postgres: the cases run in a child pytest.

Two reviewers at once (``review_race_cases.py``); the run queue's races and
dying workers (``run_race_cases.py``, also collected on SQLite by
``test_run_races.py``).

The studio tests' Django database is SQLite unless ``TEST_DATABASE_URL`` says
otherwise, and SQLite serializes writers; the race needs a server database whose
transactions overlap, so ``review_race_cases.py`` runs in a child process with
``TEST_DATABASE_URL`` pointing at a throwaway Postgres database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from tests._support.postgres import fresh_database, pg_dsn

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _url(conninfo: str) -> str:
    parts = conninfo_to_dict(conninfo)
    auth = parts.get("user", "postgres")
    if parts.get("password"):
        auth += f":{parts['password']}"
    host = parts.get("host", "127.0.0.1")
    return f"postgresql://{auth}@{host}:{parts.get('port', 5432)}/{parts['dbname']}"


def _cases_on_postgres(cases: str, timeout: float = 240) -> str:
    """Run the test cases of ``tests/studio/<cases>`` in a child pytest on a fresh
    Postgres database; its output (it must pass)."""
    with fresh_database(pg_dsn()) as conninfo:
        env = {**os.environ, "TEST_DATABASE_URL": _url(conninfo)}
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                f"tests/studio/{cases}",
                "-q",
                "-p",
                "no:cacheprovider",
                "-o",
                f"python_files={cases}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    failures = child.stdout.find("= FAILURES =")
    report = child.stdout[failures : failures + 6000] if failures >= 0 else ""
    assert child.returncode == 0, report + child.stdout[-3000:] + child.stderr[-2000:]
    return child.stdout


def test_two_reviewers_deciding_at_once_on_postgres() -> None:
    assert "2 passed" in _cases_on_postgres("review_race_cases.py")


def test_run_queue_races_and_dying_workers_on_postgres() -> None:
    """``run_race_cases.py``: one running run per thread (the partial unique index),
    two workers claiming one run 1,000 times, a run whose worker dies every time,
    the same resume twice at once (API, and API with the form), one
    ``Idempotency-Key`` sent twice at once."""
    assert "10 passed" in _cases_on_postgres("run_race_cases.py", timeout=600)

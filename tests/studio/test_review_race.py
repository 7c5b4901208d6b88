"""Two reviewers at once, on a real Postgres: the cases run in a child pytest.

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


def test_two_reviewers_deciding_at_once_on_postgres() -> None:
    with fresh_database(pg_dsn()) as conninfo:
        env = {**os.environ, "TEST_DATABASE_URL": _url(conninfo)}
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "tests/studio/review_race_cases.py",
                "-q",
                "-p",
                "no:cacheprovider",
                "-o",
                "python_files=review_race_cases.py",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert "2 passed" in child.stdout

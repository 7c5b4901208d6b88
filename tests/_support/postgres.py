"""Postgres for tests: the DSN from ``ENGINE_TEST_PG_DSN`` and throwaway databases."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests._support.services import unavailable

__all__ = ("fresh_database", "pg_dsn", "studio_cases_on_postgres")

ROOT = Path(__file__).resolve().parents[2]


def pg_dsn() -> str:
    """``ENGINE_TEST_PG_DSN`` if that server answers; otherwise skip (locally) or fail (CI)."""
    dsn = os.environ.get("ENGINE_TEST_PG_DSN", "").strip()
    if not dsn:
        unavailable("ENGINE_TEST_PG_DSN is not set")
    if problem := _unreachable(dsn):
        unavailable(f"Postgres at ENGINE_TEST_PG_DSN is unreachable: {problem}")
    return dsn


@contextmanager
def fresh_database(dsn: str) -> Iterator[str]:
    """Create a uniquely named database on the server of ``dsn``; yield its DSN; drop it.

    The yielded DSN is a libpq conninfo string (``host=... dbname=...``), which
    psycopg and the checkpointers accept as is.
    """
    name = f"test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)
                )
            )


def studio_cases_on_postgres(cases: str, timeout: float = 240) -> str:
    """Run the test cases of ``tests/studio/<cases>`` in a child pytest whose Django
    database is a fresh Postgres one (``TEST_DATABASE_URL``); its output (it must
    pass). The suite's own studio database is SQLite unless told otherwise."""
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


def _url(conninfo: str) -> str:
    """A ``postgresql://`` URL (what ``TEST_DATABASE_URL`` takes) for ``conninfo``."""
    parts = conninfo_to_dict(conninfo)
    auth = parts.get("user", "postgres")
    if parts.get("password"):
        auth += f":{parts['password']}"
    host = parts.get("host", "127.0.0.1")
    return f"postgresql://{auth}@{host}:{parts.get('port', 5432)}/{parts['dbname']}"


@functools.cache
def _unreachable(dsn: str) -> str | None:
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        where = conninfo_to_dict(dsn)
        return (
            f"{where.get('host', 'localhost')}:{where.get('port', 5432)}: {exc}".strip()
        )
    return None

"""Postgres for tests: the DSN from ``ENGINE_TEST_PG_DSN`` and throwaway databases."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests._support.services import unavailable

__all__ = ("fresh_database", "pg_dsn")


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

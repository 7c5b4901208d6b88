"""Checkpoint savers for tests: one spec per backend, fixtures, and raw access.

A :class:`SaverSpec` says where a backend's data lives (nothing, a SQLite file,
a throwaway Postgres database). It is picklable, so a child process can open
its own saver on the same data. The ``saver``/``asaver`` fixtures (imported by
the conformance and integration conftests) run a test once per backend:
memory, SQLite and Postgres (``postgres`` marker; a fresh database per test).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.memory import InMemorySaver, PersistentDict
from engine.checkpoint.postgres import PostgresSaver
from engine.checkpoint.postgres.aio import AsyncPostgresSaver
from engine.checkpoint.sqlite import SqliteSaver
from engine.checkpoint.sqlite.aio import AsyncSqliteSaver
from tests._support.postgres import fresh_database, pg_dsn

__all__ = ("BACKENDS", "SaverSpec", "asaver", "file_tables", "saver", "saver_spec")

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass(frozen=True)
class SaverSpec:
    """Where one backend keeps its data: ``target`` is a file path or a DSN."""

    kind: str
    target: str = ""

    @property
    def shared(self) -> bool:
        """Whether two savers opened from this spec see the same data."""
        return self.kind != "memory"

    @contextmanager
    def open(
        self, *, setup: bool = True, **kwargs: Any
    ) -> Iterator[BaseCheckpointSaver]:
        """A sync saver on this backend (tables created unless ``setup=False``)."""
        if self.kind == "memory":
            yield InMemorySaver(**kwargs)
        elif self.kind == "sqlite":
            with SqliteSaver.from_conn_string(self.target, **kwargs) as sqlite_saver:
                if setup:
                    sqlite_saver.setup()
                yield sqlite_saver
        else:
            with PostgresSaver.from_conn_string(self.target, **kwargs) as pg_saver:
                if setup:
                    pg_saver.setup()
                yield pg_saver

    @asynccontextmanager
    async def aopen(self, **kwargs: Any) -> AsyncIterator[BaseCheckpointSaver]:
        """An asyncio saver on this backend, tables created."""
        if self.kind == "memory":
            yield InMemorySaver(**kwargs)
        elif self.kind == "sqlite":
            async with AsyncSqliteSaver.from_conn_string(self.target, **kwargs) as s:
                await s.setup()
                yield s
        else:
            async with AsyncPostgresSaver.from_conn_string(self.target, **kwargs) as p:
                await p.setup()
                yield p

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run raw SQL on the backend's database (SQL backends only); its rows."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.target, isolation_level=None)
            try:
                cursor = conn.execute(sql.replace("%s", "?"), params)
                return cursor.fetchall() if cursor.description else []
            finally:
                conn.close()
        if self.kind == "postgres":
            with psycopg.connect(self.target, autocommit=True) as conn:
                cur = conn.execute(sql, params)  # type: ignore[arg-type]
                return cur.fetchall() if cur.description else []
        raise ValueError("the memory backend has no SQL")


@pytest.fixture(params=BACKENDS)
def saver_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SaverSpec]:
    """Where the backend under test keeps its data (fresh for every test)."""
    if request.param == "memory":
        yield SaverSpec("memory")
    elif request.param == "sqlite":
        yield SaverSpec("sqlite", str(tmp_path / "checkpoints.db"))
    else:
        with fresh_database(pg_dsn()) as dsn:
            yield SaverSpec("postgres", dsn)


@pytest.fixture
def saver(saver_spec: SaverSpec) -> Iterator[BaseCheckpointSaver]:
    """A sync saver of each backend."""
    with saver_spec.open() as opened:
        yield opened


@pytest.fixture
async def asaver(saver_spec: SaverSpec) -> AsyncIterator[BaseCheckpointSaver]:
    """An asyncio saver of each backend."""
    async with saver_spec.aopen() as opened:
        yield opened


def file_tables(directory: Path) -> Any:
    """An ``InMemorySaver`` factory kept in files, LangGraph's dev-server pattern:
    one file per table in ``directory``, loaded when present. A new factory for
    the same directory reopens what the last saver left there."""
    count = 0

    def factory(*args: Any) -> PersistentDict:
        nonlocal count
        count += 1
        table = PersistentDict(*args, filename=str(directory / f"table{count}.json"))
        with contextlib.suppress(FileNotFoundError):
            table.load()
        return table

    return factory

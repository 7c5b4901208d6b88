"""How hard SQLite savers and stores sync their commits (``synchronous=``).

``NORMAL`` is the default (every commit survives a process crash; a power loss
may drop the last ones); ``FULL`` and ``EXTRA`` sync every commit as LangGraph's
SQLite saver does; ``OFF`` is refused before any file is opened.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from engine.checkpoint.sqlite import SqliteSaver, connect
from engine.checkpoint.sqlite.aio import AsyncSqliteSaver
from engine.store.sqlite import SqliteStore
from engine.store.sqlite.aio import AsyncSqliteStore

LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def level_of(conn: sqlite3.Connection) -> str:
    return LEVELS[conn.execute("PRAGMA synchronous").fetchone()[0]]


def test_connect_defaults_to_normal(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "a.db"))
    try:
        assert level_of(conn) == "NORMAL"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


@pytest.mark.parametrize("asked", ["FULL", "full", "EXTRA", "NORMAL"])
def test_saver_syncs_as_asked(tmp_path: Path, asked: str) -> None:
    with SqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), synchronous=asked
    ) as saver:
        assert level_of(saver.conn) == asked.upper()
        saver.setup()  # a commit at that level


def test_store_syncs_as_asked(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(
        str(tmp_path / "s.db"), synchronous="FULL"
    ) as store:
        store.put(("ns",), "k", {"v": 1})
        assert level_of(store.conn) == "FULL"
        assert store.get(("ns",), "k").value == {"v": 1}  # type: ignore[union-attr]


def test_async_twins_sync_as_asked(tmp_path: Path) -> None:
    async def main() -> tuple[str, str]:
        async with (
            AsyncSqliteSaver.from_conn_string(
                str(tmp_path / "a.db"), synchronous="FULL"
            ) as saver,
            AsyncSqliteStore.from_conn_string(
                str(tmp_path / "s.db"), synchronous="EXTRA"
            ) as store,
        ):
            return level_of(saver.conn), level_of(store.sync.conn)

    assert asyncio.run(main()) == ("FULL", "EXTRA")


@pytest.mark.parametrize("bad", ["OFF", "off", "", "sometimes", 2])
def test_off_and_unknown_levels_are_refused_before_opening(
    tmp_path: Path, bad: object
) -> None:
    path = tmp_path / "never.db"
    saver = SqliteSaver.from_conn_string(str(path), synchronous=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be one of NORMAL, FULL, EXTRA"), saver:
        pass
    store = SqliteStore.from_conn_string(str(path), synchronous=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="OFF is refused"), store:
        pass
    assert not path.exists()

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


# -- lease changes commit without a sync ---------------------------------------------


def traced(conn: sqlite3.Connection) -> list[str]:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return statements


def sync_changes(statements: list[str]) -> list[str]:
    return [s for s in statements if s.upper().startswith("PRAGMA SYNCHRONOUS=")]


def test_lease_changes_commit_at_normal_and_saves_at_full(tmp_path: Path) -> None:
    """At FULL, a transaction that only takes, renews or gives back a lease
    commits at NORMAL (the level is lowered before BEGIN and restored after
    COMMIT); a save, with or without the lease given back in it, stays FULL."""
    with SqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), synchronous="FULL"
    ) as saver:
        saver.setup()
        statements = traced(saver.conn)
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        saver.acquire_lease_and_get_tuple(config, "h", 30.0)
        assert sync_changes(statements) == [
            "PRAGMA synchronous=1",
            "PRAGMA synchronous=2",
        ]
        lowered = statements.index("PRAGMA synchronous=1")
        assert statements[lowered + 1] == "BEGIN IMMEDIATE"
        assert statements.index("COMMIT") < statements.index("PRAGMA synchronous=2")
        assert level_of(saver.conn) == "FULL"

        statements.clear()
        assert saver.renew_lease("t", "", "h", 30.0)
        saver.release_lease("t", "", "h")
        assert (
            sync_changes(statements)
            == ["PRAGMA synchronous=1", "PRAGMA synchronous=2"] * 2
        )

        statements.clear()
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            {
                "v": 4,
                "id": "1ef0",
                "ts": "2026-12-05T00:00:00+00:00",
                "channel_values": {"x": 1},
                "channel_versions": {"x": "1"},
                "versions_seen": {},
            },
            {"source": "input", "step": -1},
            {"x": "1"},
        )
        assert "BEGIN IMMEDIATE" in statements
        assert sync_changes(statements) == []  # the save commits at FULL
        assert level_of(saver.conn) == "FULL"


def test_level_is_restored_when_a_lease_change_fails(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), synchronous="EXTRA"
    ) as saver:
        saver.setup()
        saver.conn.execute("DROP TABLE engine_thread_leases")
        with pytest.raises(sqlite3.OperationalError):
            saver.renew_lease("t", "", "h", 30.0)
        assert level_of(saver.conn) == "EXTRA"
        assert not saver.conn.in_transaction


def test_at_normal_lease_changes_set_no_level(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        saver.setup()
        statements = traced(saver.conn)
        saver.acquire_lease("t", "", "h", 30.0)
        saver.release_lease("t", "", "h")
        saver.acquire_lease("t", "", "h", 30.0)
        assert sync_changes(statements) == []
        # the level is read once, at the first lease change
        reads = [s for s in statements if s.upper() == "PRAGMA SYNCHRONOUS"]
        assert len(reads) == 1
        assert level_of(saver.conn) == "NORMAL"

"""SQLite savers create their tables on first use; Postgres keeps an explicit setup().

LangGraph documents its SQLite savers without a ``setup()`` call
(``SqliteSaver.from_conn_string(path)``, ``SqliteSaver(sqlite3.connect(...))``,
``AsyncSqliteSaver.from_conn_string(path)``): the first read or write creates the
tables. Its Postgres savers need ``setup()`` once, and so do ours.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TypedDict

import pytest

from engine.checkpoint.sqlite import SqliteSaver
from engine.checkpoint.sqlite._sql import MIGRATIONS
from engine.checkpoint.sqlite.aio import AsyncSqliteSaver
from engine.graph import START, StateGraph
from tests._support.builders import make_config, save_chain


class Counter(TypedDict):
    n: int


def _graph(checkpointer: object):
    builder = StateGraph(Counter)
    builder.add_node("bump", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "bump")
    return builder.compile(checkpointer=checkpointer)


def _versions(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT v FROM engine_checkpoint_migrations ORDER BY v")
        return [row[0] for row in rows]


def test_from_conn_string_runs_a_graph_without_setup(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    config = {"configurable": {"thread_id": "t1"}}

    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = _graph(saver)
        assert graph.invoke({"n": 1}, config) == {"n": 2}
        assert graph.get_state(config).values == {"n": 2}

    assert _versions(path) == list(range(len(MIGRATIONS)))


def test_a_plain_sqlite3_connection_works_without_setup(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        config = {"configurable": {"thread_id": "t1"}}

        assert _graph(saver).invoke({"n": 1}, config) == {"n": 2}
        assert len(list(saver.list(config))) == 3  # input, after START, after bump
    finally:
        conn.close()


def test_the_first_read_sets_up_too(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver:
        assert saver.get_tuple(make_config("t1")) is None
        assert list(saver.list(None)) == []
        save_chain(saver, "t1", 2)
        assert len(list(saver.list(make_config("t1")))) == 2


def test_an_in_memory_database_works_without_setup() -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        save_chain(saver, "t1", 1)
        assert saver.get_tuple(make_config("t1")) is not None


def test_setup_after_first_use_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        save_chain(saver, "t1", 1)
        saver.setup()
    with SqliteSaver.from_conn_string(str(path)) as again:
        again.setup()
        assert len(list(again.list(make_config("t1")))) == 1


def test_a_current_database_opened_read_only_is_only_read(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        save_chain(saver, "t1", 2)
    conn = sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
    )
    try:
        reader = SqliteSaver(conn)
        assert len(list(reader.list(make_config("t1")))) == 2
    finally:
        conn.close()


async def test_async_from_conn_string_runs_a_graph_without_setup(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoints.db"
    config = {"configurable": {"thread_id": "t1"}}

    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        graph = _graph(saver)
        assert await graph.ainvoke({"n": 1}, config) == {"n": 2}
        assert (await saver.aget_tuple(config)) is not None

    assert _versions(path) == list(range(len(MIGRATIONS)))


@pytest.mark.parametrize("first_call", ["aget_tuple", "alist"])
async def test_the_first_async_read_sets_up_too(
    tmp_path: Path, first_call: str
) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        if first_call == "aget_tuple":
            assert await saver.aget_tuple(make_config("t1")) is None
        else:
            assert [c async for c in saver.alist(make_config("t1"))] == []

"""A run's lease goes back in the transaction of its last saves (SQL savers).

A run on the default durability hands its saves to a background lane; when the
run ends while some of them still wait, its lease is deleted in their
transaction instead of one of its own. These tests hold the three outcomes: it
rides with the waiting saves; nothing waits, so the run releases it itself;
the batch fails, so nothing of it is kept and the run still releases the lease.
A real SQLite saver whose ``put_steps`` can be held at a gate.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import pytest

from engine.checkpoint.sqlite import SqliteSaver
from engine.checkpoint.sqlite.aio import AsyncSqliteSaver
from engine.graph import END, START, StateGraph
from engine.pregel._persist import SyncPersistence
from tests._support.builders import make_checkpoint, make_metadata


class GatedSaver(SqliteSaver):
    """Records each ``put_steps`` call; can hold the lane at the first one, or
    fail a batch that carries a release."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[int, Any]] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.fail_release = False

    def put_steps(self, steps: Sequence[Any], *, release: Any = None) -> Any:
        self.calls.append((len(steps), release))
        self.entered.set()
        if self.gate is not None:
            gate, self.gate = self.gate, None
            assert gate.wait(10)
        if release is not None and self.fail_release:
            raise RuntimeError("the database went away")
        return super().put_steps(steps, release=release)


@pytest.fixture
def saver(tmp_path: Path) -> Any:
    with GatedSaver.from_conn_string(str(tmp_path / "c.db")) as opened:
        yield opened


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def test_release_rides_with_saves_still_waiting(saver: GatedSaver) -> None:
    persistence = SyncPersistence(saver, background=True)
    saver.put_steps([])  # tables set up before the gate
    saver.calls.clear()
    saver.entered.clear()
    assert saver.acquire_lease("t1", "", "run-1", 30).holder == "run-1"
    gate = saver.gate = threading.Event()
    first = _step("t1", None)
    persistence.put_step(*first)
    assert saver.entered.wait(10)  # the lane holds the first save at the gate
    second = _step("t1", first[2]["id"])
    persistence.put_step(*second)  # waits in the queue

    persistence.release_with_saves(("t1", "", "run-1"))
    gate.set()
    persistence.flush()

    assert [release for _, release in saver.calls] == [None, ("t1", "", "run-1")]
    assert persistence.lease_released
    assert saver.get_lease("t1", "") is None
    assert saver.get_tuple(_config("t1")).checkpoint["id"] == second[2]["id"]


def test_saves_the_lane_has_not_started_are_saved_by_the_run_itself(
    saver: GatedSaver,
) -> None:
    persistence = SyncPersistence(saver, background=True)
    saver.put_steps([])
    saver.calls.clear()
    assert saver.acquire_lease("t1", "", "run-1", 30).holder == "run-1"
    first = _step("t1", None)
    second = _step("t1", first[2]["id"])
    saved_by: list[str] = []
    with persistence._cond:  # the lane cannot take anything meanwhile
        persistence.put_step(*first)
        persistence.put_step(
            *second, on_saved=lambda _: saved_by.append(threading.current_thread().name)
        )
        persistence.release_with_saves(("t1", "", "run-1"))
    persistence.flush()

    assert saver.calls == [(2, ("t1", "", "run-1"))]  # both, and the release, at once
    assert saved_by == [threading.current_thread().name]
    assert persistence.lease_released
    assert saver.get_lease("t1", "") is None
    assert saver.get_tuple(_config("t1")).checkpoint["id"] == second[2]["id"]


def test_nothing_waiting_means_the_run_releases_itself(saver: GatedSaver) -> None:
    persistence = SyncPersistence(saver, background=True)
    persistence.put_step(*_step("t1", None))
    persistence.flush()

    persistence.release_with_saves(("t1", "", "run-1"))
    persistence.flush()

    assert all(release is None for _, release in saver.calls)
    assert not persistence.lease_released


class S(TypedDict):
    n: int


def _graph(saver: GatedSaver) -> Any:
    def bump(state: S) -> dict[str, Any]:
        return {"n": state["n"] + 1}

    builder = StateGraph(S)
    builder.add_node("bump", bump)
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    return builder.compile(checkpointer=saver)


def test_a_run_whose_last_batch_fails_still_gives_its_lease_back(
    saver: GatedSaver,
) -> None:
    graph = _graph(saver)
    graph.invoke({"n": 0}, _config("t1"))  # tables, pool
    saver.fail_release = True
    # the lane waits at its first save, so the run's end finds its last one queued
    gate = saver.gate = threading.Event()
    threading.Timer(0.3, gate.set).start()

    with pytest.raises(RuntimeError, match="went away"):
        graph.invoke({"n": 5}, _config("t2"))

    assert any(release is not None for _, release in saver.calls)
    assert saver.get_lease("t2", "") is None  # released by the run after all
    assert saver.get_tuple(_config("t1")).checkpoint["channel_values"]["n"] == 1


def test_runs_end_with_their_lease_released(saver: GatedSaver) -> None:
    graph = _graph(saver)
    for i in range(5):
        assert graph.invoke({"n": i}, _config(f"t{i}")) == {"n": i + 1}
        assert saver.get_lease(f"t{i}", "") is None
        # and the next run on the thread takes it at once
        assert graph.invoke(None, _config(f"t{i}")) == {"n": i + 1}


def _step(thread_id: str, parent: str | None) -> tuple[Any, ...]:
    checkpoint = make_checkpoint({"n": 1})
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if parent is not None:
        conf["checkpoint_id"] = parent
    return (
        {"configurable": conf},
        [],
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )


async def test_async_runs_give_their_lease_back_with_their_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released: list[Any] = []
    original = AsyncSqliteSaver.aput_steps

    async def recording(self: Any, steps: Any, *, release: Any = None) -> Any:
        released.append(release)
        return await original(self, steps, release=release)

    async def bump(state: S) -> dict[str, Any]:
        # async: a graph of sync nodes would run on one thread, through the
        # saver's sync methods (``engine.pregel._one_thread``)
        return {"n": state["n"] + 1}

    monkeypatch.setattr(AsyncSqliteSaver, "aput_steps", recording)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        builder = StateGraph(S)
        builder.add_node("bump", bump)
        builder.add_edge(START, "bump")
        builder.add_edge("bump", END)
        graph = builder.compile(checkpointer=saver)
        for i in range(5):
            assert await graph.ainvoke({"n": i}, _config(f"a{i}")) == {"n": i + 1}
            assert await saver.aget_lease(f"a{i}", "") is None

    assert ("a4", "", released[-1][2]) == released[-1]  # the last run's, with its saves

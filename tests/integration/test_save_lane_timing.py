"""When an ``invoke`` run's saves go to the background lane (SQL savers, default
durability).

Waking the lane costs a run of a few quick steps (a resume that pauses again) a
fifth of its time on SQLite, and nothing overlaps with it there: such a run
makes its saves at its end, in its own thread and one transaction. A step of a
node not known to be quick (it never ran in this process, or took the lane's
delay or longer last time) has the saves before it made while it runs, and a
task's writes saved while its siblings still run never wait (the crash tests in
``tests/reliability`` hold that one). Real SQLite and Postgres savers that
record which thread makes each batch.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any, TypedDict

import pytest

from engine import events as ev
from engine.checkpoint.memory import InMemorySaver
from engine.checkpoint.postgres import PostgresSaver
from engine.checkpoint.postgres.aio import AsyncPostgresSaver
from engine.checkpoint.sqlite import SqliteSaver
from engine.checkpoint.sqlite.aio import AsyncSqliteSaver
from engine.graph import END, START, StateGraph
from engine.pregel import _persist
from engine.pregel._persist import (
    LANE_DELAY,
    SAVES_KEPT_FOR_THE_END,
    SyncPersistence,
    background_pool,
)
from engine.types import Command, interrupt
from tests._support.postgres import fresh_database, pg_dsn


class _Recording:
    """Records the thread and size of each ``put_steps`` batch."""

    batches: list[tuple[int, int]]

    def put_steps(self, steps: Sequence[Any], **kwargs: Any) -> Any:
        self.batches.append((threading.get_ident(), len(steps)))
        return super().put_steps(steps, **kwargs)  # type: ignore[misc]


class RecordingSaver(_Recording, SqliteSaver):
    pass


class RecordingPostgresSaver(_Recording, PostgresSaver):
    pass


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A real SQLite or Postgres saver that records its batches."""
    with ExitStack() as stack:
        if request.param == "sqlite":
            opened: Any = stack.enter_context(
                RecordingSaver.from_conn_string(str(tmp_path / "c.db"))
            )
        else:
            dsn = stack.enter_context(fresh_database(pg_dsn()))
            opened = stack.enter_context(RecordingPostgresSaver.from_conn_string(dsn))
        opened.batches = []
        opened.setup()
        yield opened


class AskState(TypedDict, total=False):
    n: int
    answer: Any


def _ask(state: AskState) -> dict[str, Any]:
    answer = interrupt({"question": state.get("n", 0)})
    return {"n": state.get("n", 0) + 1, "answer": answer}


def _ask_graph(saver: RecordingSaver) -> Any:
    builder = StateGraph(AskState)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "ask")
    return builder.compile(checkpointer=saver)


@pytest.fixture
def lane_starts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the runs hand to the shared pool (lanes, parallel tasks)."""
    pool = background_pool()
    submitted: list[Any] = []
    real = pool.submit

    def submit(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        submitted.append(fn)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(pool, "submit", submit)
    return submitted


def _lanes(submitted: list[Any]) -> list[Any]:
    """The save lanes among what was handed to the pool."""
    return [
        fn
        for fn in submitted
        if getattr(fn, "__func__", None) is SyncPersistence._drain
    ]


def test_a_resume_that_pauses_again_saves_in_its_own_thread_in_one_batch(
    saver: RecordingSaver, lane_starts: list[Any]
) -> None:
    graph = _ask_graph(saver)
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"n": 0}, config)  # "ask" ran once: known to be quick now
    graph.invoke(Command(resume="first"), config)
    saver.batches.clear()
    lane_starts.clear()

    out = graph.invoke(Command(resume="second"), config)

    assert out["answer"] == "second"
    assert "__interrupt__" in out
    # the resume value, the step it finished and the new pause: one transaction,
    # made by the thread that ran the graph (the lease went back in it too)
    assert saver.batches == [(threading.get_ident(), 3)]
    assert lane_starts == []  # no thread was woken for them
    head = saver.get_tuple(config)
    assert head is not None and head.checkpoint["channel_values"]["n"] == 2
    assert saver.get_lease("t1", "") is None
    snapshot = graph.get_state(config)
    assert snapshot.next == ("ask",) and snapshot.interrupts


def _head_soon(saver: Any, config: Any, holds: Any) -> bool:
    """Whether, within 5 s, the saver's head of ``config``'s thread ``holds``
    (asked every 5 ms)."""
    wanted = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        head = saver.get_tuple(wanted)
        if head is not None and holds(head):
            return True
        time.sleep(0.005)
    return False


class SlowState(TypedDict, total=False):
    log: list[str]
    seen: bool


def _quick(state: SlowState) -> dict[str, Any]:
    return {"log": ["quick"]}


def _quick_then(slow: Any, saver: Any) -> Any:
    """``quick`` writes, then ``slow``."""
    builder = StateGraph(SlowState)
    builder.add_node("quick", _quick)
    builder.add_node("slow", slow)
    builder.add_edge(START, "quick")
    builder.add_edge("quick", "slow")
    builder.add_edge("slow", END)
    return builder.compile(checkpointer=saver)


def _quick_written(head: Any) -> bool:
    return bool(head.metadata.get("writes", {}).get("quick"))


def _slow_graph(saver: RecordingSaver) -> Any:
    """``quick`` writes, then ``slow`` (never under 10 ms: a slow node) waits up
    to 5 s until the saver holds the checkpoint after ``quick``: it returns
    whether it saw it."""

    def slow(state: SlowState, config: Any) -> dict[str, Any]:
        time.sleep(0.01)
        return {"seen": _head_soon(saver, config, _quick_written)}

    return _quick_then(slow, saver)


class ApproveState(TypedDict, total=False):
    n: int
    stored: list[bool]


def _answer_stored(answer: Any) -> Any:
    """Whether a head holds ``answer`` as its resume value."""
    return lambda head: any(
        channel == "__resume__" and answer in str(value)
        for _, channel, value in head.pending_writes or ()
    )


def _approve_graph(approve: Any, saver: Any) -> Any:
    """``approve`` three times in a row."""
    builder = StateGraph(ApproveState)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_conditional_edges(
        "approve", lambda s: END if s["n"] >= 3 else "approve"
    )
    return builder.compile(checkpointer=saver)


def _final_values(graph: Any, how: str, inp: Any, config: Any) -> Any:
    """Run ``graph`` by ``invoke`` or ``stream_events`` (the studio's worker); the
    final state's values."""
    if how == "invoke":
        return graph.invoke(inp, config)
    for _ in graph.stream_events(inp, config, stream_mode=["messages"]):
        pass
    return graph.get_state(config).values


@pytest.mark.parametrize("how", ["invoke", "stream_events"])
def test_a_step_not_known_to_be_quick_has_the_saves_before_it_made_meanwhile(
    saver: RecordingSaver, how: str
) -> None:
    graph = _slow_graph(saver)
    # first run: "slow" never ran; second: it took far longer than the delay
    for thread_id in ("t1", "t2"):
        config = {"configurable": {"thread_id": thread_id}}
        out = _final_values(graph, how, {"log": []}, config)
        assert out["seen"] is True, thread_id
    took = graph.nodes["slow"].last_seconds
    assert took is not None and 0.01 <= took < 5


def test_saves_that_waited_the_delay_go_to_the_lane_with_the_next_one(
    saver: RecordingSaver,
) -> None:
    """A run of quick steps that lasts: its saves do not all wait for its end."""

    class LoopState(TypedDict, total=False):
        n: int

    def tick(state: LoopState) -> dict[str, Any]:
        time.sleep(LANE_DELAY / 4)
        return {"n": state.get("n", 0) + 1}

    builder = StateGraph(LoopState)
    builder.add_node("tick", tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", lambda s: END if s["n"] >= 40 else "tick")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"n": 38}, {"configurable": {"thread_id": "warm"}})  # known quick
    saver.batches.clear()

    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t1"}})

    me = threading.get_ident()
    assert any(thread != me for thread, _ in saver.batches), saver.batches
    assert sum(size for _, size in saver.batches) >= 41
    history = list(graph.get_state_history({"configurable": {"thread_id": "t1"}}))
    assert len(history) == 42  # input, start, 40 steps


def test_a_failing_save_kept_for_the_end_fails_the_run_and_keeps_nothing(
    saver: RecordingSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = _ask_graph(saver)
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"n": 0}, config)  # "ask" is known to be quick now
    head = saver.get_tuple(config)
    assert head is not None

    def refuse(steps: Sequence[Any], **kwargs: Any) -> Any:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(saver, "put_steps", refuse)
    with pytest.raises(RuntimeError, match="the disk is full"):
        graph.invoke(Command(resume="lost"), config)
    monkeypatch.undo()

    after = saver.get_tuple(config)
    assert after is not None and after.checkpoint["id"] == head.checkpoint["id"]
    assert saver.get_lease("t1", "") is None  # the run gave its thread back
    out = graph.invoke(Command(resume="again"), config)  # and the thread goes on
    assert out["answer"] == "again"


@pytest.mark.parametrize("how", ["invoke", "stream_events"])
def test_a_node_that_pauses_quickly_has_its_answer_saved_while_it_works_slowly(
    saver: RecordingSaver, how: str
) -> None:
    """A node that asks (and pauses at once) but, resumed, takes its time (a
    payment after an approval): its first run tells nothing about its resumed
    one, so the answer is stored while it works, on every resume (also when the
    studio's worker resumes it, through ``stream_events``)."""

    def approve(state: ApproveState, config: Any) -> dict[str, Any]:
        answer = interrupt("approve?")
        time.sleep(0.01)  # the slow part
        stored = _head_soon(saver, config, _answer_stored(answer))
        return {
            "n": state.get("n", 0) + 1,
            "stored": [*state.get("stored", []), stored],
        }

    graph = _approve_graph(approve, saver)
    config = {"configurable": {"thread_id": "t1"}}
    _final_values(graph, how, {"n": 0}, config)
    for answer in ("yes-1", "yes-2", "yes-3"):
        out = _final_values(graph, how, Command(resume=answer), config)
    assert out["stored"] == [True, True, True]
    took = graph.nodes["approve"].last_resumed_seconds
    assert took is not None and took >= 0.01


def _chain_graph(saver: RecordingSaver, nodes: int = 3) -> Any:
    """``nodes`` quick nodes in a row, each adding one to ``n``."""

    class ChainState(TypedDict, total=False):
        n: int

    def add(state: ChainState) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    builder = StateGraph(ChainState)
    previous = START
    for i in range(nodes):
        builder.add_node(f"n{i}", add)
        builder.add_edge(previous, f"n{i}")
        previous = f"n{i}"
    builder.add_edge(previous, END)
    return builder.compile(checkpointer=saver)


@pytest.fixture
def patient_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs wait 5 s for the lane (and every node is quick), so that a slow
    machine does not start it: the saves are kept for the run's end."""
    monkeypatch.setattr(_persist, "LANE_DELAY", 5.0)


@pytest.mark.usefixtures("patient_lane")
def test_typed_events_of_quick_steps_save_at_the_end_each_announced_after_it(
    saver: RecordingSaver, lane_starts: list[Any]
) -> None:
    """``stream_events`` (the studio's worker) waits like ``invoke``: its saves
    are announced by CheckpointSaved events, each once it is made, so a run of
    quick steps commits once, in its own thread, and a reader that reads the
    thread after an event finds that checkpoint."""
    graph = _chain_graph(saver)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "warm"}})  # known quick
    saver.batches.clear()
    lane_starts.clear()
    config = {"configurable": {"thread_id": "t1"}}

    found: list[bool] = []
    announced: list[str] = []
    for event in graph.stream_events({"n": 0}, config, stream_mode=["values"]):
        if isinstance(event, ev.CheckpointSaved):
            announced.append(event.checkpoint_id)
            found.append(
                saver.get_tuple(
                    {
                        "configurable": {
                            "thread_id": "t1",
                            "checkpoint_ns": "",
                            "checkpoint_id": event.checkpoint_id,
                        }
                    }
                )
                is not None
            )

    history = [
        s.config["configurable"]["checkpoint_id"]
        for s in graph.get_state_history(config)
    ]
    assert announced == history[::-1]  # input, start, three steps: in order
    assert found == [True] * 5
    assert saver.batches == [(threading.get_ident(), 5)]
    assert not _lanes(lane_starts)  # (its tasks run in the pool: live events)


@pytest.mark.usefixtures("patient_lane")
def test_typed_events_closed_early_keep_every_save_made_before(
    saver: RecordingSaver,
) -> None:
    """A consumer that stops listening (a cancelled run) ends the run: the saves
    its steps made until then are all stored, none waits forever."""
    graph = _chain_graph(saver, nodes=4)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "warm"}})
    config = {"configurable": {"thread_id": "t1"}}
    saver.batches.clear()
    events = graph.stream_events({"n": 0}, config)
    for event in events:
        assert not isinstance(event, ev.CheckpointSaved)  # all kept so far
        if isinstance(event, ev.TaskFinished) and event.node == "n1":
            break
    events.close()

    # the input, the start and n0's step, kept until then, made at the close
    assert saver.batches == [(threading.get_ident(), 3)]
    head = saver.get_tuple(config)
    assert head is not None
    assert head.checkpoint["channel_values"]["n"] == 1
    assert saver.get_lease("t1", "") is None  # the thread is free again
    graph.invoke(None, config)  # and the run goes on from its head
    assert graph.get_state(config).values["n"] == 4


def test_stream_runs_hand_each_save_to_the_lane_as_it_comes(
    saver: RecordingSaver, lane_starts: list[Any]
) -> None:
    """``stream`` chunks reach code that may read the thread and announce no save:
    its saves go as they come, as before."""
    graph = _chain_graph(saver)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "warm"}})
    lane_starts.clear()
    config = {"configurable": {"thread_id": "t1"}}
    for _ in graph.stream({"n": 0}, config):
        pass
    assert _lanes(lane_starts)  # a lane took saves while the run went on


# --- asyncio runs (ainvoke) -----------------------------------------------------------


class _RecordingAsync:
    """Records the size of each ``aput_steps`` batch and whether the lease went
    back in it."""

    abatches: list[tuple[int, bool]]

    async def aput_steps(self, steps: Sequence[Any], **kwargs: Any) -> Any:
        self.abatches.append((len(steps), kwargs.get("release") is not None))
        return await super().aput_steps(steps, **kwargs)  # type: ignore[misc]


class RecordingAsyncSqliteSaver(_RecordingAsync, AsyncSqliteSaver):
    pass


class RecordingAsyncPostgresSaver(_RecordingAsync, AsyncPostgresSaver):
    pass


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def asaver(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A real async SQLite or Postgres saver that records its batches."""
    async with AsyncExitStack() as stack:
        if request.param == "sqlite":
            opened: Any = await stack.enter_async_context(
                RecordingAsyncSqliteSaver.from_conn_string(str(tmp_path / "c.db"))
            )
        else:
            dsn = stack.enter_context(fresh_database(pg_dsn()))
            opened = await stack.enter_async_context(
                RecordingAsyncPostgresSaver.from_conn_string(dsn)
            )
        opened.abatches = []
        await opened.setup()
        yield opened


@pytest.mark.usefixtures("patient_lane")
async def test_an_async_resume_that_pauses_again_saves_in_one_batch(
    asaver: Any,
) -> None:
    # patient: a sync node's hand-off to a worker thread and back (and the SQLite
    # saver's own thread) can pass the lane's 2 ms on a busy machine
    graph = _ask_graph(asaver)
    config = {"configurable": {"thread_id": "t1"}}
    await graph.ainvoke({"n": 0}, config)  # "ask" ran once: known to be quick now
    await graph.ainvoke(Command(resume="first"), config)
    asaver.abatches.clear()

    out = await graph.ainvoke(Command(resume="second"), config)

    assert out["answer"] == "second" and "__interrupt__" in out
    # the resume value, the step it finished and the new pause: one transaction,
    # the lease given back in it
    assert asaver.abatches == [(3, True)]
    head = await asaver.aget_tuple(config)
    assert head is not None and head.checkpoint["channel_values"]["n"] == 2
    assert await asaver.aget_lease("t1", "") is None
    snapshot = await graph.aget_state(config)
    assert snapshot.next == ("ask",) and snapshot.interrupts


async def _ahead_soon(saver: Any, config: Any, holds: Any) -> bool:
    """:func:`_head_soon` for an async saver, from the event loop."""
    wanted = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        head = await saver.aget_tuple(wanted)
        if head is not None and holds(head):
            return True
        await asyncio.sleep(0.005)
    return False


async def test_an_async_step_not_known_to_be_quick_has_the_saves_before_it_made(
    asaver: Any,
) -> None:
    async def slow(state: SlowState, config: Any) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"seen": await _ahead_soon(asaver, config, _quick_written)}

    graph = _quick_then(slow, asaver)
    # first run: "slow" never ran; second: it took far longer than the delay
    for thread_id in ("t1", "t2"):
        config = {"configurable": {"thread_id": thread_id}}
        out = await graph.ainvoke({"log": []}, config)
        assert out["seen"] is True, thread_id


async def test_an_async_node_that_pauses_quickly_has_its_answer_saved_while_it_works(
    asaver: Any,
) -> None:
    async def approve(state: ApproveState, config: Any) -> dict[str, Any]:
        answer = interrupt("approve?")
        await asyncio.sleep(0.01)  # the slow part
        stored = await _ahead_soon(asaver, config, _answer_stored(answer))
        return {
            "n": state.get("n", 0) + 1,
            "stored": [*state.get("stored", []), stored],
        }

    graph = _approve_graph(approve, asaver)
    config = {"configurable": {"thread_id": "t1"}}
    await graph.ainvoke({"n": 0}, config)
    for answer in ("yes-1", "yes-2", "yes-3"):
        out = await graph.ainvoke(Command(resume=answer), config)
    assert out["stored"] == [True, True, True]


async def test_a_failing_async_save_kept_for_the_end_fails_the_run_and_keeps_nothing(
    asaver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = _ask_graph(asaver)
    config = {"configurable": {"thread_id": "t1"}}
    await graph.ainvoke({"n": 0}, config)  # "ask" is known to be quick now
    head = await asaver.aget_tuple(config)
    assert head is not None

    async def refuse(steps: Sequence[Any], **kwargs: Any) -> Any:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(asaver, "aput_steps", refuse)
    with pytest.raises(RuntimeError, match="the disk is full"):
        await graph.ainvoke(Command(resume="lost"), config)
    monkeypatch.undo()

    after = await asaver.aget_tuple(config)
    assert after is not None and after.checkpoint["id"] == head.checkpoint["id"]
    assert await asaver.aget_lease("t1", "") is None  # the run gave its thread back
    out = await graph.ainvoke(Command(resume="again"), config)
    assert out["answer"] == "again"


class RecordingAsyncMemorySaver(_RecordingAsync, InMemorySaver):
    pass


@pytest.mark.usefixtures("patient_lane")
async def test_an_async_run_of_quick_steps_batches_its_memory_saves_throughout() -> (
    None
):
    """An in-memory saver does no I/O, so a lane that started once has no reason
    to take each later save alone: under ``ainvoke`` its saves keep waiting for
    quick steps, in batches of ``SAVES_KEPT_FOR_THE_END``, to the run's end."""
    saver = RecordingAsyncMemorySaver()
    saver.abatches = []
    graph = _chain_graph(saver, nodes=20)
    await graph.ainvoke({"n": 0}, {"configurable": {"thread_id": "warm"}})  # quick
    saver.abatches.clear()

    out = await graph.ainvoke({"n": 0}, {"configurable": {"thread_id": "t1"}})

    assert out["n"] == 20
    sizes = [size for size, _released in saver.abatches]
    # 22 checkpoints: the input's, the step taking it, each node's
    assert sizes == [SAVES_KEPT_FOR_THE_END] * 2 + [22 - 2 * SAVES_KEPT_FOR_THE_END]
    history = [
        s async for s in graph.aget_state_history({"configurable": {"thread_id": "t1"}})
    ]
    assert len(history) == 22 and history[0].values == {"n": 20}

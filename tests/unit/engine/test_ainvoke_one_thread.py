"""``ainvoke`` of a graph whose code is all sync runs on one worker thread
(``engine.pregel._one_thread``): which runs qualify, and that the caller sees
what a step-by-step ``ainvoke`` gives, cancellation included."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from engine.checkpoint import memory as memory_saver
from engine.checkpoint.memory import InMemorySaver
from engine.checkpoint.sqlite.aio import AsyncSqliteSaver
from engine.errors import GraphDrained, NodeTimeoutError
from engine.graph import END, START, StateGraph
from engine.pregel import _one_thread
from engine.pregel._one_thread import runs_on_one_thread
from engine.runtime import RunControl
from engine.store.memory import InMemoryStore
from engine.types import Command, RetryPolicy, Send, interrupt
from tests._support.graphs import LogState


def _node(label: str) -> Any:
    def node(state: LogState) -> dict[str, Any]:
        return {"log": [label]}

    return node


def _chain(*nodes: tuple[str, Any]) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    previous = START
    for name, func in nodes:
        builder.add_node(name, func)
        builder.add_edge(previous, name)
        previous = name
    return builder


THREAD = {"configurable": {"thread_id": "t"}}


# -- which runs qualify ---------------------------------------------------------------


def test_a_graph_of_sync_nodes_and_routes_qualifies() -> None:
    builder = _chain(("a", _node("a")))
    builder.add_conditional_edges("a", lambda state: END)

    assert runs_on_one_thread(builder.compile(), None)
    assert runs_on_one_thread(builder.compile(checkpointer=InMemorySaver()), THREAD)
    assert runs_on_one_thread(
        builder.compile(), {"configurable": {"user": "ada"}, "tags": ["x"]}
    )


async def _async_node(state: LogState) -> dict[str, Any]:
    return {"log": ["async"]}


async def _async_route(state: LogState) -> str:
    return END


class _OwnSaver(InMemorySaver):
    """A subclass may do I/O in its saves: it gets the step-by-step run."""


def test_what_keeps_a_run_step_by_step() -> None:
    assert not runs_on_one_thread(_chain(("a", _async_node)).compile(), None)

    routed = _chain(("a", _node("a")))
    routed.add_conditional_edges("a", _async_route)
    assert not runs_on_one_thread(routed.compile(), None)

    inner = _chain(("i", _node("i"))).compile()
    assert not runs_on_one_thread(_chain(("sub", inner)).compile(), None)

    plain = _chain(("a", _node("a")))
    assert not runs_on_one_thread(plain.compile(store=InMemoryStore()), None)
    assert not runs_on_one_thread(plain.compile(checkpointer=_OwnSaver()), THREAD)
    assert not runs_on_one_thread(plain.compile(), {"callbacks": []})
    private = {"configurable": {"__pregel_checkpointer": InMemorySaver()}}
    assert not runs_on_one_thread(plain.compile(), private)
    stepped = plain.compile()
    stepped.step_timeout = 5
    assert not runs_on_one_thread(stepped, None)


def test_runs_beyond_the_slots_go_step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _chain(("a", _node("a"))).compile()
    monkeypatch.setattr(_one_thread, "_running", _one_thread.RUN_SLOTS)

    assert not runs_on_one_thread(graph, None)


async def test_a_run_inside_a_task_goes_step_by_step() -> None:
    inner = _chain(("i", _node("i"))).compile()
    seen: list[bool] = []

    async def outer_node(state: LogState) -> dict[str, Any]:
        seen.append(runs_on_one_thread(inner, None))
        return await inner.ainvoke({"x": 0, "log": []})

    await _chain(("outer", outer_node)).compile().ainvoke({"x": 0, "log": []})

    assert seen == [False]


# -- what the caller sees -------------------------------------------------------------


async def test_every_step_runs_on_one_worker_thread() -> None:
    threads: list[int] = []

    def step(state: LogState) -> dict[str, Any]:
        threads.append(threading.get_ident())
        return {"x": state["x"] + 1}

    def route(state: LogState) -> str:
        threads.append(threading.get_ident())
        return END if state["x"] >= 5 else "step"

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", route)

    result = await builder.compile(checkpointer=InMemorySaver()).ainvoke(
        {"x": 0, "log": []}, THREAD
    )

    assert result["x"] == 5
    # step by step, the routes ran on the event loop's thread, the nodes elsewhere
    assert len(threads) == 10 and len(set(threads)) == 1
    assert threads[0] != threading.get_ident()
    assert _one_thread._running == 0


async def test_a_sync_node_sent_with_a_timeout_is_timed_out_as_in_async_runs() -> None:
    """A sync run refuses a timeout on a sync node; an ``ainvoke`` on one thread
    stops waiting for it at the deadline, as a step-by-step one did."""

    def slow(arg: dict[str, Any]) -> dict[str, Any]:
        time.sleep(arg["delay"])
        return {"log": [arg["delay"]]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("slow", slow)
    builder.add_conditional_edges(
        START, lambda s: [Send("slow", {"delay": 0.5}, timeout=0.05)], ["slow"]
    )
    graph = builder.compile()
    assert runs_on_one_thread(graph, None)

    started = time.monotonic()
    with pytest.raises(NodeTimeoutError):
        await graph.ainvoke({"x": 0, "log": []})
    assert time.monotonic() - started < 0.4


# -- cancelling -----------------------------------------------------------------------


class _Gate:
    """A node that blocks until released, and the nodes that ran."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.ran: list[str] = []
        self.blocking = True

    def node(self, label: str, *, blocks: bool = False) -> Any:
        def node(state: LogState) -> dict[str, Any]:
            self.ran.append(label)
            if blocks and self.blocking:
                self.started.set()
                self.release.wait(10)
            return {"log": [label]}

        return node


async def _settle(check: Any) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.01)


async def test_a_cancelled_run_gives_its_lease_back_at_once_and_saves_nothing_more() -> (
    None
):
    gate = _Gate()
    builder = _chain(
        ("a", gate.node("a")),
        ("b", gate.node("b", blocks=True)),
        ("c", gate.node("c")),
    )
    saver = InMemorySaver()
    graph = builder.compile(checkpointer=saver)

    run = asyncio.ensure_future(graph.ainvoke({"x": 0, "log": []}, THREAD))
    await asyncio.to_thread(gate.started.wait, 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert saver.get_lease("t", "") is None  # while "b" still runs
    gate.release.set()
    await _settle(lambda: _one_thread._running == 0)

    assert _one_thread._running == 0
    assert gate.ran == ["a", "b"]  # "c" never started
    state = await graph.aget_state(THREAD)
    assert state.next == ("b",)  # "b"'s writes were dropped
    assert state.values["log"] == ["a"]
    assert saver.get_lease("t", "") is None

    gate.started.clear()
    gate.release.set()
    result = await graph.ainvoke(None, THREAD)
    assert result["log"] == ["a", "b", "c"]


async def test_a_cancelled_run_without_a_saver_starts_no_further_step() -> None:
    gate = _Gate()
    graph = _chain(("a", gate.node("a", blocks=True)), ("b", gate.node("b"))).compile()

    run = asyncio.ensure_future(graph.ainvoke({"x": 0, "log": []}))
    await asyncio.to_thread(gate.started.wait, 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    gate.release.set()
    await _settle(lambda: _one_thread._running == 0)

    assert _one_thread._running == 0
    assert gate.ran == ["a"]


async def test_a_run_cancelled_while_it_waits_for_the_thread_never_runs() -> None:
    """``on_busy="wait"``: cancelled while another holder has the thread; once
    that holder lets go, the cancelled run must not take the thread and run."""
    gate = _Gate()
    saver = InMemorySaver()
    graph = _chain(("a", gate.node("a"))).compile(checkpointer=saver)
    saver.acquire_lease("t", "", "someone else", 30)

    run = asyncio.ensure_future(
        graph.ainvoke({"x": 0, "log": []}, THREAD, on_busy="wait")
    )
    await _settle(lambda: _one_thread._running == 1)
    assert _one_thread._running == 1
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    saver.release_lease("t", "", "someone else")
    await _settle(lambda: _one_thread._running == 0)

    assert _one_thread._running == 0
    assert gate.ran == []
    assert saver.get_lease("t", "") is None
    assert (await graph.aget_state(THREAD)).values == {}


async def test_a_cancelled_run_makes_no_further_attempt() -> None:
    """Cancelled while a retry policy waits between attempts: no second attempt."""
    attempts: list[float] = []
    failed = threading.Event()

    def flaky(state: LogState) -> dict[str, Any]:
        attempts.append(time.monotonic())
        failed.set()
        raise ConnectionError("down")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node(
        "flaky", flaky, retry_policy=RetryPolicy(initial_interval=0.2, jitter=False)
    )
    builder.add_edge(START, "flaky")
    graph = builder.compile()
    assert runs_on_one_thread(graph, None)

    run = asyncio.ensure_future(graph.ainvoke({"x": 0, "log": []}))
    await asyncio.to_thread(failed.wait, 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await _settle(lambda: _one_thread._running == 0)
    await asyncio.sleep(0.3)  # past the retry's wait

    assert _one_thread._running == 0
    assert len(attempts) == 1


async def test_pauses_and_resumes_as_step_by_step_runs_do() -> None:
    def ask(state: LogState) -> dict[str, Any]:
        return {"log": [interrupt("which?")]}

    graph = _chain(("ask", ask), ("after", _node("after"))).compile(
        checkpointer=InMemorySaver()
    )
    assert runs_on_one_thread(graph, THREAD)

    paused = await graph.ainvoke({"x": 0, "log": []}, THREAD, version="v2")
    assert paused.value == {"x": 0, "log": []}
    assert [i.value for i in paused.interrupts] == ["which?"]

    done = await graph.ainvoke(Command(resume="this"), THREAD)
    assert done == {"x": 0, "log": ["this", "after"]}


async def test_a_drain_from_the_event_loop_stops_it_at_the_next_step() -> None:
    """``RunControl`` crosses threads: drained from the caller's side while a
    node runs, the run saves that step and raises ``GraphDrained``."""
    gate = _Gate()
    saver = InMemorySaver()
    graph = _chain(("a", gate.node("a", blocks=True)), ("b", gate.node("b"))).compile(
        checkpointer=saver
    )
    control = RunControl()

    run = asyncio.ensure_future(
        graph.ainvoke({"x": 0, "log": []}, THREAD, control=control)
    )
    await asyncio.to_thread(gate.started.wait, 10)
    control.request_drain("deploy")
    gate.release.set()
    with pytest.raises(GraphDrained, match="deploy"):
        await run

    assert gate.ran == ["a"]
    state = await graph.aget_state(THREAD)
    assert state.next == ("b",) and state.values["log"] == ["a"]
    assert saver.get_lease("t", "") is None


# -- with AsyncSqliteSaver ------------------------------------------------------------


class _OwnSqliteSaver(AsyncSqliteSaver):
    """A subclass may do other I/O: it gets the step-by-step run."""


async def test_async_sqlite_runs_on_one_thread_through_its_sync_methods() -> None:
    threads: list[int] = []

    def step(state: LogState) -> dict[str, Any]:
        threads.append(threading.get_ident())
        return {"x": state["x"] + 1, "log": [state["x"]]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["x"] >= 3 else "step")

    async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
        assert not runs_on_one_thread(
            builder.compile(checkpointer=_OwnSqliteSaver(saver.conn)), THREAD
        )
        graph = builder.compile(checkpointer=saver)
        assert runs_on_one_thread(graph, THREAD)

        result = await graph.ainvoke({"x": 0, "log": []}, THREAD)
        history = [s async for s in graph.aget_state_history(THREAD)]

    assert result == {"x": 3, "log": [0, 1, 2]}
    assert len(set(threads)) == 1 and threads[0] != threading.get_ident()
    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]


async def test_a_cancelled_async_sqlite_run_keeps_its_saved_steps_and_gives_the_lease_back() -> (
    None
):
    """Each step is saved before the next (nothing waits to be saved), so a cancel
    that gives the lease back at once loses no finished step. (An ``invoke``'s
    saves of steps whose nodes are known to be quick wait for the run's end: a
    first run makes every node known quick here.)"""
    gate = _Gate()
    builder = _chain(
        ("a", gate.node("a")),
        ("b", gate.node("b")),
        ("c", gate.node("c", blocks=True)),
        ("d", gate.node("d")),
    )
    async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
        graph = builder.compile(checkpointer=saver)
        gate.blocking = False
        await graph.ainvoke({"x": 0, "log": []}, {"configurable": {"thread_id": "w"}})
        gate.blocking, gate.ran = True, []

        run = asyncio.ensure_future(graph.ainvoke({"x": 0, "log": []}, THREAD))
        await asyncio.to_thread(gate.started.wait, 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

        assert await saver.aget_lease("t", "") is None  # while "c" still runs
        gate.release.set()
        await _settle(lambda: _one_thread._running == 0)

        assert _one_thread._running == 0
        assert gate.ran == ["a", "b", "c"]
        state = await graph.aget_state(THREAD)
        assert state.next == ("c",)
        assert state.values["log"] == ["a", "b"]

        gate.started.clear()
        result = await graph.ainvoke(None, THREAD)
        assert result["log"] == ["a", "b", "c", "d"]


def test_after_a_cancel_the_runs_saves_are_skipped_not_refused_halfway() -> None:
    """The run's saves and the cancel share the flag's lock: a save starts only
    while the run is not cancelled, and the cancel waits for one under way."""
    saver = InMemorySaver()
    flag = _one_thread.CancelFlag()
    persistence = _one_thread.GuardedPersistence(saver, flag)
    config = {
        "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}
    }

    persistence.put_writes(config, [("log", ["kept"])], "task-1", "")
    with flag.lock:  # a save under way: the cancel waits for it
        cancelling = threading.Thread(target=flag.cancel)
        cancelling.start()
        cancelling.join(0.05)
        assert cancelling.is_alive() and not flag.cancelled
    cancelling.join(5)
    assert flag.cancelled
    with pytest.raises(asyncio.CancelledError):
        persistence.put_writes(config, [("log", ["dropped"])], "task-2", "")

    bucket = saver.writes[("t", "", "c")]
    assert {task for (task, _), _ in memory_saver._entries(bucket)} == {"task-1"}


async def test_back_to_back_runs_reuse_their_thread() -> None:
    """A run's thread counts itself idle before it hands the result over, so the
    caller's next run finds it (the shared pool started a new thread for most)."""
    graph = _chain(("a", _node("a"))).compile()

    def run_threads() -> int:
        return sum(t.name == "engine-run" for t in threading.enumerate())

    await graph.ainvoke({"x": 0, "log": []})
    before = run_threads()
    for _ in range(50):
        await graph.ainvoke({"x": 0, "log": []})

    assert run_threads() - before <= 1

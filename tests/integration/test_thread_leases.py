"""A run holds its thread (in one process, on every saver): taken before any task,
renewed while it runs, shared with its subgraphs, given back at the end."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, TypedDict

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.memory import InMemorySaver
from engine.errors import CheckpointConflictError, ThreadBusyError
from engine.graph import END, START, StateGraph
from engine.types import Command, StateUpdate, interrupt


class State(TypedDict, total=False):
    log: list[str]
    n: int


def _graph(saver: Any, *, pause: threading.Event | None = None, hold: float = 0.0):
    ran: list[str] = []

    def first(state: State) -> State:
        ran.append("first")
        if pause is not None:
            pause.set()
        time.sleep(hold)
        return {"n": state.get("n", 0) + 1}

    def second(state: State) -> State:
        ran.append("second")
        return {"n": state["n"] + 1}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    graph = builder.compile(checkpointer=saver)
    graph.ran = ran  # type: ignore[attr-defined]
    return graph


def _config(thread_id: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _in_background(fn) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # reported to the test
            out.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, out


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_second_run_on_a_busy_thread_is_refused_before_running_anything(
    saver: BaseCheckpointSaver, durability: str
) -> None:
    started = threading.Event()
    busy = _graph(saver, pause=started, hold=0.5)
    other = _graph(saver)
    thread, out = _in_background(
        lambda: busy.invoke({"n": 0}, _config(), durability=durability)
    )
    started.wait(5)

    with pytest.raises(ThreadBusyError) as caught:
        other.invoke({"n": 10}, _config(), durability=durability)
    thread.join()

    assert other.ran == []
    assert out == [{"n": 2}]
    assert isinstance(caught.value, CheckpointConflictError)
    assert caught.value.thread_id == "t1" and caught.value.holder
    assert "on_busy" in str(caught.value) and "THREAD_BUSY" in str(caught.value)
    assert saver.get_lease("t1", "") is None
    assert busy.get_state(_config()).values == {"n": 2}


def test_waiting_run_goes_after_the_holder_on_its_head(
    saver: BaseCheckpointSaver,
) -> None:
    started = threading.Event()
    busy = _graph(saver, pause=started, hold=0.3)
    waiting = _graph(saver)
    thread, _ = _in_background(lambda: busy.invoke({"n": 0}, _config()))
    started.wait(5)

    result = waiting.invoke({"n": 5}, _config(), on_busy="wait")
    thread.join()

    assert result == {"n": 7}
    history = [s.metadata["step"] for s in waiting.get_state_history(_config())]
    assert history == sorted(history, reverse=True) and len(set(history)) == len(
        history
    )


def test_on_busy_can_come_from_the_config(saver: BaseCheckpointSaver) -> None:
    started = threading.Event()
    busy = _graph(saver, pause=started, hold=0.3)
    waiting = _graph(saver)
    thread, _ = _in_background(lambda: busy.invoke({"n": 0}, _config()))
    started.wait(5)
    config = {"configurable": {"thread_id": "t1", "on_busy": "wait"}}

    assert waiting.invoke({"n": 5}, config) == {"n": 7}
    thread.join()


def test_on_busy_must_be_raise_or_wait(saver: BaseCheckpointSaver) -> None:
    with pytest.raises(ValueError, match="on_busy"):
        _graph(saver).invoke({"n": 0}, _config(), on_busy="queue")  # type: ignore[arg-type]


def test_runs_on_other_threads_are_not_held_up(saver: BaseCheckpointSaver) -> None:
    started = threading.Event()
    busy = _graph(saver, pause=started, hold=0.3)
    thread, _ = _in_background(lambda: busy.invoke({"n": 0}, _config("t1")))
    started.wait(5)

    assert _graph(saver).invoke({"n": 0}, _config("t2")) == {"n": 2}
    thread.join()


def test_lease_is_released_when_the_run_fails_or_pauses(
    saver: BaseCheckpointSaver,
) -> None:
    def boom(state: State) -> State:
        raise RuntimeError("boom")

    def ask(state: State) -> State:
        return {"n": interrupt("n?")}

    failing = StateGraph(State)
    failing.add_node("boom", boom)
    failing.add_edge(START, "boom")
    with pytest.raises(RuntimeError):
        failing.compile(checkpointer=saver).invoke({"n": 0}, _config("f"))
    pausing = StateGraph(State)
    pausing.add_node("ask", ask)
    pausing.add_edge(START, "ask")
    pausing.add_edge("ask", END)
    graph = pausing.compile(checkpointer=saver)
    graph.invoke({"n": 0}, _config("p"))

    assert saver.get_lease("f", "") is None
    assert saver.get_lease("p", "") is None
    assert graph.invoke(Command(resume=3), _config("p")) == {"n": 3}


def test_lease_is_released_when_a_stream_is_closed_early(
    saver: BaseCheckpointSaver,
) -> None:
    graph = _graph(saver)
    stream = graph.stream({"n": 0}, _config(), stream_mode="updates")
    next(stream)
    assert saver.get_lease("t1", "") is not None

    stream.close()

    assert saver.get_lease("t1", "") is None


def test_subgraphs_run_under_their_parents_lease(saver: BaseCheckpointSaver) -> None:
    def inner_node(state: State) -> State:
        return {"n": state["n"] * 10, "log": ["inner"]}

    inner = StateGraph(State)
    inner.add_node("inner_node", inner_node)
    inner.add_edge(START, "inner_node")
    compiled_inner = inner.compile()

    def call_inner(state: State) -> State:
        return compiled_inner.invoke(state)

    outer = StateGraph(State)
    outer.add_node("sub", compiled_inner)
    outer.add_node("call", call_inner)
    outer.add_edge(START, "sub")
    outer.add_edge("sub", "call")
    graph = outer.compile(checkpointer=saver)

    assert graph.invoke({"n": 1}, _config()) == {"n": 100, "log": ["inner"]}
    assert saver.get_lease("t1", "") is None
    namespaces = {
        item.config["configurable"]["checkpoint_ns"] for item in saver.list(_config())
    }
    assert any(ns.startswith("sub:") for ns in namespaces)


def test_no_lease_without_a_checkpointer_or_a_thread(
    saver: BaseCheckpointSaver,
) -> None:
    started = threading.Event()
    plain = _graph(None, pause=started, hold=0.2)
    thread, out = _in_background(lambda: plain.invoke({"n": 0}, _config()))
    started.wait(5)

    assert _graph(None).invoke({"n": 0}, _config()) == {"n": 2}
    thread.join()
    assert out == [{"n": 2}]
    assert saver.get_lease("t1", "") is None


def test_a_long_run_keeps_its_lease_by_renewing_it(saver: BaseCheckpointSaver) -> None:
    saver.lease_seconds = 0.3
    started = threading.Event()
    busy = _graph(saver, pause=started, hold=1.0)
    thread, out = _in_background(lambda: busy.invoke({"n": 0}, _config()))
    started.wait(5)
    time.sleep(0.6)  # two lease lengths: renewed meanwhile

    with pytest.raises(ThreadBusyError):
        _graph(saver).invoke({"n": 0}, _config())
    thread.join()

    assert out == [{"n": 2}]


async def test_async_runs_hold_the_thread_too(asaver: BaseCheckpointSaver) -> None:
    started = asyncio.Event()

    async def slow(state: State) -> State:
        started.set()
        await asyncio.sleep(0.4)
        return {"n": 1}

    builder = StateGraph(State)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    graph = builder.compile(checkpointer=asaver)
    first = asyncio.create_task(graph.ainvoke({"n": 0}, _config()))
    await started.wait()

    with pytest.raises(ThreadBusyError):
        await graph.ainvoke({"n": 0}, _config())
    waited = await graph.ainvoke(None, _config(), on_busy="wait")

    assert await first == {"n": 1}
    assert waited == {"n": 1}
    assert await asaver.aget_lease("t1", "") is None


def test_memory_saver_keeps_leases_per_saver() -> None:
    one, two = InMemorySaver(), InMemorySaver()
    one.acquire_lease("t1", "", "a", 30)

    assert two.acquire_lease("t1", "", "b", 30).holder == "b"


def test_update_state_while_a_run_holds_the_thread_is_refused_and_writes_nothing(
    saver: BaseCheckpointSaver,
) -> None:
    """Before: the update wrote a checkpoint mid-run and the run then failed at its
    next save (its node had run, its work was lost). Now the update is the one
    refused, before it writes, and the run finishes."""
    graph = _graph(saver)
    graph.invoke({"n": 0}, _config())
    before = len(list(graph.get_state_history(_config())))
    started = threading.Event()
    busy = _graph(saver, pause=started, hold=0.5)
    thread, out = _in_background(lambda: busy.invoke({"n": 10}, _config()))
    started.wait(5)

    with pytest.raises(ThreadBusyError) as caught:
        graph.update_state(_config(), {"n": 99}, as_node="second")
    assert "Nothing of this update was written" in str(caught.value)
    thread.join(10)

    assert out == [{"n": 12}]
    history = list(graph.get_state_history(_config()))
    assert (
        len(history) == before + 4
    )  # the second run's own: input, start, first, second
    assert all(s.values.get("n") != 99 for s in history)


def test_update_state_can_wait_for_the_run(saver: BaseCheckpointSaver) -> None:
    started = threading.Event()
    busy = _graph(saver, pause=started, hold=0.3)
    thread, out = _in_background(lambda: busy.invoke({"n": 0}, _config()))
    started.wait(5)
    config = {"configurable": {"thread_id": "t1", "on_busy": "wait"}}

    busy.update_state(config, {"n": 99}, as_node="second")
    thread.join(10)

    assert out == [{"n": 2}]
    assert busy.get_state(_config()).values["n"] == 99  # applied after the run


def test_update_state_gives_the_thread_back(saver: BaseCheckpointSaver) -> None:
    graph = _graph(saver)
    graph.invoke({"n": 0}, _config())
    graph.update_state(_config(), {"n": 5}, as_node="second")
    graph.bulk_update_state(_config(), [[StateUpdate({"n": 6}, "second")]])

    assert graph.invoke(None, _config()) is not None  # not busy: the lease was released
    assert graph.get_state(_config()).values["n"] == 6


async def test_async_update_state_is_refused_while_a_run_holds_the_thread(
    asaver: BaseCheckpointSaver,
) -> None:
    started = asyncio.Event()
    graph = _graph(asaver)

    async def slow(state: State) -> State:
        started.set()
        await asyncio.sleep(0.3)
        return {"n": 1}

    builder = StateGraph(State)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    builder.add_edge("slow", END)
    busy = builder.compile(checkpointer=asaver)
    task = asyncio.create_task(busy.ainvoke({"n": 0}, _config()))
    await asyncio.wait_for(started.wait(), 5)

    with pytest.raises(ThreadBusyError):
        await graph.aupdate_state(_config(), {"n": 99}, as_node="second")
    assert await task == {"n": 1}
    await graph.aupdate_state(_config(), {"n": 7}, as_node="second")
    assert (await graph.aget_state(_config())).values["n"] == 7

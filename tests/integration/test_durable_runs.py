"""Compiled graphs survive failures, interrupts, time travel and crashes on every saver.

Each test runs once per backend (memory, SQLite, Postgres). Where a backend is
shared between savers, the run is resumed through a *second* saver opened on
the same data, as a restarted process would.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.graph import START, StateGraph
from engine.types import Command, Send
from tests._support.durable import (
    crash_graph,
    loop_graph,
    run_crash_graph,
    run_loop_graph,
    runs,
)
from tests._support.graphs import LogState, interrupt_chain, thread, without_interrupt
from tests._support.savers import SaverSpec


def counted(
    counter: Counter[str], name: str, fail: set[str] | None = None
) -> Callable[[Any], Any]:
    """A node that counts its runs and logs its name; raises while in ``fail``."""

    def node(state: Any) -> dict[str, Any]:
        counter[name] += 1
        if fail is not None and name in fail:
            raise RuntimeError(f"{name} failed")
        return {"log": [name]}

    return node


def line(counter: Counter[str], names: str) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in names:
        builder.add_node(name, counted(counter, name))
    builder.add_edge(START, names[0])
    for src, dst in zip(names, names[1:], strict=False):
        builder.add_edge(src, dst)
    return builder


@contextmanager
def reopened(
    saver: BaseCheckpointSaver, spec: SaverSpec
) -> Iterator[BaseCheckpointSaver]:
    """Another saver on the same data (a restarted process); memory: the same one."""
    if not spec.shared:
        yield saver
        return
    with spec.open(setup=False) as again:
        yield again


# -- failures --------------------------------------------------------------------------


def test_resume_after_a_failure_reruns_only_the_failed_task(saver, saver_spec) -> None:
    counter: Counter[str] = Counter()
    failing = {"c"}
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in "abc":
        builder.add_node(name, counted(counter, name, failing))
        builder.add_edge(START, name)
    config = thread("fail")

    with pytest.raises(RuntimeError, match="c failed"):
        builder.compile(checkpointer=saver).invoke({"x": 0, "log": []}, config)
    failing.clear()
    with reopened(saver, saver_spec) as again:
        graph = builder.compile(checkpointer=again)
        assert graph.get_state(config).next == ("c",)
        result = graph.invoke(None, config)

    assert sorted(result["log"]) == ["a", "b", "c"]
    assert counter == {"a": 1, "b": 1, "c": 2}


def _wide_fan_out(counter: Counter[str], failing: set[str]) -> Any:
    """100 parallel Sends (more than the worker threads); ``t0`` fails at once."""

    def work(item: dict[str, Any]) -> dict[str, Any]:
        name = item["name"]
        counter[name] += 1
        if name in failing:
            raise RuntimeError(f"{name} failed")
        time.sleep(0.005)
        return {"log": [name]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("work", work)
    builder.add_conditional_edges(
        START, lambda s: [Send("work", {"name": f"t{i}"}) for i in range(100)]
    )
    return builder


def test_a_failure_in_a_wide_fan_out_keeps_every_sibling(saver) -> None:
    # Regression: siblings queued behind busy worker threads used to be cancelled
    # by an early failure, so which of them survived depended on scheduling.
    counter: Counter[str] = Counter()
    failing = {"t0"}
    graph = _wide_fan_out(counter, failing).compile(checkpointer=saver)
    config = thread("wide")

    with pytest.raises(RuntimeError, match="t0 failed"):
        graph.invoke({"x": 0, "log": []}, config)
    assert len(graph.get_state(config).tasks) == 100
    assert sum(counter.values()) == 100
    failing.clear()
    result = graph.invoke(None, config)

    assert sorted(result["log"]) == sorted(f"t{i}" for i in range(100))
    assert counter["t0"] == 2
    assert sum(counter.values()) == 101


async def test_an_async_failure_in_a_wide_fan_out_keeps_every_sibling(saver) -> None:
    counter: Counter[str] = Counter()
    failing = {"t0"}
    graph = _wide_fan_out(counter, failing).compile(checkpointer=saver)
    config = thread("wide-async")

    with pytest.raises(RuntimeError, match="t0 failed"):
        await graph.ainvoke({"x": 0, "log": []}, config)
    assert sum(counter.values()) == 100
    failing.clear()
    result = await graph.ainvoke(None, config)

    assert len(result["log"]) == 100
    assert sum(counter.values()) == 101


# -- interrupts ------------------------------------------------------------------------


def test_interrupt_and_resume_round_trip(saver, saver_spec) -> None:
    config = thread("ask")
    first = (
        interrupt_chain()
        .compile(checkpointer=saver)
        .invoke({"x": 1, "log": []}, config)
    )
    assert [i.value for i in first["__interrupt__"]] == [{"q": "name?"}]

    with reopened(saver, saver_spec) as again:
        graph = interrupt_chain().compile(checkpointer=again)
        state = graph.get_state(config)
        assert state.next == ("ask",)
        assert [i.value for i in state.interrupts] == [{"q": "name?"}]
        result = graph.invoke(Command(resume="Ann"), config)

    assert result == {"x": 1, "log": ["pre", "ans:Ann", "post"]}


async def test_interrupt_and_resume_round_trip_async(asaver) -> None:
    graph = interrupt_chain().compile(checkpointer=asaver)
    config = thread("ask-async")

    first = await graph.ainvoke({"x": 1, "log": []}, config)
    result = await graph.ainvoke(Command(resume="Bo"), config)

    assert without_interrupt(first) == {"x": 1, "log": ["pre"]}
    assert result == {"x": 1, "log": ["pre", "ans:Bo", "post"]}
    history = [s.metadata["step"] async for s in graph.aget_state_history(config)]
    assert history == sorted(history, reverse=True)


# -- time travel -----------------------------------------------------------------------


def test_invoke_from_a_past_checkpoint_reruns_only_later_nodes(saver) -> None:
    counter: Counter[str] = Counter()
    graph = line(counter, "abc").compile(checkpointer=saver)
    config = thread("travel")
    graph.invoke({"x": 0, "log": []}, config)
    after_a = next(s for s in graph.get_state_history(config) if s.next == ("b",))

    result = graph.invoke(None, after_a.config)

    assert result["log"] == ["a", "b", "c"]
    assert counter == {"a": 1, "b": 2, "c": 2}
    history = list(graph.get_state_history(config))
    replayed = [s for s in history if s.parent_config == after_a.config]
    assert len(replayed) == 2  # the original b step and the replayed one: a fork


def test_update_state_on_a_past_checkpoint_branches_from_it(saver, saver_spec) -> None:
    counter: Counter[str] = Counter()
    graph = line(counter, "abc").compile(checkpointer=saver)
    config = thread("branch")
    graph.invoke({"x": 0, "log": []}, config)
    after_a = next(s for s in graph.get_state_history(config) if s.next == ("b",))
    old_head = graph.get_state(config).config

    branch = graph.update_state(after_a.config, {"log": ["edited"]}, as_node="a")

    with reopened(saver, saver_spec) as again:
        reread = line(counter, "abc").compile(checkpointer=again)
        state = reread.get_state(branch)
        assert state.parent_config == after_a.config
        assert state.metadata is not None and state.metadata["source"] == "update"
        assert state.values["log"] == ["a", "edited"]
        assert state.next == ("b",)
        result = reread.invoke(None, branch)
        ids = {
            s.config["configurable"]["checkpoint_id"]
            for s in reread.get_state_history(config)
        }

    assert result["log"] == ["a", "edited", "b", "c"]
    assert old_head["configurable"]["checkpoint_id"] in ids  # the old branch survives
    assert counter == {"a": 1, "b": 2, "c": 2}


# -- durability ------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_every_durability_leaves_a_resumable_thread(
    saver, saver_spec, durability
) -> None:
    config = thread(f"durable-{durability}")
    interrupt_chain().compile(checkpointer=saver).invoke(
        {"x": 2, "log": []}, config, durability=durability
    )

    with reopened(saver, saver_spec) as again:
        graph = interrupt_chain().compile(checkpointer=again)
        assert graph.get_state(config).next == ("ask",)
        result = graph.invoke(Command(resume="Cy"), config, durability=durability)
        final = graph.get_state(config)

    assert result == {"x": 2, "log": ["pre", "ans:Cy", "post"]}
    assert final.next == ()


# -- crash -----------------------------------------------------------------------------


def _free_dead_lease(saver, thread_id: str) -> None:
    """The killed process still holds the thread (its lease outlives it until it
    expires): release it as an operator who knows that process is gone would,
    instead of waiting out the lease."""
    lease = saver.get_lease(thread_id, "")
    assert lease is not None
    saver.release_lease(thread_id, "", lease.holder)


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_run_killed_mid_step_resumes_without_lost_or_duplicated_writes(
    saver, saver_spec, tmp_path: Path
) -> None:
    if not saver_spec.shared:
        pytest.skip("the memory saver does not outlive its process")
    workdir = tmp_path / "runs"
    workdir.mkdir()
    (workdir / "c.sleep").touch()
    config = thread("crash")
    child = multiprocessing.get_context("spawn").Process(
        target=run_crash_graph, args=(saver_spec, str(workdir), "crash")
    )
    child.start()
    try:

        def b_saved_while_c_runs() -> bool:
            if runs(workdir, "c") == 0:
                return False
            head = saver.get_tuple(config)
            return head is not None and any(
                channel == "log" and value == ["b"]
                for _, channel, value in head.pending_writes or ()
            )

        _wait_for(b_saved_while_c_runs, "b's write saved while c is running")
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
    finally:
        if child.is_alive():
            child.kill()
    assert child.exitcode == -signal.SIGKILL

    (workdir / "c.sleep").unlink()
    _free_dead_lease(saver, "crash")
    graph = crash_graph(workdir).compile(checkpointer=saver)
    killed = graph.get_state(config)
    assert killed.next == ("c",)  # b finished before the kill: its writes are saved
    assert {t.name for t in killed.tasks} == {"b", "c"}
    result = graph.invoke(None, config)

    assert result == {"log": ["a", "b", "c", "d"]}
    assert {n: runs(workdir, n) for n in "abcd"} == {"a": 1, "b": 1, "c": 2, "d": 1}
    steps = [s.metadata["step"] for s in graph.get_state_history(config)]
    assert steps == [3, 2, 1, 0, -1]


@pytest.mark.slow
def test_run_killed_at_any_moment_leaves_only_whole_checkpoints(
    saver, saver_spec
) -> None:
    if not saver_spec.shared:
        pytest.skip("the memory saver does not outlive its process")
    steps = 400
    config = {"configurable": {"thread_id": "loop"}, "recursion_limit": steps + 10}
    child = multiprocessing.get_context("spawn").Process(
        target=run_loop_graph, args=(saver_spec, "loop", steps)
    )
    child.start()
    try:

        def some_steps_saved() -> bool:
            head = saver.get_tuple(config)
            return (
                head is not None
                and len(head.checkpoint["channel_values"].get("log", [])) >= 30
            )

        _wait_for(some_steps_saved, "30 saved steps")
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)  # most likely in the middle of a save
        child.join(timeout=30)
    finally:
        if child.is_alive():
            child.kill()
    assert child.exitcode == -signal.SIGKILL

    history = list(saver.list(config))
    assert len(history) < steps  # killed before the end
    for saved in history:
        log = saved.checkpoint["channel_values"].get("log", [])
        assert log == list(range(len(log)))
    _free_dead_lease(saver, "loop")
    result = loop_graph(steps).compile(checkpointer=saver).invoke(None, config)

    assert result == {"log": list(range(steps))}


# -- the database goes away ------------------------------------------------------------


def test_lost_database_connection_fails_clearly_and_the_thread_resumes(
    saver, saver_spec
) -> None:
    if saver_spec.kind != "postgres":
        pytest.skip("only a server database can drop its connections mid-run")
    import psycopg  # noqa: PLC0415 - only this backend needs it

    counter: Counter[str] = Counter()
    cut = {"b"}

    def drop_connections(state: Any) -> dict[str, Any]:
        counter["b"] += 1
        if "b" in cut:
            cut.clear()
            with psycopg.connect(saver_spec.target, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        return {"log": ["b"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", counted(counter, "a"))
    builder.add_node("b", drop_connections)
    builder.add_node("c", counted(counter, "c"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    graph = builder.compile(checkpointer=saver)
    config = thread("lost")

    with pytest.raises(psycopg.OperationalError):
        graph.invoke({"x": 0, "log": []}, config, durability="sync")

    result = graph.invoke(None, config, durability="sync")
    assert result["log"] == ["a", "b", "c"]
    assert counter == {"a": 1, "b": 2, "c": 1}

"""A drained run is saved on a real saver and carries on from another saver object.

What a worker shutting down gracefully relies on: ``RunControl.request_drain()``
(from a signal handler, another thread or a node) stops the run at the next step
boundary with ``GraphDrained``, after the finished steps are stored; a fresh
process opening the same database resumes the thread with ``invoke(None, ...)``
and runs only what had not run. Run on SQLite files (and Postgres when
``ENGINE_TEST_PG_DSN`` is set); the memory backend cannot be reopened.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from engine.errors import GraphDrained
from engine.graph import START, StateGraph
from engine.runtime import RunControl
from tests._support.graphs import LogState, thread
from tests._support.savers import SaverSpec

STEPS = ("fetch", "enrich", "publish")


def pipeline(
    ran: list[str], gate: dict[str, Any], fetch: Any = None
) -> StateGraph[Any, Any, Any, Any]:
    """fetch -> enrich -> publish, each logging its name; with a ``gate``, ``fetch``
    waits for the test to request a drain; ``fetch`` may be given instead."""

    def step(name: str) -> Any:
        def node(state: LogState) -> dict[str, Any]:
            ran.append(name)
            if name == "fetch" and "started" in gate:
                gate["started"].set()
                assert gate["drained"].wait(5)
            return {"log": [name]}

        return node

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    previous = START
    for name in STEPS:
        builder.add_node(name, fetch if name == "fetch" and fetch else step(name))
        builder.add_edge(previous, name)
        previous = name
    return builder


def shared_only(spec: SaverSpec) -> None:
    if not spec.shared:
        pytest.skip("the memory saver cannot be reopened by another saver object")


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_run_drained_from_another_thread_continues_on_a_reopened_saver(
    saver_spec: SaverSpec, durability: Any
) -> None:
    shared_only(saver_spec)
    ran: list[str] = []
    gate = {"started": threading.Event(), "drained": threading.Event()}
    control = RunControl()
    config = thread("drained-worker")
    outcome: list[BaseException] = []

    with saver_spec.open() as first_saver:
        graph = pipeline(ran, gate).compile(checkpointer=first_saver)

        def work() -> None:
            try:
                graph.invoke(
                    {"x": 1, "log": []}, config, durability=durability, control=control
                )
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=work)
        worker.start()
        assert gate["started"].wait(5)
        control.request_drain("sigterm")  # what a SIGTERM handler does
        gate["drained"].set()
        worker.join(10)

    assert [type(e) for e in outcome] == [GraphDrained]
    assert ran == ["fetch"]

    with saver_spec.open() as second_saver:
        resumed = pipeline(ran, {}).compile(checkpointer=second_saver)
        state = resumed.get_state(config)
        assert state.values == {"x": 1, "log": ["fetch"]}
        assert state.next == ("enrich",)

        result = resumed.invoke(None, config, durability=durability)

        assert result == {"x": 1, "log": list(STEPS)}
        assert ran == list(STEPS)  # nothing that finished ran twice
        steps = [s.metadata["step"] for s in resumed.get_state_history(config)]
        # "exit" saves once per run: where the drain stopped, then the end
        assert steps == ([3, 1] if durability == "exit" else [3, 2, 1, 0, -1])


async def test_an_async_run_drained_by_a_node_continues_on_a_reopened_saver(
    saver_spec: SaverSpec,
) -> None:
    shared_only(saver_spec)
    ran: list[str] = []
    control = RunControl()
    config = thread("drained-async")

    async def fetch(state: LogState) -> dict[str, Any]:
        ran.append("fetch")
        control.request_drain("deploy")
        return {"log": ["fetch"]}

    async with saver_spec.aopen() as first_saver:
        graph = pipeline(ran, {}, fetch).compile(checkpointer=first_saver)
        with pytest.raises(GraphDrained, match="deploy"):
            await graph.ainvoke({"x": 2, "log": []}, config, control=control)

    async with saver_spec.aopen() as second_saver:
        resumed = pipeline(ran, {}).compile(checkpointer=second_saver)
        result = await resumed.ainvoke(None, config)

    assert result == {"x": 2, "log": list(STEPS)}
    assert ran == list(STEPS)

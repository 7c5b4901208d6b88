"""Synchronous nodes that use asyncio helpers, and the context they run in.

As LangGraph 1.2 runs them: a sync node runs on a worker thread (or inline, for
a lone task of a sync run) in a copy of the caller's context, so the caller's
contextvars are visible, including under ``ainvoke``/``astream``; no event loop
runs in that thread, so ``asyncio.run()`` (and a loop of the node's own) works
there, and the graph's context (``get_config``, the stream writer) reaches the
coroutines it runs. Checked on LangGraph 1.2.24.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.config import get_config, get_stream_writer
from engine.func import entrypoint, task
from engine.graph import START, StateGraph
from engine.pregel import _one_thread
from tests._support.graphs import LogState

REQUEST = contextvars.ContextVar("REQUEST", default="unset")


async def lookup(label: str) -> str:
    await asyncio.sleep(0)
    get_stream_writer()({"looked up": label})
    user = get_config()["configurable"].get("user", "?")
    return f"{label}:{user}:{REQUEST.get()}"


def with_asyncio_run(label: str) -> Any:
    def node(state: LogState) -> dict[str, Any]:
        return {"log": [asyncio.run(lookup(label))]}

    return node


def with_own_loop(label: str) -> Any:
    def node(state: LogState) -> dict[str, Any]:
        loop = asyncio.new_event_loop()
        try:
            return {"log": [loop.run_until_complete(lookup(label))]}
        finally:
            loop.close()

    return node


def graph(parallel: bool) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", with_asyncio_run("a"))
    builder.add_node("b", with_own_loop("b"))
    builder.add_edge(START, "a")
    builder.add_edge(START if parallel else "a", "b")
    return builder.compile()


CONFIG = {"configurable": {"user": "ada"}}


@pytest.fixture(autouse=True)
def caller_context() -> Any:
    token = REQUEST.set("req-1")
    yield
    REQUEST.reset(token)


@pytest.mark.parametrize("parallel", [False, True])
def test_sync_nodes_run_coroutines_with_asyncio_run(parallel: bool) -> None:
    result = graph(parallel).invoke({"x": 0, "log": []}, CONFIG)

    assert sorted(result["log"]) == ["a:ada:req-1", "b:ada:req-1"]


@pytest.mark.parametrize("parallel", [False, True])
async def test_under_ainvoke_sync_nodes_see_the_callers_contextvars(
    parallel: bool,
) -> None:
    result = await graph(parallel).ainvoke({"x": 0, "log": []}, CONFIG)

    assert sorted(result["log"]) == ["a:ada:req-1", "b:ada:req-1"]


async def test_a_sync_nodes_coroutine_writes_to_the_stream() -> None:
    chunks = [
        chunk
        async for chunk in graph(True).astream(
            {"x": 0, "log": []}, CONFIG, stream_mode=["custom", "values"]
        )
    ]

    custom = sorted(c[1]["looked up"] for c in chunks if c[0] == "custom")
    assert custom == ["a", "b"]
    assert sorted(chunks[-1][1]["log"]) == ["a:ada:req-1", "b:ada:req-1"]


def test_a_live_stream_runs_sync_nodes_on_worker_threads_that_can_run_coroutines() -> (
    None
):
    chunks = list(
        graph(False).stream({"x": 0, "log": []}, CONFIG, stream_mode=["custom"])
    )

    assert [c[1] for c in chunks] == [{"looked up": "a"}, {"looked up": "b"}]


async def test_functional_api_sync_tasks_see_the_callers_context_under_ainvoke() -> (
    None
):
    @task
    def fetch(label: str) -> str:
        return asyncio.run(lookup(label))

    @entrypoint()
    def flow(labels: list[str]) -> list[str]:
        return [future.result() for future in [fetch(label) for label in labels]]

    assert await flow.ainvoke(["x", "y"], CONFIG) == ["x:ada:req-1", "y:ada:req-1"]


def sets_then_reads() -> Any:
    """Node ``a`` sets ``REQUEST`` (and logs it), then ``b`` logs what it sees."""

    def sets(state: LogState) -> dict[str, Any]:
        REQUEST.set("set by a")
        return {"log": [REQUEST.get()]}

    def reads(state: LogState) -> dict[str, Any]:
        return {"log": [REQUEST.get()]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", sets)
    builder.add_node("b", reads)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder.compile()


@pytest.mark.parametrize("one_thread", [True, False], ids=["one thread", "by step"])
async def test_what_a_lone_sync_node_sets_stays_in_its_thread_under_ainvoke(
    one_thread: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the whole run goes to one worker thread (``_one_thread``) or a
    step of one sync node awaits its worker thread directly (no task of its
    own): what the node sets in its context still ends with it."""
    if not one_thread:
        monkeypatch.setattr(_one_thread, "RUN_SLOTS", 0)

    result = await sets_then_reads().ainvoke({"x": 0, "log": []})

    assert result["log"] == ["set by a", "req-1"]
    assert REQUEST.get() == "req-1"


def test_what_a_lone_sync_node_sets_stays_in_its_call_under_invoke() -> None:
    """A lone task of a sync run runs inline, but in a copy of the context, as
    LangGraph's nodes do: the next node and the caller do not see what it set
    (they did before: the node ran in the caller's own context)."""
    result = sets_then_reads().invoke({"x": 0, "log": []})

    assert result["log"] == ["set by a", "req-1"]
    assert REQUEST.get() == "req-1"


async def test_cancelling_ainvoke_while_a_lone_sync_node_runs() -> None:
    """The caller cancels the run while its one sync node works: the run ends
    with CancelledError at once, its thread's lease is given back, and the
    thread's next run starts from the checkpoint saved before the node."""
    started, release = threading.Event(), threading.Event()

    def slow(state: LogState) -> dict[str, Any]:
        started.set()
        release.wait(10)
        return {"log": ["slow"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    saver = InMemorySaver()
    graph_ = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}

    run = asyncio.ensure_future(graph_.ainvoke({"x": 0, "log": []}, config))
    await asyncio.to_thread(started.wait, 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    release.set()

    assert saver.get_lease("t", "") is None
    assert (await graph_.aget_state(config)).next == ("slow",)
    started.clear()
    result = await graph_.ainvoke(None, config)
    assert result["log"] == ["slow"]


def test_a_sync_node_raising_stop_iteration_under_ainvoke_fails_the_run() -> None:
    """As under ``invoke`` (and in LangGraph 1.2.24): a ``RuntimeError`` whose
    cause is the ``StopIteration`` (PEP 479), never a step waiting forever on a
    future that cannot hold it."""

    def node(state: LogState) -> dict[str, Any]:
        raise StopIteration("from a node")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("stops", node)
    builder.add_edge(START, "stops")

    async def run() -> Any:
        return await builder.compile().ainvoke({"log": []})

    with pytest.raises(RuntimeError) as raised:
        asyncio.run(asyncio.wait_for(run(), 10))
    assert isinstance(raised.value.__cause__, StopIteration)

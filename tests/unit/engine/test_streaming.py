"""Streaming and the run surface: stream modes, subgraph namespaces, sync/async twins.

Chunks were compared with LangGraph 1.2 on the same graphs (ids and timestamps
aside: the engine's task and checkpoint ids differ by design).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.config import get_config, get_stream_writer
from engine.graph import START, StateGraph
from engine.runtime import Runtime, get_runtime
from engine.types import StreamWriter
from tests._support.graphs import LogState, appender, chain, thread

VOLATILE = frozenset({"id", "checkpoint_id", "timestamp", "ts"})


def scrub(value: Any) -> Any:
    """Replace ids and timestamps with a placeholder, recursively."""
    if isinstance(value, dict):
        return {k: "<id>" if k in VOLATILE else scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub(v) for v in value)
    return value


def writer_graph(**compile_kwargs: Any) -> Any:
    """START -> a (writes custom chunks both ways) -> b."""

    def a(state: LogState, writer: StreamWriter) -> dict[str, Any]:
        writer({"progress": "a"})
        get_stream_writer()("from-a")
        return {"x": state["x"] + 1, "log": ["a"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", a)
    builder.add_node("b", appender("b"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder.compile(**compile_kwargs)


def plain_graph(**compile_kwargs: Any) -> Any:
    """START -> a -> b, a adds one to x; no custom chunks."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", lambda s: {"x": s["x"] + 1, "log": ["a"]})
    builder.add_node("b", appender("b"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder.compile(**compile_kwargs)


# -- single modes --------------------------------------------------------------------


def test_stream_values_yields_the_state_after_input_and_each_step() -> None:
    assert list(plain_graph().stream({"x": 1}, stream_mode="values")) == [
        {"x": 1, "log": []},
        {"x": 2, "log": ["a"]},
        {"x": 2, "log": ["a", "b"]},
    ]


def test_stream_updates_yields_each_nodes_update() -> None:
    assert list(plain_graph().stream({"x": 1}, stream_mode="updates")) == [
        {"a": {"x": 2, "log": ["a"]}},
        {"b": {"log": ["b"]}},
    ]


def test_stream_custom_yields_writer_and_get_stream_writer_chunks() -> None:
    assert list(writer_graph().stream({"x": 0}, stream_mode="custom")) == [
        {"progress": "a"},
        "from-a",
    ]


def test_stream_tasks_yields_start_and_result_of_each_task() -> None:
    chunks = [scrub(c) for c in plain_graph().stream({"x": 0}, stream_mode="tasks")]

    assert chunks == [
        {
            "id": "<id>",
            "name": "a",
            "input": {"x": 0, "log": []},
            "triggers": ("branch:to:a",),
        },
        {
            "id": "<id>",
            "name": "a",
            "error": None,
            "result": {"x": 1, "log": ["a"]},
            "interrupts": [],
        },
        {
            "id": "<id>",
            "name": "b",
            "input": {"x": 1, "log": ["a"]},
            "triggers": ("branch:to:b",),
        },
        {
            "id": "<id>",
            "name": "b",
            "error": None,
            "result": {"log": ["b"]},
            "interrupts": [],
        },
    ]


def test_stream_tasks_start_and_result_share_the_task_id() -> None:
    chunks = list(plain_graph().stream({"x": 0}, stream_mode="tasks"))

    assert chunks[0]["id"] == chunks[1]["id"]
    assert chunks[0]["id"] != chunks[2]["id"]


def test_stream_tasks_reports_the_error_then_raises() -> None:
    def boom(state: Any) -> dict[str, Any]:
        raise KeyError("boom")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("boom", boom)
    builder.add_edge(START, "boom")
    chunks: list[Any] = []

    with pytest.raises(KeyError, match="boom"):
        for chunk in builder.compile().stream({"x": 0}, stream_mode="tasks"):
            chunks.append(chunk)

    assert [c["name"] for c in chunks] == ["boom", "boom"]
    error = chunks[1]["error"]  # the exception itself, as LangGraph streams it
    assert isinstance(error, KeyError) and error.args == ("boom",)
    assert chunks[1]["result"] == {}  # as LangGraph: a failed task wrote nothing


def checkpoint_chunk(
    values: Any, source: str, step: int, next_: list[str]
) -> dict[str, Any]:
    return {
        "config": {
            "configurable": {
                "checkpoint_ns": "",
                "thread_id": "t",
                "checkpoint_id": "<id>",
            }
        },
        "parent_config": None
        if step == -1
        else {
            "configurable": {
                "checkpoint_ns": "",
                "thread_id": "t",
                "checkpoint_id": "<id>",
            }
        },
        "values": values,
        "metadata": {"source": source, "step": step, "parents": {}},
        "next": next_,
        "tasks": [
            {"id": "<id>", "name": n, "interrupts": (), "state": None} for n in next_
        ],
    }


EXPECTED_CHECKPOINTS = [
    checkpoint_chunk({"log": []}, "input", -1, ["__start__"]),
    checkpoint_chunk({"x": 0, "log": []}, "loop", 0, ["a"]),
    checkpoint_chunk({"x": 1, "log": ["a"]}, "loop", 1, ["b"]),
    checkpoint_chunk({"x": 1, "log": ["a", "b"]}, "loop", 2, []),
]


def without_writes(chunk: dict[str, Any]) -> dict[str, Any]:
    # The engine also records metadata["writes"] (LangGraph 1.2 dropped it).
    metadata = {k: v for k, v in chunk["metadata"].items() if k != "writes"}
    return {**chunk, "metadata": metadata}


def test_stream_checkpoints_yields_each_saved_checkpoint() -> None:
    graph = plain_graph(checkpointer=InMemorySaver())

    chunks = list(graph.stream({"x": 0}, thread("t"), stream_mode="checkpoints"))

    assert [without_writes(scrub(c)) for c in chunks] == EXPECTED_CHECKPOINTS
    for parent, child in zip(chunks, chunks[1:], strict=False):
        assert child["parent_config"] == parent["config"]


def test_stream_checkpoints_without_a_checkpointer_yields_nothing() -> None:
    assert list(plain_graph().stream({"x": 0}, stream_mode="checkpoints")) == []


def test_stream_debug_wraps_checkpoints_tasks_and_results() -> None:
    graph = plain_graph(checkpointer=InMemorySaver())

    chunks = [
        scrub(c) for c in graph.stream({"x": 0}, thread("t"), stream_mode="debug")
    ]

    assert [(c["step"], c["type"], c["timestamp"]) for c in chunks] == [
        (-1, "checkpoint", "<id>"),
        (0, "checkpoint", "<id>"),
        (1, "task", "<id>"),
        (1, "task_result", "<id>"),
        (1, "checkpoint", "<id>"),
        (2, "task", "<id>"),
        (2, "task_result", "<id>"),
        (2, "checkpoint", "<id>"),
    ]
    checkpoints = [
        without_writes(c["payload"]) for c in chunks if c["type"] == "checkpoint"
    ]
    assert checkpoints == EXPECTED_CHECKPOINTS
    assert chunks[3]["payload"] == {
        "id": "<id>",
        "name": "a",
        "error": None,
        "result": {"x": 1, "log": ["a"]},
        "interrupts": [],
    }


def test_stream_debug_without_a_checkpointer_has_only_tasks() -> None:
    chunks = list(plain_graph().stream({"x": 0}, stream_mode="debug"))

    assert [(c["step"], c["type"]) for c in chunks] == [
        (1, "task"),
        (1, "task_result"),
        (2, "task"),
        (2, "task_result"),
    ]


# -- several modes ------------------------------------------------------------------


def test_stream_several_modes_yield_mode_chunk_pairs_in_order() -> None:
    chunks = list(
        writer_graph().stream({"x": 0}, stream_mode=["custom", "updates", "values"])
    )

    assert chunks == [
        ("values", {"x": 0, "log": []}),
        ("custom", {"progress": "a"}),
        ("custom", "from-a"),
        ("updates", {"a": {"x": 1, "log": ["a"]}}),
        ("values", {"x": 1, "log": ["a"]}),
        ("updates", {"b": {"log": ["b"]}}),
        ("values", {"x": 1, "log": ["a", "b"]}),
    ]


def test_stream_a_one_element_mode_list_still_yields_pairs() -> None:
    assert list(plain_graph().stream({"x": 0}, stream_mode=["updates"])) == [
        ("updates", {"a": {"x": 1, "log": ["a"]}}),
        ("updates", {"b": {"log": ["b"]}}),
    ]


def test_stream_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="nope"):
        list(plain_graph().stream({"x": 0}, stream_mode="nope"))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["updates", "values", "tasks", "debug"])
def test_stream_custom_chunks_only_reach_the_custom_mode(mode: str) -> None:
    chunks = list(writer_graph().stream({"x": 0}, stream_mode=mode))  # type: ignore[arg-type]

    assert {"progress": "a"} not in chunks
    assert "from-a" not in chunks


def test_invoke_with_updates_mode_returns_only_updates() -> None:
    assert writer_graph().invoke({"x": 0}, stream_mode="updates") == [
        {"a": {"x": 1, "log": ["a"]}},
        {"b": {"log": ["b"]}},
    ]


def test_stream_default_mode_of_a_state_graph_is_updates() -> None:
    assert list(plain_graph().stream({"x": 0})) == [
        {"a": {"x": 1, "log": ["a"]}},
        {"b": {"log": ["b"]}},
    ]


# -- subgraphs ------------------------------------------------------------------------


def parent_with_child() -> Any:
    child = chain(["c1", "c2"]).compile()
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("p1", appender("p1"))
    builder.add_node("child", child)
    builder.add_edge(START, "p1")
    builder.add_edge("p1", "child")
    return builder.compile()


def node_names(ns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.split(":", 1)[0] for part in ns)


def test_stream_subgraphs_prefixes_chunks_with_the_namespace() -> None:
    chunks = list(
        parent_with_child().stream({"x": 0}, stream_mode="updates", subgraphs=True)
    )

    assert [(node_names(ns), c) for ns, c in chunks] == [
        ((), {"p1": {"log": ["p1"]}}),
        (("child",), {"c1": {"log": ["c1"]}}),
        (("child",), {"c2": {"log": ["c2"]}}),
        ((), {"child": {"x": 0, "log": ["p1", "c1", "c2"]}}),
    ]
    ((child_ns,),) = {ns for ns, _ in chunks if ns}
    name, _, task_id = child_ns.partition(":")
    assert name == "child"
    assert task_id


def test_stream_without_subgraphs_hides_child_chunks() -> None:
    assert list(parent_with_child().stream({"x": 0}, stream_mode="updates")) == [
        {"p1": {"log": ["p1"]}},
        {"child": {"x": 0, "log": ["p1", "c1", "c2"]}},
    ]


def test_stream_subgraphs_with_several_modes_yields_triples() -> None:
    chunks = parent_with_child().stream(
        {"x": 0}, stream_mode=["updates", "values"], subgraphs=True
    )

    assert [(node_names(ns), mode, c) for ns, mode, c in chunks] == [
        ((), "values", {"x": 0, "log": []}),
        ((), "updates", {"p1": {"log": ["p1"]}}),
        ((), "values", {"x": 0, "log": ["p1"]}),
        (("child",), "values", {"x": 0, "log": ["p1"]}),
        (("child",), "updates", {"c1": {"log": ["c1"]}}),
        (("child",), "values", {"x": 0, "log": ["p1", "c1"]}),
        (("child",), "updates", {"c2": {"log": ["c2"]}}),
        (("child",), "values", {"x": 0, "log": ["p1", "c1", "c2"]}),
        ((), "updates", {"child": {"x": 0, "log": ["p1", "c1", "c2"]}}),
        ((), "values", {"x": 0, "log": ["p1", "p1", "c1", "c2"]}),
    ]


def test_stream_subgraphs_includes_a_graph_invoked_inside_a_node() -> None:
    child = chain(["c1", "c2"]).compile()

    def wrap(state: Any) -> dict[str, Any]:
        return {"log": child.invoke({"x": state["x"], "log": []})["log"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("wrap", wrap)
    builder.add_edge(START, "wrap")
    chunks = builder.compile().stream({"x": 0}, stream_mode="updates", subgraphs=True)

    assert [(node_names(ns), c) for ns, c in chunks] == [
        (("wrap",), {"c1": {"log": ["c1"]}}),
        (("wrap",), {"c2": {"log": ["c2"]}}),
        ((), {"wrap": {"log": ["c1", "c2"]}}),
    ]


# -- sync and async twins --------------------------------------------------------------


async def test_astream_matches_stream_for_every_mode() -> None:
    graph = writer_graph()
    modes: list[Any] = [
        "values",
        "updates",
        "custom",
        "tasks",
        "debug",
        ["updates", "custom"],
    ]

    for mode in modes:
        sync_chunks = [scrub(c) for c in graph.stream({"x": 0}, stream_mode=mode)]
        async_chunks = [
            scrub(c) async for c in graph.astream({"x": 0}, stream_mode=mode)
        ]

        assert async_chunks == sync_chunks, mode


async def test_astream_subgraphs_matches_stream() -> None:
    graph = parent_with_child()

    sync_chunks = [
        (node_names(ns), c)
        for ns, c in graph.stream({"x": 0}, stream_mode="updates", subgraphs=True)
    ]
    async_chunks = [
        (node_names(ns), c)
        async for ns, c in graph.astream(
            {"x": 0}, stream_mode="updates", subgraphs=True
        )
    ]

    assert async_chunks == sync_chunks


def mixed_graph() -> Any:
    async def slow(state: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"log": ["async"]}

    def fast(state: Any) -> dict[str, Any]:
        return {"log": ["sync"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("slow", slow)
    builder.add_node("fast", fast)
    builder.add_node("join", lambda s: {"x": len(s["log"])})
    builder.add_edge(START, "slow")
    builder.add_edge(START, "fast")
    builder.add_edge(["slow", "fast"], "join")
    return builder.compile()


async def test_ainvoke_runs_async_and_sync_nodes_together() -> None:
    graph = mixed_graph()

    result = await graph.ainvoke({"x": 0})

    # writes apply in path order ("fast" < "slow"), whichever node finished first
    assert result == {"x": 2, "log": ["sync", "async"]}


def test_invoke_runs_async_nodes_too() -> None:
    # Issue 3: sync and async graphs alike through invoke (LangGraph refuses async
    # nodes under invoke with a TypeError).
    assert mixed_graph().invoke({"x": 0})["x"] == 2


async def test_astream_updates_of_parallel_async_and_sync_nodes() -> None:
    chunks = [c async for c in mixed_graph().astream({"x": 0}, stream_mode="updates")]

    assert sorted(map(str, chunks[:2])) == [
        "{'fast': {'log': ['sync']}}",
        "{'slow': {'log': ['async']}}",
    ]
    assert chunks[2:] == [{"join": {"x": 2}}]


def test_batch_invokes_once_per_input() -> None:
    graph = plain_graph()

    assert graph.batch([{"x": 1}, {"x": 5}]) == [
        {"x": 2, "log": ["a", "b"]},
        {"x": 6, "log": ["a", "b"]},
    ]


def test_batch_return_exceptions_keeps_going() -> None:
    graph = plain_graph(strict_input=True)  # so the unknown key "bad" fails

    results = graph.batch([{"x": 1}, {"x": 1, "bad": 0}], return_exceptions=True)

    assert results[0] == {"x": 2, "log": ["a", "b"]}
    assert isinstance(results[1], Exception)


async def test_abatch_matches_batch() -> None:
    graph = mixed_graph()

    results = await graph.abatch([{"x": 0}, {"x": 5}])

    assert [r["x"] for r in results] == [2, 2]
    assert results == graph.batch([{"x": 0}, {"x": 5}])


async def test_ainvoke_matches_invoke() -> None:
    graph = plain_graph()

    assert await graph.ainvoke({"x": 3}) == graph.invoke({"x": 3})


# -- config and runtime ------------------------------------------------------------------


@dataclasses.dataclass
class Ctx:
    user: str


def test_get_config_inside_a_node_sees_the_call_config() -> None:
    seen: dict[str, Any] = {}

    def node(state: Any) -> dict[str, Any]:
        config = get_config()
        seen["extra"] = config["configurable"].get("extra")
        seen["limit"] = config.get("recursion_limit")
        return {}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.compile().invoke(
        {"x": 0}, {"configurable": {"extra": "e"}, "recursion_limit": 7}
    )

    assert seen == {"extra": "e", "limit": 7}


def test_config_parameter_is_injected() -> None:
    def node(state: Any, config: Any) -> dict[str, Any]:
        return {"log": [config["configurable"]["extra"]]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")

    result = builder.compile().invoke({"x": 0}, {"configurable": {"extra": "E"}})

    assert result == {"x": 0, "log": ["E"]}


def test_get_config_outside_a_run_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError):
        get_config()


def test_get_stream_writer_outside_a_run_is_a_no_op() -> None:
    get_stream_writer()("ignored")


def test_runtime_parameter_and_get_runtime_see_the_context() -> None:
    def node(state: Any, runtime: Runtime[Ctx]) -> dict[str, Any]:
        return {"log": [runtime.context.user, get_runtime().context.user]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState, context_schema=Ctx)
    builder.add_node("node", node)
    builder.add_edge(START, "node")

    result = builder.compile().invoke({"x": 0}, context=Ctx(user="ann"))

    assert result == {"x": 0, "log": ["ann", "ann"]}


async def test_runtime_context_reaches_async_nodes() -> None:
    async def node(state: Any, runtime: Runtime[Ctx]) -> dict[str, Any]:
        return {"log": [runtime.context.user]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState, context_schema=Ctx)
    builder.add_node("node", node)
    builder.add_edge(START, "node")

    result = await builder.compile().ainvoke({"x": 0}, context=Ctx(user="bo"))

    assert result == {"x": 0, "log": ["bo"]}


def test_get_runtime_outside_a_run_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError):
        get_runtime()

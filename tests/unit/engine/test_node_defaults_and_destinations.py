"""``StateGraph.set_node_defaults``, ``add_node(trace_policy=...)`` and the edges a
``Command(goto=...)`` node declares (``destinations=`` or ``-> Command[Literal[...]]``).

As LangGraph 1.2 documents them: defaults apply at compile time to every node
that does not set its own policy (a node's own always wins); a default timeout
needs async nodes; declared destinations are drawn as conditional edges and
only drawn (the node may still go anywhere). Checked on LangGraph 1.2.24.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

from engine.cache.memory import InMemoryCache
from engine.errors import NodeTimeoutError
from engine.graph import END, START, StateGraph
from engine.types import (
    CachePolicy,
    Command,
    RetryPolicy,
    TracePolicy,
    omit_payload,
)
from tests._support.graphs import LogState, appender

FAST = {"initial_interval": 0.001, "jitter": False, "retry_on": ValueError}


def failing(times: int, calls: list[str], label: str) -> Any:
    def node(state: LogState) -> dict[str, Any]:
        calls.append(label)
        if calls.count(label) <= times:
            raise ValueError(label)
        return {"log": [label]}

    return node


# -- set_node_defaults ------------------------------------------------------------------


def test_a_default_retry_policy_applies_to_nodes_without_their_own() -> None:
    calls: list[str] = []
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("flaky", failing(2, calls, "flaky"))
    builder.set_node_defaults(retry_policy=RetryPolicy(max_attempts=5, **FAST))
    builder.add_node(
        "own",
        failing(1, calls, "own"),
        retry_policy=RetryPolicy(max_attempts=1, **FAST),
    )
    builder.add_edge(START, "flaky")
    builder.add_edge(START, "own")

    with pytest.raises(ValueError, match="own"):
        builder.compile().invoke({"x": 0, "log": []})

    assert calls.count("flaky") == 3  # the default: retried until it worked
    assert calls.count("own") == 1  # its own policy wins: one attempt


def test_a_default_error_handler_catches_a_failing_node() -> None:
    def broken(state: LogState) -> dict[str, Any]:
        raise KeyError("broken")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.set_node_defaults(error_handler=lambda state: {"log": ["handled"]})
    builder.add_node("broken", broken)
    builder.add_edge(START, "broken")

    assert builder.compile().invoke({"x": 0, "log": []}) == {
        "x": 0,
        "log": ["handled"],
    }


def test_a_default_cache_policy_caches_nodes_without_their_own() -> None:
    calls: list[int] = []

    def slow(state: LogState) -> dict[str, Any]:
        calls.append(state["x"])
        return {"log": ["slow"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.set_node_defaults(cache_policy=CachePolicy())
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    graph = builder.compile(cache=InMemoryCache())

    graph.invoke({"x": 1, "log": []})
    graph.invoke({"x": 1, "log": []})

    assert calls == [1]


def test_a_default_timeout_needs_async_nodes() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.set_node_defaults(timeout=5)
    builder.add_node("sync", appender("sync"))
    builder.add_edge(START, "sync")

    with pytest.raises(ValueError, match="sync"):
        builder.compile()


def test_a_default_timeout_stops_a_slow_async_node() -> None:
    async def slow(state: LogState) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.set_node_defaults(timeout=0.05)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")

    with pytest.raises(NodeTimeoutError):
        asyncio.run(builder.compile().ainvoke({"x": 0, "log": []}))


def test_set_node_defaults_chains_and_a_later_call_keeps_what_it_does_not_give() -> (
    None
):
    calls: list[str] = []
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)

    returned = builder.set_node_defaults(
        retry_policy=RetryPolicy(max_attempts=3, **FAST)
    )
    builder.set_node_defaults(cache_policy=CachePolicy())
    builder.add_node("flaky", failing(1, calls, "flaky"))
    builder.add_edge(START, "flaky")
    graph = builder.compile(cache=InMemoryCache())
    graph.invoke({"x": 0, "log": []})
    graph.invoke({"x": 0, "log": []})

    assert returned is builder
    assert calls == ["flaky", "flaky"]  # retried once (the first call), then cached


def test_drawing_marks_the_policies_a_node_gets_from_the_defaults() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.set_node_defaults(retry_policy=RetryPolicy())
    builder.add_node("a", appender("a"))
    builder.add_edge(START, "a")

    assert "retry" in builder.compile().get_graph().nodes["a"].markers


# -- trace_policy -----------------------------------------------------------------------


def test_a_trace_policy_is_accepted_and_changes_nothing_in_a_run() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node(
        "a",
        appender("a"),
        trace_policy=TracePolicy(process_inputs=omit_payload),
    )
    builder.add_edge(START, "a")

    assert builder.compile().invoke({"x": 0, "log": []}) == {"x": 0, "log": ["a"]}
    assert omit_payload({"huge": "history"}) == {}


# -- destinations ---------------------------------------------------------------------------


def go_b_or_c(state: LogState) -> Command[Literal["b", "c"]]:
    return Command(goto="b")


def maybe_b(state: LogState) -> Command[Literal["b", "__end__"]] | None:
    return Command(goto="b")


class GoToB:
    def __call__(self, state: LogState) -> Command[Literal["b"]]:
        return Command(goto="b")


def edges(graph: Any) -> set[tuple[str, str, str | None, bool]]:
    return {
        (e.source, e.target, e.data, e.conditional) for e in graph.get_graph().edges
    }


def test_command_literal_annotations_are_drawn_as_conditional_edges() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", go_b_or_c)
    builder.add_node("b", appender("b"))
    builder.add_node("c", appender("c"))
    builder.add_node("d", maybe_b)
    builder.add_node("e", GoToB())
    builder.add_edge(START, "a")
    builder.add_edge("c", "d")
    builder.add_edge("b", "e")

    drawn = edges(builder.compile())

    assert {
        ("a", "b", None, True),
        ("a", "c", None, True),
        ("d", "b", None, True),
        ("d", END, None, True),
        ("e", "b", None, True),
    } <= drawn
    assert ("a", END, None, False) not in drawn  # a routes itself: no default END


def test_destinations_given_to_add_node_win_and_label_edges() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", go_b_or_c, destinations={"b": "approve", "c": "reject"})
    builder.add_node("b", appender("b"))
    builder.add_node("c", appender("c"))
    builder.add_edge(START, "a")
    graph = builder.compile()

    assert {("a", "b", "approve", True), ("a", "c", "reject", True)} <= edges(graph)
    mermaid = graph.get_graph().draw_mermaid()
    assert "a -. &nbsp;approve&nbsp; .-> b;" in mermaid
    assert "a -. &nbsp;reject&nbsp; .-> c;" in mermaid


def test_destinations_are_only_drawn_the_node_may_go_elsewhere() -> None:
    def elsewhere(state: LogState) -> Command[Literal["b"]]:
        return Command(goto="c")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", elsewhere)
    builder.add_node("b", appender("b"))
    builder.add_node("c", appender("c"))
    builder.add_edge(START, "a")

    assert builder.compile().invoke({"x": 0, "log": []})["log"] == ["c"]


def test_a_destination_that_is_not_a_node_is_refused_at_compile() -> None:
    def ghost(state: LogState) -> Command[Literal["ghost"]]:
        return Command(goto="ghost")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", ghost)
    builder.add_edge(START, "a")

    with pytest.raises(ValueError, match="ghost"):
        builder.compile()

"""``stream_events(stream_mode=...)``: the typed event stream also carries the chunks
of the requested stream modes, as ``StreamPart`` events, exactly as ``stream()``
yields them (same payloads, same order), subgraph chunks only with ``subgraphs=True``.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine import events as ev
from engine.checkpoint.memory import InMemorySaver
from engine.config import get_stream_writer
from engine.graph import START, StateGraph
from engine.types import Command
from tests._support.graphs import LogState, appender, chain, interrupt_chain, thread

VOLATILE = frozenset({"id", "checkpoint_id", "timestamp", "ts"})


def scrub(value: Any) -> Any:
    """Ids and timestamps replaced with a placeholder, recursively."""
    if isinstance(value, dict):
        return {k: "<id>" if k in VOLATILE else scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub(v) for v in value)
    return value


def writer_graph(**compile_kwargs: Any) -> Any:
    """START -> a (writes a custom chunk) -> b."""

    def a(state: LogState) -> dict[str, Any]:
        get_stream_writer()({"progress": "a"})
        return {"x": state["x"] + 1, "log": ["a"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", a)
    builder.add_node("b", appender("b"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder.compile(**compile_kwargs)


def parent_with_child() -> Any:
    child = chain(["c1", "c2"]).compile()
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("p1", appender("p1"))
    builder.add_node("child", child)
    builder.add_edge(START, "p1")
    builder.add_edge("p1", "child")
    return builder.compile()


def parts(events: Any) -> list[tuple[tuple[str, ...], str, Any]]:
    return [(e.ns, e.mode, e.payload) for e in events if isinstance(e, ev.StreamPart)]


def names(ns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.split(":", 1)[0] for part in ns)


MODES: list[list[Any]] = [
    ["values"],
    ["updates"],
    ["custom"],
    ["updates", "values"],
    ["values", "updates", "custom", "tasks", "debug", "checkpoints"],
]


@pytest.mark.parametrize("modes", MODES, ids=lambda m: "+".join(m))
def test_parts_are_what_stream_yields(modes: list[Any]) -> None:
    streamed = writer_graph(checkpointer=InMemorySaver())
    evented = writer_graph(checkpointer=InMemorySaver())

    expected = [
        scrub(chunk)
        for chunk in streamed.stream({"x": 0, "log": []}, thread(), stream_mode=modes)
    ]
    got = [
        scrub((mode, payload))
        for _, mode, payload in parts(
            evented.stream_events({"x": 0, "log": []}, thread(), stream_mode=modes)
        )
    ]

    assert got == expected


def test_a_single_mode_string_is_accepted() -> None:
    graph = writer_graph()

    got = parts(graph.stream_events({"x": 0, "log": []}, stream_mode="updates"))

    assert [payload for _, _, payload in got] == list(
        graph.stream({"x": 0, "log": []}, stream_mode="updates")
    )


def test_without_stream_mode_there_are_no_parts_and_the_events_are_unchanged() -> None:
    graph = writer_graph()

    plain = list(graph.stream_events({"x": 0, "log": []}))
    with_parts = list(graph.stream_events({"x": 0, "log": []}, stream_mode="values"))

    assert not parts(plain)
    kinds = [type(e).__name__ for e in plain]
    assert [
        type(e).__name__ for e in with_parts if not isinstance(e, ev.StreamPart)
    ] == kinds
    assert kinds[-1] == "RunFinished"


def test_custom_chunks_stay_typed_events_too() -> None:
    events = list(
        writer_graph().stream_events({"x": 0, "log": []}, stream_mode="custom")
    )

    customs = [e.payload for e in events if isinstance(e, ev.Custom)]
    assert customs == [{"progress": "a"}]
    assert parts(events) == [((), "custom", {"progress": "a"})]
    index = next(i for i, e in enumerate(events) if isinstance(e, ev.StreamPart))
    assert isinstance(events[index + 1], ev.Custom)  # the part comes just before it


def test_interrupt_ends_with_updates_then_values_carrying_it() -> None:
    graph = interrupt_chain().compile(checkpointer=InMemorySaver())

    got = parts(
        graph.stream_events(
            {"x": 0, "log": []}, thread(), stream_mode=["updates", "values"]
        )
    )

    assert [mode for _, mode, _ in got] == [
        "values",
        "updates",
        "values",
        "updates",
        "values",
    ]
    (interrupt,) = got[3][2]["__interrupt__"]
    assert interrupt.value == {"q": "name?"}
    assert got[4][2]["__interrupt__"] == (interrupt,)
    assert got[4][2]["log"] == ["pre"]

    resumed = parts(
        graph.stream_events(Command(resume="ada"), thread(), stream_mode="updates")
    )
    assert [payload for _, _, payload in resumed] == [
        {"ask": {"log": ["ans:ada"]}},
        {"post": {"log": ["post"]}},
    ]


def test_subgraph_parts_only_with_subgraphs() -> None:
    graph = parent_with_child()
    modes: list[Any] = ["updates", "values"]

    hidden = parts(graph.stream_events({"x": 0, "log": []}, stream_mode=modes))
    shown = parts(
        graph.stream_events({"x": 0, "log": []}, stream_mode=modes, subgraphs=True)
    )

    assert all(ns == () for ns, _, _ in hidden)
    assert [(names(ns), mode, p) for ns, mode, p in shown] == [
        (names(ns), mode, p)
        for ns, mode, p in graph.stream(
            {"x": 0, "log": []}, stream_mode=modes, subgraphs=True
        )
    ]
    assert ("child",) in {names(ns) for ns, _, _ in shown}
    # the typed events name the subgraph's tasks either way
    started = [
        names(e.ns)
        for e in graph.stream_events({"x": 0, "log": []}, stream_mode=modes)
        if isinstance(e, ev.TaskStarted)
    ]
    assert ("child",) in started


def test_a_failing_run_yields_its_parts_then_run_finished_then_raises() -> None:
    def boom(state: Any) -> dict[str, Any]:
        raise ValueError("no")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", appender("a"))
    builder.add_node("boom", boom)
    builder.add_edge(START, "a")
    builder.add_edge("a", "boom")
    seen: list[Any] = []

    with pytest.raises(ValueError, match="no"):
        for event in builder.compile().stream_events(
            {"x": 0, "log": []}, stream_mode="updates"
        ):
            seen.append(event)

    assert parts(seen) == [((), "updates", {"a": {"log": ["a"]}})]
    assert isinstance(seen[-1], ev.RunFinished) and seen[-1].status == "error"


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="Unknown stream_mode"):
        list(writer_graph().stream_events({"x": 0, "log": []}, stream_mode="events"))  # type: ignore[arg-type]


async def test_astream_events_matches_stream_events() -> None:
    graph = parent_with_child()
    modes: list[Any] = ["updates", "values", "custom"]

    sync_parts = [
        (names(ns), mode, p)
        for ns, mode, p in parts(
            graph.stream_events({"x": 0, "log": []}, stream_mode=modes, subgraphs=True)
        )
    ]
    async_parts = [
        (names(e.ns), e.mode, e.payload)
        async for e in graph.astream_events(
            {"x": 0, "log": []}, stream_mode=modes, subgraphs=True
        )
        if isinstance(e, ev.StreamPart)
    ]

    assert async_parts == sync_parts
    assert async_parts

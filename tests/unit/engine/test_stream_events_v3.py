"""``stream_events(version="v3")`` / ``astream_events(version="v3")`` on real graphs.

Every expectation below is what LangGraph 1.2.24 gives for the same graph
(observed by running it): the event log, the projections, subgraph handles,
lifecycle payloads, run results, and the errors.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, TypedDict

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.config import get_stream_writer
from engine.graph import START, StateGraph
from engine.stream import (
    AsyncGraphRunStream,
    AsyncSubgraphRunStream,
    CheckpointsTransformer,
    CustomTransformer,
    DebugTransformer,
    GraphRunStream,
    ProtocolEvent,
    StreamChannel,
    StreamTransformer,
    SubgraphRunStream,
    TasksTransformer,
    UpdatesTransformer,
)
from engine.types import Command, interrupt


class S(TypedDict):
    x: int


def inc(state: S) -> dict[str, Any]:
    get_stream_writer()({"p": state["x"]})
    return {"x": state["x"] + 1}


def boom(state: S) -> dict[str, Any]:
    raise ValueError("bad")


def ask(state: S) -> dict[str, Any]:
    return {"x": interrupt("q?")}


def chain(*fns: Any, **compile_kw: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(S)
    prev = START
    for i, fn in enumerate(fns):
        node = f"n{i}"
        builder.add_node(node, fn)
        builder.add_edge(prev, node)
        prev = node
    return builder.compile(**compile_kw)


def with_sub(sub: Any, *after: Any, name: str = "sub", **compile_kw: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(S)
    builder.add_node(name, sub)
    builder.add_edge(START, name)
    prev = name
    for fn in after:
        builder.add_node(fn.__name__, fn)
        builder.add_edge(prev, fn.__name__)
        prev = fn.__name__
    return builder.compile(**compile_kw)


def ids(value: Any) -> str:
    return re.sub(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "ID",
        repr(value),
    )


def brief(events: list[ProtocolEvent]) -> list[tuple[Any, ...]]:
    return [
        (
            e.get("seq"),
            e["method"],
            ids(e["params"]["namespace"]),
            ids(e["params"]["data"]),
        )
        for e in events
    ]


def test_default_run_has_values_messages_lifecycle_subgraphs() -> None:
    graph = with_sub(chain(inc), name="sub")
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(S)
    builder.add_node("a", inc)
    builder.add_node("sub", chain(inc))
    builder.add_edge(START, "a")
    builder.add_edge("a", "sub")
    graph = builder.compile()

    run = graph.stream_events({"x": 1}, version="v3")

    assert isinstance(run, GraphRunStream)
    assert sorted(run.extensions) == ["lifecycle", "messages", "subgraphs", "values"]
    events = list(run)
    assert brief(events) == [
        (1, "values", "[]", "{'x': 1}"),
        (2, "values", "[]", "{'x': 2}"),
        (3, "values", "['sub:ID']", "{'x': 2}"),
        (
            4,
            "lifecycle",
            "[]",
            "{'event': 'started', 'namespace': ['sub:ID'], 'graph_name': 'sub', 'trigger_call_id': 'ID'}",
        ),
        (5, "values", "['sub:ID']", "{'x': 3}"),
        (6, "lifecycle", "[]", "{'event': 'completed', 'namespace': ['sub:ID']}"),
        (7, "values", "[]", "{'x': 3}"),
    ]
    assert events[0]["type"] == "event" and events[0]["params"]["interrupts"] == ()
    ns = events[2]["params"]["namespace"][0]
    assert events[3]["params"]["data"]["trigger_call_id"] == ns.split(":", 1)[1]
    assert run.output == {"x": 3}
    assert run.interrupted is False and run.interrupts == []


def test_call_transformers_named_channels_and_opt_in_projections() -> None:
    class Counter(StreamTransformer):
        required_stream_modes = ("updates",)

        def __init__(self, scope: tuple[str, ...] = ()) -> None:
            super().__init__(scope)
            self.channel: StreamChannel[int] = StreamChannel("counts")
            self.n = 0

        def init(self) -> dict[str, Any]:
            return {"counts": self.channel}

        def process(self, e: ProtocolEvent) -> bool:
            if e["method"] == "updates":
                self.n += 1
                self.channel.push(self.n)
            return True

    graph = chain(inc, inc)
    run = graph.stream_events(
        {"x": 1},
        version="v3",
        transformers=[Counter, UpdatesTransformer, CustomTransformer],
    )

    assert sorted(run.extensions) == [
        "counts",
        "custom",
        "lifecycle",
        "messages",
        "subgraphs",
        "updates",
        "values",
    ]
    assert not hasattr(run, "counts") and hasattr(
        run, "updates"
    )  # only natives are attributes
    methods = [(e["method"], e["params"]["data"]) for e in run]
    assert methods == [
        ("values", {"x": 1}),
        ("custom", {"p": 1}),
        ("custom:counts", 1),  # forwarded before the event that caused it
        ("updates", {"n0": {"x": 2}}),
        ("values", {"x": 2}),
        ("custom", {"p": 2}),
        ("custom:counts", 2),
        ("updates", {"n1": {"x": 3}}),
        ("values", {"x": 3}),
    ]


def test_compile_transformers_add_projections_to_every_run() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(S)
    builder.add_node("inc", inc)
    builder.add_edge(START, "inc")
    graph = builder.compile(
        transformers=[
            UpdatesTransformer,
            CustomTransformer,
            TasksTransformer,
            CheckpointsTransformer,
            DebugTransformer,
        ]
    )

    run = graph.stream_events({"x": 1}, version="v3")

    assert sorted(run.extensions) == [
        "checkpoints",
        "custom",
        "debug",
        "lifecycle",
        "messages",
        "subgraphs",
        "tasks",
        "updates",
        "values",
    ]
    # subscribe to every projection before reading: items pushed before a
    # projection has a subscriber are not kept for it
    cursors = {
        key: iter(run.extensions[key])
        for key in ("tasks", "custom", "updates", "checkpoints", "debug")
    }
    tasks = list(cursors["tasks"])
    assert [sorted(t) for t in tasks] == [
        ["id", "input", "name", "triggers"],
        ["error", "id", "interrupts", "name", "result"],
    ]
    assert list(cursors["custom"]) == [{"p": 1}]
    assert list(cursors["updates"]) == [{"inc": {"x": 2}}]
    assert list(cursors["checkpoints"]) == []  # no checkpointer
    assert len(list(cursors["debug"])) == 2
    assert list(run.values) == []  # subscribed after the run ended


def nested() -> Any:
    inner = chain(inc, name="inner")
    mid = with_sub(inner, name="inner")
    return with_sub(mid, inc, name="mid")


def test_lifecycle_is_flat_over_every_depth() -> None:
    run = nested().stream_events({"x": 1}, version="v3")
    assert ids(list(run.lifecycle)) == ids(
        [
            {
                "event": "started",
                "namespace": ["mid:ID"],
                "graph_name": "mid",
                "trigger_call_id": "ID",
            },
            {
                "event": "started",
                "namespace": ["mid:ID", "inner:ID"],
                "graph_name": "inner",
                "trigger_call_id": "ID",
            },
            {"event": "completed", "namespace": ["mid:ID", "inner:ID"]},
            {"event": "completed", "namespace": ["mid:ID"]},
        ]
    )


def test_subgraph_handles_nest_and_report_their_status() -> None:
    run = nested().stream_events({"x": 1}, version="v3")
    seen = []
    for handle in run.subgraphs:
        assert isinstance(handle, SubgraphRunStream)
        assert handle.status == "started" and handle.graph_name == "mid"
        assert handle.trigger_call_id == handle.path[0].split(":", 1)[1]
        for grandchild in handle.subgraphs:
            seen.append(
                (
                    len(grandchild.path),
                    grandchild.graph_name,
                    list(grandchild.values),
                    grandchild.status,
                )
            )
        seen.append((len(handle.path), handle.graph_name, handle.status, handle.output))
    assert seen == [
        (2, "inner", [{"x": 2}], "completed"),
        (1, "mid", "completed", {"x": 2}),
    ]
    assert run.output == {"x": 3}


def test_a_failing_subgraph_fails_its_handle_the_projections_and_the_run() -> None:
    graph = with_sub(chain(inc, boom), name="sub")

    run = graph.stream_events({"x": 1}, version="v3")
    methods = []
    with pytest.raises(ValueError, match="bad"):
        for e in run:
            methods.append(e["method"])
    assert methods == ["values", "values", "lifecycle", "values", "lifecycle"]
    with pytest.raises(ValueError, match="bad"):
        _ = run.output

    run = graph.stream_events({"x": 1}, version="v3")
    statuses = []
    with pytest.raises(ValueError, match="bad"):
        for handle in run.subgraphs:
            with pytest.raises(RuntimeError):
                list(handle.values)
            statuses.append(handle.status)
    assert statuses == ["failed"]


def test_interrupts_and_resume() -> None:
    graph = with_sub(chain(inc, ask), name="sub", checkpointer=InMemorySaver())
    config: dict[str, Any] = {"configurable": {"thread_id": "1"}}

    run = graph.stream_events({"x": 1}, config, version="v3")
    lifecycle = [p["event"] for p in run.lifecycle]
    assert lifecycle == ["started", "interrupted"]
    assert run.interrupted is True
    assert [i.value for i in run.interrupts] == ["q?"]
    assert run.output == {"x": 1}

    run = graph.stream_events(Command(resume=9), config, version="v3")
    assert [p["event"] for p in run.lifecycle] == ["started", "completed"]
    assert run.output == {"x": 9} and run.interrupted is False


def test_static_breakpoint_is_not_an_interrupt_of_the_run_stream() -> None:
    graph = chain(inc, inc, checkpointer=InMemorySaver(), interrupt_before=["n1"])
    run = graph.stream_events(
        {"x": 1}, {"configurable": {"thread_id": "2"}}, version="v3"
    )
    assert [e["params"]["data"] for e in run] == [{"x": 1}, {"x": 2}]
    assert (run.interrupted, run.interrupts, run.output) == (False, [], {"x": 2})


def test_options_the_protocol_refuses() -> None:
    graph = chain(inc)
    with pytest.raises(TypeError, match="do not accept stream_mode"):
        graph.stream_events({"x": 1}, version="v3", stream_mode="values")
    with pytest.raises(TypeError, match="do not accept subgraphs"):
        graph.stream_events({"x": 1}, version="v3", subgraphs=True)
    with pytest.raises(TypeError, match="pre-built instance UpdatesTransformer"):
        graph.stream_events({"x": 1}, version="v3", transformers=[UpdatesTransformer()])
    with pytest.raises(TypeError, match="got int"):
        graph.stream_events({"x": 1}, version="v3", transformers=[3])

    class AsyncOnly(StreamTransformer):
        def init(self) -> dict[str, Any]:
            return {}

        async def aprocess(self, e: ProtocolEvent) -> bool:
            return True

    with pytest.raises(RuntimeError, match="requires an async run"):
        graph.stream_events({"x": 1}, version="v3", transformers=[AsyncOnly])

    run = graph.stream_events({"x": 1}, version="v3")
    with pytest.raises(
        AttributeError,
        match=r"registered projections: lifecycle, messages, subgraphs, values",
    ):
        run.nope  # noqa: B018
    cursor = iter(run.values)
    with pytest.raises(RuntimeError, match="already has a subscriber"):
        iter(run.values)
    assert list(cursor) == [{"x": 1}, {"x": 2}]


def test_interleave_orders_projections_by_arrival() -> None:
    run = nested().stream_events(
        {"x": 1}, version="v3", transformers=[UpdatesTransformer]
    )
    got = [
        (name, ids(item))
        for name, item in run.interleave("values", "updates", "lifecycle")
    ]
    assert [name for name, _ in got] == [
        "values",
        "lifecycle",
        "lifecycle",
        "lifecycle",
        "updates",
        "lifecycle",
        "values",
        "updates",
        "values",
    ]
    assert got[4] == ("updates", "{'mid': {'x': 2}}")


def test_abort_stops_the_run_and_closes_projections() -> None:
    ran: list[int] = []

    def track(state: S) -> dict[str, Any]:
        ran.append(state["x"])
        return {"x": state["x"] + 1}

    graph = chain(track, track, track)
    with graph.stream_events({"x": 1}, version="v3") as run:
        values = iter(run.values)
        assert next(values) == {"x": 1}
    assert list(values) == []
    assert ran == []  # nothing ran past the first pull


async def test_async_run_stream() -> None:
    graph = nested()
    run = await graph.astream_events({"x": 1}, version="v3")
    assert isinstance(run, AsyncGraphRunStream)
    handles = []
    async for handle in run.subgraphs:
        assert isinstance(handle, AsyncSubgraphRunStream)
        handles.append((handle.graph_name, [v async for v in handle.values]))
    assert handles == [("mid", [{"x": 2}])]  # the handle exists from its first task on
    assert await run.output() == {"x": 3}
    assert await run.interrupted() is False

    run = await graph.astream_events({"x": 1}, version="v3")
    assert [e["method"] async for e in run] == [
        "values",
        "values",
        "lifecycle",
        "values",
        "lifecycle",
        "values",
        "lifecycle",
        "values",
        "lifecycle",
        "values",
        "values",
    ]

    failing = with_sub(chain(inc, boom), name="sub")
    run = await failing.astream_events({"x": 1}, version="v3")
    with pytest.raises(ValueError, match="bad"):
        await run.output()


async def test_async_only_transformers_run_in_async_runs() -> None:
    class Doubler(StreamTransformer):
        required_stream_modes = ("values",)

        def __init__(self, scope: tuple[str, ...] = ()) -> None:
            super().__init__(scope)
            self.out: StreamChannel[int] = StreamChannel()

        def init(self) -> dict[str, Any]:
            return {"doubled": self.out}

        async def aprocess(self, e: ProtocolEvent) -> bool:
            if e["method"] == "values" and not e["params"]["namespace"]:
                await asyncio.sleep(0)
                self.out.push(e["params"]["data"]["x"] * 2)
            return True

    run = await chain(inc).astream_events(
        {"x": 1}, version="v3", transformers=[Doubler]
    )
    assert [d async for d in run.extensions["doubled"]] == [2, 4]

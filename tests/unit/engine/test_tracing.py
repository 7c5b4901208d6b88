"""OpenTelemetry spans of a run: run > step > task, checkpoint saves, retries, pauses, failures."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from engine.checkpoint.memory import InMemorySaver
from engine.graph import END, START, StateGraph
from engine.runtime import get_runtime
from engine.types import Command, RetryPolicy, interrupt


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    fail: bool


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> trace.Tracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("tests")


def build(tracer: trace.Tracer | None = None) -> Any:
    def plan(state: State) -> dict[str, Any]:
        if tracer is not None:
            with tracer.start_as_current_span("inside plan"):
                pass
        return {"log": ["plan"]}

    def flaky(state: State) -> dict[str, Any]:
        info = get_runtime().execution_info
        if info is not None and info.node_attempt == 1:
            raise ConnectionError("first attempt fails")
        return {"log": ["flaky"]}

    def review(state: State) -> dict[str, Any]:
        return {"log": [f"review:{interrupt('go on?')}"]}

    def finish(state: State) -> dict[str, Any]:
        if state.get("fail"):
            raise ValueError("finish failed")
        return {"log": ["finish"]}

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    graph.add_node("plan", plan)
    retry = RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False)
    graph.add_node("flaky", flaky, retry_policy=retry)
    graph.add_node("review", review)
    graph.add_node("finish", finish)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "flaky")
    graph.add_edge("flaky", "review")
    graph.add_edge("review", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=InMemorySaver(), name="observed")


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = named(spans, name)
    return span


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_run_is_traced_run_step_task_and_checkpoint(exporter, tracer) -> None:
    graph = build(tracer)
    config = {"configurable": {"thread_id": "t1"}, "run_id": "r1", "tracer": tracer}

    with tracer.start_as_current_span("POST /api/runs") as request:
        result = graph.invoke({"fail": True}, config)

    assert result["log"] == ["plan", "flaky"]
    spans = list(exporter.get_finished_spans())
    run = one(spans, "run observed")
    assert parent_of(run) == request.get_span_context().span_id
    assert run.context.trace_id == request.get_span_context().trace_id
    assert run.attributes["engine.thread_id"] == "t1"
    assert run.attributes["engine.status"] == "interrupted"
    assert run.attributes["engine.interrupts"] == 1

    steps = {
        s.attributes["engine.step"]: s for s in spans if s.name.startswith("step ")
    }
    assert sorted(steps) == [0, 1, 2, 3]  # input step, plan, flaky, review
    assert not named(spans, "task __start__")  # the input's bookkeeping task
    assert all(parent_of(s) == run.context.span_id for s in steps.values())

    plan, flaky, review = (one(spans, f"task {n}") for n in ("plan", "flaky", "review"))
    assert parent_of(plan) == steps[1].context.span_id
    assert plan.attributes["engine.node"] == "plan"
    assert plan.attributes["engine.attempts"] == 1
    assert plan.attributes["engine.cache_hit"] is False
    assert parent_of(one(spans, "inside plan")) == plan.context.span_id

    assert parent_of(flaky) == steps[2].context.span_id
    assert flaky.attributes["engine.attempts"] == 2
    assert flaky.attributes["engine.retries"] == 1
    (retry,) = flaky.events
    assert retry.name == "retry"
    assert retry.attributes["exception.type"] == "ConnectionError"
    assert flaky.status.status_code == StatusCode.UNSET

    assert review.attributes["engine.interrupt"] is True
    assert review.status.status_code == StatusCode.UNSET

    saves = named(spans, "checkpoint save")
    assert saves
    by_step = {s.attributes["engine.step"]: s for s in saves}
    assert parent_of(by_step[1]) == steps[1].context.span_id
    assert (
        by_step[1].attributes["engine.checkpoint_id"]
        == steps[1].attributes["engine.checkpoint_id"]
    )
    assert all(s.context.trace_id == run.context.trace_id for s in spans)


def test_a_failed_run_marks_its_task_and_run_spans(exporter, tracer) -> None:
    graph = build()
    config = {"configurable": {"thread_id": "t2"}, "tracer": tracer}
    graph.invoke({"fail": True}, config)
    exporter.clear()

    with pytest.raises(ValueError, match="finish failed"):
        graph.invoke(Command(resume="yes"), config)

    spans = list(exporter.get_finished_spans())
    run = one(spans, "run observed")
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["engine.status"] == "error"
    assert run.attributes["engine.resumed"] is True
    finish = one(spans, "task finish")
    assert finish.status.status_code == StatusCode.ERROR
    assert finish.events[0].name == "exception"
    assert finish.events[0].attributes["exception.type"] == "ValueError"
    assert one(spans, "task review").attributes["engine.interrupt"] is False


def test_subgraph_runs_nest_under_the_calling_task(exporter, tracer) -> None:
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    inner.add_node("leaf", lambda state: {"log": ["leaf"]})
    inner.add_edge(START, "leaf")
    outer: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    outer.add_node("child", inner.compile(name="inner"))
    outer.add_edge(START, "child")
    graph = outer.compile(name="outer")

    assert graph.invoke({"log": []}, {"tracer": tracer}) == {"log": ["leaf"]}

    spans = list(exporter.get_finished_spans())
    child_task = one(spans, "task child")
    inner_run = one(spans, "run inner")
    assert parent_of(inner_run) == child_task.context.span_id
    assert one(spans, "task leaf").context.trace_id == child_task.context.trace_id


def test_async_runs_are_traced_too(exporter, tracer) -> None:
    graph = build()
    config = {"configurable": {"thread_id": "t3"}, "tracer": tracer}

    asyncio.run(graph.ainvoke({"fail": False}, config))

    spans = list(exporter.get_finished_spans())
    assert one(spans, "task flaky").attributes["engine.attempts"] == 2
    assert one(spans, "run observed").attributes["engine.status"] == "interrupted"


def test_streams_are_unchanged_by_tracing(exporter, tracer) -> None:
    plain = list(build().stream({}, {"configurable": {"thread_id": "a"}}))
    traced = list(
        build().stream({}, {"configurable": {"thread_id": "b"}, "tracer": tracer})
    )

    def comparable(chunks: list[dict]) -> list[dict]:
        return [
            {
                k: [i.value for i in v] if k == "__interrupt__" else v
                for k, v in c.items()
            }
            for c in chunks
        ]

    assert comparable(traced) == comparable(plain)
    assert [list(c) for c in plain] == [["plan"], ["flaky"], ["__interrupt__"]]
    assert exporter.get_finished_spans()


def test_without_a_tracer_nothing_is_traced(exporter, tracer) -> None:
    build().invoke({}, {"configurable": {"thread_id": "t4"}})

    assert exporter.get_finished_spans() == ()

"""Functional API: ``interrupt()`` in an ``@entrypoint`` and in a ``@task``, and streams.

Written from LangGraph 1.2's documented behaviour: a ``@task`` call is a task of
its own; an ``interrupt()`` inside it pauses the run, ``Command(resume=...)``
answers it (the task runs again from its start, ``interrupt()`` returns the
answer), tasks that finished are not run again, and the entrypoint's own
interrupts get their own answers. ``stream_mode="updates"`` yields each task's
result as ``{task_name: result}`` when it finishes, then the entrypoint's.
Each test runs on every checkpointer backend (the ``saver`` fixture).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, TypedDict

from engine.func import entrypoint, task
from engine.graph import START, StateGraph
from engine.types import Command, Interrupt, interrupt


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def test_interrupt_in_a_task_then_in_the_entrypoint_each_gets_its_answer(
    saver,
) -> None:
    runs: Counter[str] = Counter()

    @task
    def prepare(x: str) -> str:
        runs["prepare"] += 1
        return f"{x}-prepared"

    @task
    def review(x: str) -> str:
        runs["review"] += 1
        return f"{x}/{interrupt({'review': x})}"

    @entrypoint(checkpointer=saver)
    def flow(x: str) -> dict[str, Any]:
        prepared = prepare(x).result()
        reviewed = review(prepared).result()
        approved = interrupt("approve?")
        return {"reviewed": reviewed, "approved": approved}

    first = flow.invoke("doc", thread())
    second = flow.invoke(Command(resume="looks good"), thread())
    done = flow.invoke(Command(resume="yes"), thread())

    assert [i.value for i in first["__interrupt__"]] == [{"review": "doc-prepared"}]
    assert [i.value for i in second["__interrupt__"]] == ["approve?"]
    assert done == {"reviewed": "doc-prepared/looks good", "approved": "yes"}
    assert runs == {"prepare": 1, "review": 2}  # finished tasks never ran again


def test_a_task_with_two_interrupts_takes_the_answers_in_order(saver) -> None:
    @task
    def ask_twice(x: str) -> str:
        return interrupt(f"first {x}") + interrupt(f"second {x}")

    @entrypoint(checkpointer=saver)
    def flow(x: str) -> str:
        return ask_twice(x).result()

    assert flow.invoke("q", thread())["__interrupt__"][0].value == "first q"
    paused = flow.invoke(Command(resume="A"), thread())
    assert paused["__interrupt__"][0].value == "second q"
    assert flow.invoke(Command(resume="B"), thread()) == "AB"


def test_an_interrupt_in_a_task_is_resumed_by_its_id(saver) -> None:
    @task
    def ask(x: str) -> str:
        return interrupt(x)

    @entrypoint(checkpointer=saver)
    def flow(x: str) -> str:
        return ask(x).result()

    flow.invoke("question", thread())
    (pending,) = flow.get_state(thread()).interrupts

    assert flow.get_state(thread()).next == ("flow",)
    assert flow.invoke(Command(resume={pending.id: "answer"}), thread()) == "answer"


def test_a_task_called_from_a_graph_node_can_interrupt(saver) -> None:
    class State(TypedDict):
        text: str

    @task
    def ask(x: str) -> str:
        return interrupt(x)

    def node(state: State) -> dict[str, Any]:
        return {"text": ask(state["text"]).result() + interrupt("node")}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile(checkpointer=saver)

    assert graph.invoke({"text": "t"}, thread())["__interrupt__"][0].value == "t"
    assert graph.invoke(Command(resume="1"), thread())["__interrupt__"][0].value == (
        "node"
    )
    assert graph.invoke(Command(resume="2"), thread()) == {"text": "12"}


def test_async_tasks_interrupt_and_resume(saver) -> None:
    @task
    async def ask(x: str) -> str:
        return interrupt(x)

    @entrypoint(checkpointer=saver)
    async def flow(x: str) -> str:
        answer = await ask(x)
        return answer + interrupt("more?")

    async def run() -> list[Any]:
        return [
            await flow.ainvoke("q", thread("a")),
            await flow.ainvoke(Command(resume="1"), thread("a")),
            await flow.ainvoke(Command(resume="2"), thread("a")),
        ]

    first, second, done = asyncio.run(run())

    assert first["__interrupt__"][0].value == "q"
    assert second["__interrupt__"][0].value == "more?"
    assert done == "12"


def test_updates_stream_each_task_then_the_entrypoint(saver) -> None:
    @task
    def double(x: int) -> int:
        return x * 2

    @task
    def ask(x: int) -> int:
        return x + interrupt("add?")

    @entrypoint(checkpointer=saver)
    def flow(x: int) -> int:
        doubled = double(x).result()
        return ask(doubled).result()

    first = list(flow.stream(1, thread(), stream_mode="updates"))
    resumed = list(flow.stream(Command(resume=10), thread(), stream_mode="updates"))

    assert first[0] == {"double": 2}
    assert list(first[1]) == ["__interrupt__"]
    assert resumed == [{"ask": 12}, {"flow": 12}]  # finished tasks are not repeated


def test_values_stream_of_a_paused_entrypoint_is_the_interrupt(saver) -> None:
    @entrypoint(checkpointer=saver)
    def flow(x: str) -> str:
        return interrupt(x)

    (chunk,) = list(flow.stream("why?", thread(), stream_mode="values"))

    assert list(chunk) == ["__interrupt__"]
    assert isinstance(chunk["__interrupt__"][0], Interrupt)
    assert chunk["__interrupt__"][0].value == "why?"


def test_tasks_stream_shows_each_call_with_its_input_and_result() -> None:
    @task
    def add(a: int, b: int = 0) -> int:
        return a + b

    @entrypoint()
    def flow(x: int) -> int:
        return add(x, b=2).result()

    chunks = list(flow.stream(1, stream_mode="tasks"))
    calls = [c for c in chunks if c["name"] == "add"]

    assert calls[0]["input"] == ((1,), {"b": 2})
    assert calls[0]["triggers"] == ("__pregel_push",)
    assert calls[1]["result"] == {"__return__": 3}
    assert calls[1]["error"] is None
    assert calls[0]["id"] == calls[1]["id"]

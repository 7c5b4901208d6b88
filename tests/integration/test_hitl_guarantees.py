"""Human-in-the-loop and fault-tolerance guarantees, on every checkpointer backend.

Each test runs against memory, SQLite and Postgres (the ``saver`` fixture).
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

from engine.errors import InvalidResumeError, SerializationError, UnknownInterruptError
from engine.func import entrypoint, task
from engine.graph import END, START, StateGraph
from engine.runtime import Runtime
from engine.types import Command, RetryPolicy, interrupt


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: str


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def history_ids(graph: Any, config: dict[str, Any]) -> list[str]:
    return [
        s.config["configurable"]["checkpoint_id"]
        for s in graph.get_state_history(config)
    ]


def test_code_before_an_interrupt_runs_again_on_resume(saver) -> None:
    effects: Counter[str] = Counter()

    def review(state: State) -> dict[str, Any]:
        effects["before"] += 1  # runs on the first pass and again on resume
        answer = interrupt("approve?")
        effects["after"] += 1
        return {"answer": answer}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node(review)
    builder.add_edge(START, "review")
    graph = builder.compile(checkpointer=saver)

    graph.invoke({"log": []}, thread())
    out = graph.invoke(Command(resume="yes"), thread())

    assert out["answer"] == "yes"
    assert effects == Counter(before=2, after=1)


def test_idempotency_key_is_stable_across_resume(saver) -> None:
    keys: list[str] = []

    def pay(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        keys.append(runtime.idempotency_key())  # pass this to the payment service
        interrupt("confirm payment?")
        return {"log": ["paid"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node(pay)
    builder.add_edge(START, "pay")
    graph = builder.compile(checkpointer=saver)

    graph.invoke({"log": []}, thread())
    graph.invoke(Command(resume=True), thread())

    assert len(keys) == 2 and keys[0] == keys[1]
    assert keys[0].startswith("t/pay:")


def test_idempotency_key_is_stable_across_retries(saver) -> None:
    keys: list[str] = []

    def flaky(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        keys.append(runtime.idempotency_key())
        if len(keys) < 3:
            raise ConnectionError("gateway timeout")
        return {"log": ["done"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node(
        "flaky",
        flaky,
        retry_policy=RetryPolicy(max_attempts=3, initial_interval=0, jitter=False),
    )
    builder.add_edge(START, "flaky")

    builder.compile(checkpointer=saver).invoke({"log": []}, thread())

    assert len(set(keys)) == 1 and len(keys) == 3


def test_retries_never_retry_an_interrupt(saver) -> None:
    runs: Counter[str] = Counter()

    def ask(state: State) -> dict[str, Any]:
        runs["ask"] += 1
        return {"answer": interrupt("name?")}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node(
        "ask",
        ask,
        retry_policy=RetryPolicy(
            max_attempts=5, initial_interval=0, retry_on=Exception
        ),
    )
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=saver)

    out = graph.invoke({"log": []}, thread())

    assert runs["ask"] == 1
    assert [i.value for i in out["__interrupt__"]] == ["name?"]


def test_a_succeeded_sibling_is_not_rerun_when_the_failed_one_is_retried_later(
    saver,
) -> None:
    runs: Counter[str] = Counter()
    broken = {"on": True}

    def ok(state: State) -> dict[str, Any]:
        runs["ok"] += 1
        return {"log": ["ok"]}

    def fragile(state: State) -> dict[str, Any]:
        runs["fragile"] += 1
        if broken["on"]:
            raise RuntimeError("downstream unavailable")
        return {"log": ["fragile"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node(ok)
    builder.add_node(fragile)
    builder.add_node("join", lambda s: {"log": ["join"]})
    builder.add_edge(START, "ok")
    builder.add_edge(START, "fragile")
    builder.add_edge(["ok", "fragile"], "join")
    builder.add_edge("join", END)
    graph = builder.compile(checkpointer=saver)

    with pytest.raises(RuntimeError, match="downstream unavailable"):
        graph.invoke({"log": []}, thread())
    broken["on"] = False
    out = graph.invoke(None, thread())

    assert runs == Counter(ok=1, fragile=2)
    assert sorted(out["log"]) == ["fragile", "join", "ok"]


def test_parallel_interrupts_resume_together_by_id(saver) -> None:
    def ask(label: str) -> Any:
        def node(state: State) -> dict[str, Any]:
            return {"log": [f"{label}:{interrupt(label)}"]}

        return node

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("a", ask("a"))
    builder.add_node("b", ask("b"))
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    graph = builder.compile(checkpointer=saver)

    paused = graph.invoke({"log": []}, thread())
    answers = {i.id: i.value.upper() for i in paused["__interrupt__"]}
    done = graph.invoke(Command(resume=answers), thread())

    assert sorted(done["log"]) == ["a:A", "b:B"]


def test_interrupt_inside_a_subgraph_resumes_from_the_parent(saver) -> None:
    child: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    child.add_node("inner", lambda s: {"answer": interrupt("inner?")})
    child.add_edge(START, "inner")
    parent: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    parent.add_node("sub", child.compile())
    parent.add_edge(START, "sub")
    graph = parent.compile(checkpointer=saver)

    graph.invoke({"log": []}, thread())
    state = graph.get_state(thread(), subgraphs=True)
    out = graph.invoke(Command(resume="42"), thread())

    assert [i.value for i in state.interrupts] == ["inner?"]
    assert out["answer"] == "42"


def test_functional_tasks_are_durable_across_resume(saver) -> None:
    runs: Counter[str] = Counter()

    @task
    def fetch(x: int) -> int:
        runs["fetch"] += 1
        return x * 10

    @entrypoint(checkpointer=saver)
    def flow(n: int) -> dict[str, Any]:
        values = [fetch(i).result() for i in range(n)]
        ok = interrupt({"values": values})
        return {"values": values, "ok": ok}

    flow.invoke(3, thread())
    out = flow.invoke(Command(resume=True), thread())

    assert out == {"values": [0, 10, 20], "ok": True}
    assert runs["fetch"] == 3


def _paused_graph(saver: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("ask", lambda s: {"answer": interrupt("?")})
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=saver)


def test_resuming_a_thread_that_is_not_interrupted_changes_nothing(saver) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("done", lambda s: {"log": ["done"]})
    builder.add_edge(START, "done")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"log": []}, thread())
    before = history_ids(graph, thread())

    with pytest.raises(InvalidResumeError, match="not interrupted"):
        graph.invoke(Command(resume="late"), thread())

    assert history_ids(graph, thread()) == before


def test_unknown_interrupt_id_changes_nothing(saver) -> None:
    graph = _paused_graph(saver)
    graph.invoke({"log": []}, thread())
    before = history_ids(graph, thread())
    pending_before = graph.get_state(thread()).interrupts

    with pytest.raises(UnknownInterruptError, match="not pending"):
        graph.invoke(Command(resume={"0" * 32: "x"}), thread())

    assert history_ids(graph, thread()) == before
    assert graph.get_state(thread()).interrupts == pending_before
    assert graph.invoke(Command(resume="fine"), thread())["answer"] == "fine"


def test_unstorable_interrupt_payload_changes_nothing(saver) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("ask", lambda s: {"answer": interrupt({"handle": object()})})
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=saver)

    with pytest.raises(SerializationError, match="cannot be stored"):
        graph.invoke({"log": []}, thread())

    state = graph.get_state(thread())
    assert state.next == ("ask",) and state.interrupts == ()


def test_retry_policy_with_no_attempts_is_refused() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)

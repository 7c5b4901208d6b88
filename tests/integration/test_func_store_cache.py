"""Functional API, store injection and node caching, end to end on real graphs."""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypedDict

import pytest

from engine.cache.memory import InMemoryCache
from engine.checkpoint.memory import InMemorySaver
from engine.config import get_store
from engine.errors import SerializationError
from engine.func import entrypoint, task
from engine.graph import START, StateGraph
from engine.runtime import Runtime
from engine.store.memory import InMemoryStore
from engine.types import CachePolicy, Command, RetryPolicy, interrupt


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def test_entrypoint_tasks_run_in_parallel_and_are_not_rerun_on_resume() -> None:
    calls: dict[str, int] = {"slow": 0}

    @task
    def slow(x: int) -> int:
        calls["slow"] += 1
        time.sleep(0.05)
        return x * 2

    @entrypoint(checkpointer=InMemorySaver())
    def workflow(n: int) -> dict[str, Any]:
        started = time.monotonic()
        values = [f.result() for f in [slow(i) for i in range(4)]]
        took = time.monotonic() - started
        answer = interrupt({"total": sum(values)})
        return {"values": values, "answer": answer, "parallel": took < 0.15}

    paused = workflow.invoke(4, thread())
    done = workflow.invoke(Command(resume="yes"), thread())

    assert paused["__interrupt__"][0].value == {"total": 12}
    assert done == {"values": [0, 2, 4, 6], "answer": "yes", "parallel": True}
    assert calls["slow"] == 4  # the resumed entrypoint got the saved results


def test_entrypoint_previous_and_final() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def counter(step: int, *, previous: int | None = None) -> Any:
        total = (previous or 0) + step
        return entrypoint.final(value=f"total={total}", save=total)

    assert counter.invoke(2, thread()) == "total=2"
    assert counter.invoke(5, thread()) == "total=7"


def test_task_retry_policy_and_streamed_updates() -> None:
    attempts = {"n": 0}

    @task(retry_policy=RetryPolicy(max_attempts=3, initial_interval=0, jitter=False))
    def flaky() -> str:
        attempts["n"] += 1
        if attempts["n"] < 3:
            raise ConnectionError("try again")
        return "ok"

    @entrypoint()
    def run(_: Any) -> str:
        return flaky().result()

    assert list(run.stream(None or {}, stream_mode="updates")) == [
        {"flaky": "ok"},  # each task's result, then the entrypoint's (as LangGraph)
        {"run": "ok"},
    ]
    assert attempts["n"] == 3


def test_async_entrypoint_with_async_tasks() -> None:
    @task
    async def inc(x: int) -> int:
        await asyncio.sleep(0.01)
        return x + 1

    @entrypoint(checkpointer=InMemorySaver())
    async def total(n: int) -> int:
        return sum(await asyncio.gather(*(inc(i) for i in range(n))))

    assert asyncio.run(total.ainvoke(4, thread("a"))) == 10


def test_task_called_outside_a_run_is_a_clear_error() -> None:
    @task
    def lonely() -> int:
        return 1

    with pytest.raises(RuntimeError, match="outside a running graph"):
        lonely()


class UserState(TypedDict):
    user: str
    n: int


def test_store_is_injected_through_runtime_and_get_store() -> None:
    def remember(state: UserState, runtime: Runtime[Any]) -> dict[str, Any]:
        runtime.store.put(("users", state["user"]), "prefs", {"n": state["n"]})
        return {}

    def recall(state: UserState) -> dict[str, Any]:
        item = get_store().get(("users", state["user"]), "prefs")
        return {"n": item.value["n"] + 1}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(UserState)
    builder.add_node(remember)
    builder.add_node(recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    store = InMemoryStore()

    out = builder.compile(store=store).invoke({"user": "ann", "n": 1})

    assert out == {"user": "ann", "n": 2}
    assert store.get(("users", "ann"), "prefs").value == {"n": 1}


def test_cached_node_reuses_writes_and_says_so_in_the_stream() -> None:
    calls = {"n": 0}

    def slow(state: UserState) -> dict[str, Any]:
        calls["n"] += 1
        return {"n": state["n"] * 10}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(UserState)
    builder.add_node("slow", slow, cache_policy=CachePolicy(ttl=60))
    builder.add_edge(START, "slow")
    graph = builder.compile(cache=InMemoryCache())

    first = list(graph.stream({"user": "a", "n": 2}, stream_mode="updates"))
    second = list(graph.stream({"user": "a", "n": 2}, stream_mode="updates"))
    other = graph.invoke({"user": "a", "n": 3})

    tasks = [
        c
        for c in graph.stream({"user": "a", "n": 2}, stream_mode="tasks")
        if "result" in c
    ]
    assert tasks[0]["cached"] is True and tasks[0]["result"] == {"n": 20}
    assert first == [{"slow": {"n": 20}}]
    assert second == [{"slow": {"n": 20}, "__metadata__": {"cached": True}}]
    assert other["n"] == 30
    assert calls["n"] == 2


def test_cache_policy_rejects_a_non_positive_ttl() -> None:
    with pytest.raises(ValueError, match="ttl"):
        CachePolicy(ttl=0)


def test_interrupt_payload_that_cannot_be_stored_is_a_clear_error() -> None:
    def ask(state: UserState) -> dict[str, Any]:
        interrupt({"callback": object()})
        return {}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(UserState)
    builder.add_node(ask)
    builder.add_edge(START, "ask")
    saver = InMemorySaver()
    graph = builder.compile(checkpointer=saver)

    with pytest.raises(
        SerializationError, match="interrupt\\(\\) payload in node 'ask'"
    ):
        graph.invoke({"user": "a", "n": 1}, thread("bad"))
    state = graph.get_state(thread("bad"))
    assert state.next == ("ask",) and state.interrupts == ()

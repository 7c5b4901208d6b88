"""Timeouts on ``@task``, ``@entrypoint`` and ``Send`` (``timeout=``).

As LangGraph 1.2 behaves (checked on 1.2.24): a number or ``timedelta`` is a
``run_timeout``; a late attempt raises ``NodeTimeoutError`` (catchable from a
task's future) and the retry policy may run it again; a timeout on a sync
``@task``/``@entrypoint`` function is refused with ``ValueError`` when it is
decorated. A ``Send``'s timeout replaces its node's for that one task; on a
sync node an async run still times it out, a sync run refuses it with
``ValueError``. One difference on purpose: a sync run (``invoke``) of an async
node applies its timeout (LangGraph's sync runs cannot run async nodes at all).
"""

from __future__ import annotations

import asyncio
import operator
import time
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import NodeTimeoutError
from engine.func import entrypoint, task
from engine.graph import START, StateGraph
from engine.runtime import get_runtime
from engine.types import RetryPolicy, Send, TimeoutPolicy
from tests._support.graphs import thread

QUICK_RETRY = {"initial_interval": 0.001, "jitter": False}


class Fan(TypedDict):
    delays: list[float]
    done: Annotated[list[float], operator.add]


async def sleeper(arg: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(arg["delay"])
    return {"done": [arg["delay"]]}


def sync_sleeper(arg: dict[str, Any]) -> dict[str, Any]:
    time.sleep(arg["delay"])
    return {"done": [arg["delay"]]}


def fan_out(node: Any, timeout: Any, *, node_timeout: float | None = None) -> Any:
    """START sends one task per delay to ``work``, each with ``timeout``."""

    def route(state: Fan) -> list[Send]:
        return [Send("work", {"delay": d}, timeout=timeout) for d in state["delays"]]

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Fan)
    builder.add_node("work", node, timeout=node_timeout)
    builder.add_conditional_edges(START, route, ["work"])
    return builder


# -- Send.timeout -----------------------------------------------------------------------


def test_send_takes_a_number_a_timedelta_or_a_policy() -> None:
    policy = TimeoutPolicy(idle_timeout=3.0)

    assert Send("n", 1).timeout is None
    assert Send("n", 1, timeout=2).timeout == TimeoutPolicy(run_timeout=2.0)
    assert Send("n", 1, timeout=timedelta(seconds=1.5)).timeout == TimeoutPolicy(
        run_timeout=1.5
    )
    assert Send("n", 1, timeout=policy).timeout is policy
    with pytest.raises(ValueError):
        Send("n", 1, timeout=0)


def test_sends_differ_by_timeout_and_show_it_only_when_set() -> None:
    plain, timed = Send("n", {"a": 1}), Send("n", {"a": 1}, timeout=2)

    assert plain != timed
    assert timed == Send("n", {"a": 1}, timeout=2.0)
    assert hash(timed) == hash(Send("n", {"a": 1}, timeout=2.0))
    assert repr(plain) == "Send(node='n', arg={'a': 1})"
    assert "timeout=TimeoutPolicy(run_timeout=2.0" in repr(timed)


def test_a_saved_send_keeps_its_timeout() -> None:
    serde = JsonPlusSerializer()
    sent = Send(
        "n", {"a": 1}, timeout=TimeoutPolicy(idle_timeout=3.0, refresh_on="heartbeat")
    )

    loaded = serde.loads_typed(serde.dumps_typed(sent))

    assert loaded == sent
    assert loaded.timeout == sent.timeout
    assert serde.loads_typed(serde.dumps_typed(Send("n", 1))).timeout is None


async def test_a_send_timeout_stops_its_late_task() -> None:
    graph = fan_out(sleeper, 0.05).compile()

    with pytest.raises(NodeTimeoutError) as info:
        await graph.ainvoke({"delays": [0.01, 1.0], "done": []})

    assert info.value.node == "work"
    assert info.value.kind == "run"


async def test_a_send_timeout_replaces_the_nodes_own() -> None:
    longer = fan_out(sleeper, 1.0, node_timeout=0.02).compile()
    fallback = fan_out(sleeper, None, node_timeout=0.02).compile()

    assert await longer.ainvoke({"delays": [0.06], "done": []}) == {
        "delays": [0.06],
        "done": [0.06],
    }
    with pytest.raises(NodeTimeoutError):
        await fallback.ainvoke({"delays": [0.06], "done": []})


async def test_a_timed_out_send_task_is_retried_by_its_nodes_policy() -> None:
    attempts: list[int] = []

    async def slow_once(arg: dict[str, Any]) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            await asyncio.sleep(1)
        return {"done": [len(attempts)]}

    def route(state: Fan) -> list[Send]:
        return [Send("work", {}, timeout=0.05)]

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Fan)
    builder.add_node("work", slow_once, retry_policy=RetryPolicy(**QUICK_RETRY))
    builder.add_conditional_edges(START, route, ["work"])

    result = await builder.compile().ainvoke({"delays": [], "done": []})

    assert result["done"] == [2]
    assert len(attempts) == 2


async def test_an_async_run_times_out_a_sync_node_sent_with_a_timeout() -> None:
    graph = fan_out(sync_sleeper, 0.05).compile()

    with pytest.raises(NodeTimeoutError):
        await graph.ainvoke({"delays": [0.3], "done": []})


def test_a_sync_run_refuses_a_timeout_on_a_sync_node() -> None:
    graph = fan_out(sync_sleeper, 0.05).compile()

    with pytest.raises(ValueError, match="'work'.*synchronous"):
        graph.invoke({"delays": [0.01], "done": []})


def test_a_sync_run_applies_the_timeout_of_an_async_node() -> None:
    graph = fan_out(sleeper, 0.05).compile()

    assert graph.invoke({"delays": [0.01], "done": []})["done"] == [0.01]
    with pytest.raises(NodeTimeoutError):
        graph.invoke({"delays": [1.0], "done": []})


async def test_a_send_timeout_still_applies_after_a_resume() -> None:
    graph = fan_out(sleeper, 0.05).compile(
        checkpointer=InMemorySaver(), interrupt_before=["work"]
    )
    config = thread("paused-send")
    await graph.ainvoke({"delays": [1.0], "done": []}, config)

    with pytest.raises(NodeTimeoutError):
        await graph.ainvoke(None, config)


# -- @task(timeout=) ---------------------------------------------------------------------


async def test_a_task_timeout_raises_from_the_future_after_its_retries() -> None:
    attempts: list[int] = []

    @task(timeout=0.05, retry_policy=RetryPolicy(max_attempts=3, **QUICK_RETRY))
    async def slow(x: int) -> int:
        attempts.append(x)
        await asyncio.sleep(1)
        return x

    @entrypoint()
    async def workflow(x: int) -> str:
        try:
            return str(await slow(x))
        except NodeTimeoutError as exc:
            return f"{exc.node} timed out ({exc.kind})"

    started = time.monotonic()
    assert await workflow.ainvoke(7) == "slow timed out (run)"
    assert attempts == [7, 7, 7]
    assert time.monotonic() - started < 0.9


async def test_an_uncaught_task_timeout_fails_the_workflow() -> None:
    @task(timeout=timedelta(milliseconds=50))
    async def slow(x: int) -> int:
        await asyncio.sleep(1)
        return x

    @entrypoint()
    async def workflow(x: int) -> int:
        return int(await slow(x))

    with pytest.raises(NodeTimeoutError, match="'slow'"):
        await workflow.ainvoke(1)


async def test_a_task_in_time_returns_its_result() -> None:
    @task(timeout=1.0)
    async def quick(x: int) -> int:
        return x * 2

    @entrypoint()
    async def workflow(x: int) -> int:
        return int(await quick(x))

    assert await workflow.ainvoke(21) == 42


def test_a_task_timeout_on_a_sync_function_is_refused_when_decorated() -> None:
    with pytest.raises(ValueError, match="'blocking'.*synchronous"):

        @task(timeout=1)
        def blocking(x: int) -> int:
            return x


def progressing(policy: TimeoutPolicy) -> Any:
    """A workflow whose task works 6 x 30 ms, signalling progress by heartbeat or write."""

    @task(timeout=policy)
    async def work(how: str) -> str:
        runtime = get_runtime()
        for _ in range(6):
            await asyncio.sleep(0.03)
            if how == "heartbeat":
                runtime.heartbeat()
            else:
                runtime.stream_writer({"still": "working"})
        return how

    @entrypoint()
    async def workflow(how: str) -> str:
        return str(await work(how))

    return workflow


async def test_heartbeats_and_writes_keep_an_idle_timeout_from_firing() -> None:
    workflow = progressing(TimeoutPolicy(idle_timeout=0.1))

    assert await workflow.ainvoke("heartbeat") == "heartbeat"
    assert await workflow.ainvoke("write") == "write"


async def test_under_refresh_on_heartbeat_only_heartbeats_count() -> None:
    workflow = progressing(TimeoutPolicy(idle_timeout=0.1, refresh_on="heartbeat"))

    assert await workflow.ainvoke("heartbeat") == "heartbeat"
    with pytest.raises(NodeTimeoutError) as info:
        await workflow.ainvoke("write")
    assert info.value.kind == "idle"


# -- @entrypoint(timeout=) ----------------------------------------------------------------


async def test_an_entrypoint_timeout_stops_a_slow_workflow() -> None:
    @entrypoint(timeout=0.05)
    async def workflow(x: int) -> int:
        await asyncio.sleep(1)
        return x

    with pytest.raises(NodeTimeoutError, match="'workflow'"):
        await workflow.ainvoke(1)


def test_an_entrypoint_timeout_applies_to_sync_runs_of_async_workflows() -> None:
    @entrypoint(timeout=0.05)
    async def workflow(x: int) -> int:
        await asyncio.sleep(1)
        return x

    with pytest.raises(NodeTimeoutError):
        workflow.invoke(1)


def test_an_entrypoint_timeout_on_a_sync_function_is_refused() -> None:
    with pytest.raises(ValueError, match="'workflow'.*synchronous"):

        @entrypoint(timeout=1)
        def workflow(x: int) -> int:
            return x


async def test_an_entrypoint_timeout_is_retried_by_its_retry_policy() -> None:
    attempts: list[int] = []

    @entrypoint(timeout=0.05, retry_policy=RetryPolicy(max_attempts=2, **QUICK_RETRY))
    async def workflow(x: int) -> int:
        attempts.append(x)
        if len(attempts) == 1:
            await asyncio.sleep(1)
        return x + 1

    assert await workflow.ainvoke(1) == 2
    assert attempts == [1, 1]

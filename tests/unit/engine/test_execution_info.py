"""``Runtime.execution_info`` and ``Runtime.server_info``, as LangGraph 1.2 fills them.

Checked on LangGraph 1.2.24: every node attempt sees an ``ExecutionInfo`` with
the checkpoint its step started from, its namespace and task id, the thread and
run ids (``None`` when absent), the attempt number (1-based, counting retries)
and the time of its first attempt. ``server_info`` is built from the run's
``configurable`` (``assistant_id``, ``graph_id``, ``langgraph_auth_user``) and is
``None`` for a plain call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.func import entrypoint, task
from engine.graph import START, StateGraph
from engine.runtime import ExecutionInfo, Runtime, ServerInfo, get_runtime
from engine.types import RetryPolicy
from tests._support.graphs import LogState, thread

RUN_ID = "00000000-0000-0000-0000-0000000000aa"


def capturing(seen: list[Any], label: str) -> Any:
    def node(state: LogState, runtime: Runtime) -> dict[str, Any]:
        seen.append((label, runtime.execution_info, runtime.server_info))
        return {"log": [label]}

    return node


def two_steps(seen: list[Any]) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", capturing(seen, "a"))
    builder.add_node("b", capturing(seen, "b"))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder


# -- the value classes --------------------------------------------------------------------


def test_execution_info_defaults_patch_and_immutability() -> None:
    info = ExecutionInfo(checkpoint_id="c1", checkpoint_ns="n:1", task_id="t1")

    assert (info.thread_id, info.run_id, info.node_attempt) == (None, None, 1)
    assert info.node_first_attempt_time is None
    patched = info.patch(node_attempt=3, thread_id="th")
    assert (patched.node_attempt, patched.thread_id, patched.task_id) == (3, "th", "t1")
    assert info.node_attempt == 1
    with pytest.raises(AttributeError):
        info.task_id = "other"  # type: ignore[misc]


def test_runtime_patch_execution_info_needs_one_to_patch() -> None:
    info = ExecutionInfo(checkpoint_id="c1", checkpoint_ns="", task_id="t1")

    patched = Runtime(execution_info=info).patch_execution_info(node_attempt=2)

    assert patched.execution_info is not None
    assert patched.execution_info.node_attempt == 2
    with pytest.raises(RuntimeError, match="execution_info"):
        Runtime().patch_execution_info(node_attempt=2)


def test_server_info_is_frozen_and_merges_like_the_other_runtime_fields() -> None:
    first = ServerInfo(assistant_id="asst-1", graph_id="g")
    second = ServerInfo(assistant_id="asst-2", graph_id="g")

    assert first.user is None
    assert Runtime(server_info=first).merge(Runtime()).server_info is first
    assert (
        Runtime(server_info=first).merge(Runtime(server_info=second)).server_info
        is second
    )
    with pytest.raises(AttributeError):
        first.graph_id = "h"  # type: ignore[misc]


# -- execution_info in a run ----------------------------------------------------------------


def test_each_node_sees_its_task_step_checkpoint_thread_and_run() -> None:
    seen: list[Any] = []
    graph = two_steps(seen).compile(checkpointer=InMemorySaver())
    config: Any = {**thread("t-123"), "run_id": RUN_ID}

    graph.invoke({"x": 0, "log": []}, config)

    history = list(graph.get_state_history(thread("t-123")))[::-1]
    step_checkpoints = {
        s.metadata["step"]: s.config["configurable"]["checkpoint_id"] for s in history
    }
    (_, a, _), (_, b, _) = seen
    assert isinstance(a, ExecutionInfo) and isinstance(b, ExecutionInfo)
    assert a.checkpoint_id == step_checkpoints[0]
    assert b.checkpoint_id == step_checkpoints[1]
    assert a.checkpoint_ns == f"a:{a.task_id}"
    assert b.checkpoint_ns == f"b:{b.task_id}"
    assert (a.thread_id, a.run_id) == ("t-123", RUN_ID)
    assert (a.node_attempt, b.node_attempt) == (1, 1)
    assert isinstance(a.node_first_attempt_time, float)
    assert b.node_first_attempt_time is not None
    assert b.node_first_attempt_time >= a.node_first_attempt_time


def test_without_a_thread_or_run_id_those_fields_are_none() -> None:
    seen: list[Any] = []

    two_steps(seen).compile().invoke({"x": 0, "log": []})

    info = seen[0][1]
    assert (info.thread_id, info.run_id) == (None, None)
    assert info.checkpoint_id  # every step has a checkpoint id, saved or not
    assert info.task_id in info.checkpoint_ns


def test_retries_count_attempts_and_keep_the_first_attempt_time() -> None:
    infos: list[ExecutionInfo] = []

    def flaky(state: LogState) -> dict[str, Any]:
        info = get_runtime().execution_info
        assert info is not None
        infos.append(info)
        if len(infos) < 3:
            raise ConnectionError("try again")
        return {"log": ["ok"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node(
        "flaky",
        flaky,
        retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=False),
    )
    builder.add_edge(START, "flaky")

    builder.compile().invoke({"x": 0, "log": []})

    assert [i.node_attempt for i in infos] == [1, 2, 3]
    assert len({i.node_first_attempt_time for i in infos}) == 1
    assert len({i.task_id for i in infos}) == 1


async def test_async_nodes_see_it_too() -> None:
    seen: list[Any] = []

    async def node(state: LogState, runtime: Runtime) -> dict[str, Any]:
        seen.append(runtime.execution_info)
        return {"log": ["n"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("n", node)
    builder.add_edge(START, "n")

    await builder.compile(checkpointer=InMemorySaver()).ainvoke(
        {"x": 0, "log": []}, thread("t-xyz")
    )

    assert seen[0].thread_id == "t-xyz"
    assert seen[0].node_attempt == 1


def test_a_subgraph_node_sees_its_nested_namespace() -> None:
    seen: list[Any] = []
    child: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    child.add_node("inner", capturing(seen, "inner"))
    child.add_edge(START, "inner")
    parent: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    parent.add_node("outer", capturing(seen, "outer"))
    parent.add_node("sub", child.compile())
    parent.add_edge(START, "outer")
    parent.add_edge("outer", "sub")

    parent.compile(checkpointer=InMemorySaver()).invoke(
        {"x": 0, "log": []}, thread("sub-thread")
    )

    outer, inner = seen[0][1], seen[1][1]
    assert outer.checkpoint_ns == f"outer:{outer.task_id}"
    assert inner.checkpoint_ns.startswith("sub:")
    assert inner.checkpoint_ns.endswith(f"|inner:{inner.task_id}")
    assert inner.thread_id == outer.thread_id == "sub-thread"


def test_a_task_call_sees_its_own_task_id() -> None:
    infos: dict[str, ExecutionInfo] = {}

    @task
    def child(x: int) -> int:
        info = get_runtime().execution_info
        assert info is not None
        infos["child"] = info
        return x

    @entrypoint(checkpointer=InMemorySaver())
    def workflow(x: int, *, runtime: Runtime) -> int:
        assert runtime.execution_info is not None
        infos["workflow"] = runtime.execution_info
        return int(child(x).result())

    workflow.invoke(1, thread("calls"))

    assert infos["child"].task_id != infos["workflow"].task_id
    assert infos["child"].task_id in infos["child"].checkpoint_ns
    assert infos["child"].checkpoint_id == infos["workflow"].checkpoint_id
    assert infos["child"].thread_id == "calls"


# -- server_info in a run -----------------------------------------------------------------


class ProxyUser:
    """Like a server's user proxy: attributes resolved on demand, dict access too."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def identity(self) -> str:
        return str(self._data["identity"])

    def __getattr__(self, name: str) -> Any:
        return self._data[name]

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)


def test_server_info_comes_from_the_configurable_of_the_run() -> None:
    seen: list[Any] = []
    user = ProxyUser({"identity": "ada", "display_name": "Ada L."})
    configurable = {
        "assistant_id": "asst-1",
        "graph_id": "purchase",
        "langgraph_auth_user": user,
    }

    two_steps(seen).compile().invoke(
        {"x": 0, "log": []}, {"configurable": configurable}
    )

    info = seen[0][2]
    assert isinstance(info, ServerInfo)
    assert (info.assistant_id, info.graph_id) == ("asst-1", "purchase")
    assert info.user is user
    assert info.user is not None and info.user["display_name"] == "Ada L."


def test_a_graph_id_alone_gives_an_empty_assistant_id() -> None:
    seen: list[Any] = []

    two_steps(seen).compile().invoke(
        {"x": 0, "log": []}, {"configurable": {"graph_id": "g"}}
    )

    assert seen[0][2] == ServerInfo(assistant_id="", graph_id="g")


def test_a_plain_call_has_no_server_info() -> None:
    seen: list[Any] = []

    two_steps(seen).compile().invoke(
        {"x": 0, "log": []}, {"configurable": {"langgraph_auth_user": "not a user"}}
    )

    assert seen[0][2] is None


def test_a_subgraph_inherits_the_server_info() -> None:
    seen: list[Any] = []
    child: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    child.add_node("inner", capturing(seen, "inner"))
    child.add_edge(START, "inner")
    parent: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    parent.add_node("sub", child.compile())
    parent.add_edge(START, "sub")

    parent.compile().invoke(
        {"x": 0, "log": []}, {"configurable": {"assistant_id": "asst-9"}}
    )

    assert seen[0][2] == ServerInfo(assistant_id="asst-9", graph_id="")

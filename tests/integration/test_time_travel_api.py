"""Time travel through the compiled graph's API, on every saver backend.

- ``update_state(config, values, as_node="__copy__")`` copies a checkpoint as
  the thread's newest, a sibling with the same parent, values and next tasks
  (metadata ``source="fork"``), optionally with updates applied to the copy.
- ``bulk_update_state(config, supersteps)`` applies each super-step's updates
  together (as one step's tasks) and saves one checkpoint per super-step.
- After a fork that writes as a node, what ``get_state`` shows, what the history
  entry of the same checkpoint shows, and what the next run does, agree; a task
  the fork left pending (its trigger unchanged) runs when the thread continues.

Expected values were observed on LangGraph 1.2.24 with the same graphs.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.errors import InvalidUpdateError
from engine.graph import START, StateGraph
from engine.types import Command, StateUpdate, interrupt
from tests._support.graphs import LogState, appender, thread


def join_graph(saver: BaseCheckpointSaver) -> Any:
    """START -> a || b -> c (waits for both); pauses before c."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("a", appender("a"))
    builder.add_node("b", appender("b"))
    builder.add_node("c", lambda state: {"x": state["x"] + 100, "log": ["c"]})
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], "c")
    return builder.compile(checkpointer=saver, interrupt_before=["c"])


class Purchase(TypedDict):
    amount: int
    log: Annotated[list[str], operator.add]


def purchase_graph(saver: BaseCheckpointSaver) -> Any:
    """normalize -> (budget || compliance) -> human_review (asks) -> execute | reject."""

    def human_review(state: Purchase) -> dict[str, Any]:
        return {"log": [f"review:{interrupt('approve?')}"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Purchase)
    for name in ("normalize", "budget", "compliance", "execute", "reject"):
        builder.add_node(name, appender(name))
    builder.add_node("human_review", human_review)
    builder.add_edge(START, "normalize")
    builder.add_edge("normalize", "budget")
    builder.add_edge("normalize", "compliance")
    builder.add_edge(["budget", "compliance"], "human_review")
    builder.add_conditional_edges(
        "human_review",
        lambda state: "execute" if state["amount"] < 10 else "reject",
        ["execute", "reject"],
    )
    return builder.compile(checkpointer=saver)


def checkpoint_id(config: Any) -> str:
    return str(config["configurable"]["checkpoint_id"])


def assert_reads_agree(graph: Any, config: Any) -> None:
    """For every checkpoint, ``get_state`` and its history entry say the same next.

    The thread's live state leaves out the tasks of its step that already ran
    (a paused step's finished siblings), as LangGraph's does.
    """
    history = list(graph.get_state_history(config))
    for entry in history:
        assert graph.get_state(entry.config).next == entry.next, entry.metadata
        assert tuple(task.name for task in entry.tasks) == entry.next
    live = graph.get_state(config)
    ran = {task.name for task in live.tasks if task.result is not None}
    assert live.next == tuple(name for name in history[0].next if name not in ran)


# -- __copy__ ------------------------------------------------------------------------------


def test_copy_makes_a_sibling_checkpoint_the_thread_continues_from(
    saver: BaseCheckpointSaver,
) -> None:
    graph = join_graph(saver)
    graph.invoke({"x": 1, "log": []}, thread())
    head = graph.get_state(thread())

    copied = graph.update_state(head.config, None, as_node="__copy__")
    copy = graph.get_state(copied)

    assert checkpoint_id(copied) != checkpoint_id(head.config)
    assert checkpoint_id(copy.parent_config) == checkpoint_id(head.parent_config)
    assert copy.metadata["source"] == "fork"
    assert copy.metadata["step"] == head.metadata["step"] + 1
    assert copy.values == head.values == {"x": 1, "log": ["a", "b"]}
    assert copy.next == head.next == ("c",)
    assert checkpoint_id(graph.get_state(thread()).config) == checkpoint_id(copied)
    assert [(s.metadata["source"], s.next) for s in graph.get_state_history(thread())][
        :2
    ] == [("fork", ("c",)), ("loop", ("c",))]
    assert graph.invoke(None, copied) == {"x": 101, "log": ["a", "b", "c"]}


def test_copy_with_updates_applies_them_to_the_copy(
    saver: BaseCheckpointSaver,
) -> None:
    graph = join_graph(saver)
    graph.invoke({"x": 1, "log": []}, thread())
    head = graph.get_state(thread())

    updated = graph.update_state(
        head.config, [({"x": 5}, "a"), ({"log": ["zz"]}, "b")], as_node="__copy__"
    )
    state = graph.get_state(updated)
    sources = [s.metadata["source"] for s in graph.get_state_history(thread())]

    assert state.values == {"x": 5, "log": ["a", "b", "zz"]}
    assert state.next == ("c",)
    assert state.metadata["step"] == head.metadata["step"] + 2
    assert sources[:3] == ["update", "fork", "loop"]


def test_copying_a_checkpoint_that_does_not_exist_is_refused(
    saver: BaseCheckpointSaver,
) -> None:
    graph = join_graph(saver)

    with pytest.raises(InvalidUpdateError, match="non-existent"):
        graph.update_state(thread("empty"), None, as_node="__copy__")


# -- bulk_update_state --------------------------------------------------------------------


def test_bulk_update_saves_one_checkpoint_per_superstep(
    saver: BaseCheckpointSaver,
) -> None:
    graph = join_graph(saver)

    config = graph.bulk_update_state(
        thread(),
        [
            [StateUpdate({"x": 1, "log": []}, "__input__")],
            [StateUpdate({"x": 0, "log": ["start"]}, START)],
            [StateUpdate({"log": ["A"]}, "a"), StateUpdate({"log": ["B"]}, "b")],
        ],
    )
    state = graph.get_state(config)
    history = list(graph.get_state_history(thread()))

    assert state.values == {"x": 0, "log": ["start", "A", "B"]}  # reducer merged
    assert state.next == ("c",)  # both a and b wrote: the join is complete
    assert [s.metadata["source"] for s in history] == ["update", "update", "input"]
    assert [s.metadata["step"] for s in history] == [1, 0, -1]


def test_bulk_update_as_a_pending_task_records_its_result(
    saver: BaseCheckpointSaver,
) -> None:
    graph = join_graph(saver)
    graph.invoke({"x": 1, "log": []}, thread())
    before_c = graph.get_state(thread())

    graph.bulk_update_state(before_c.config, [[StateUpdate({"x": 7}, "c")]])
    (task,) = graph.get_state(before_c.config).tasks

    assert task.name == "c"
    assert task.result == {"x": 7}  # the update took c's task id, as LangGraph does
    # as in LangGraph, c stays next: writing as c does not consume its join
    assert graph.get_state(thread()).next == ("c",)


def test_bulk_update_is_refused_when_malformed(saver: BaseCheckpointSaver) -> None:
    graph = join_graph(saver)
    graph.invoke({"x": 1, "log": []}, thread())

    with pytest.raises(ValueError, match="No supersteps"):
        graph.bulk_update_state(thread(), [])
    with pytest.raises(ValueError, match="No updates"):
        graph.bulk_update_state(thread(), [[]])
    with pytest.raises(InvalidUpdateError, match="as_node is required"):
        graph.bulk_update_state(
            thread(), [[StateUpdate({"log": ["A"]}), StateUpdate({"log": ["B"]}, "b")]]
        )
    with pytest.raises(InvalidUpdateError, match="one value per step"):
        graph.bulk_update_state(
            thread(), [[StateUpdate({"x": 3}, "a"), StateUpdate({"x": 4}, "b")]]
        )
    assert len(list(graph.get_state_history(thread()))) == 3  # nothing was saved


async def test_abulk_update_state_is_the_async_twin(
    asaver: BaseCheckpointSaver,
) -> None:
    graph = join_graph(asaver)
    await graph.ainvoke({"x": 1, "log": []}, thread())

    config = await graph.abulk_update_state(
        thread(), [[StateUpdate({"log": ["late"]}, "a")]]
    )
    copied = await graph.aupdate_state(config, None, as_node="__copy__")
    state = await graph.aget_state(copied)

    assert state.values == {"x": 1, "log": ["a", "b", "late"]}
    assert state.metadata["source"] == "fork"


# -- forks that write as a node: both read paths and the next run agree -----------------------


def finished_purchase(saver: BaseCheckpointSaver) -> tuple[Any, Any]:
    graph = purchase_graph(saver)
    graph.invoke({"amount": 1, "log": []}, thread())
    graph.invoke(Command(resume="yes"), thread())
    paused = next(
        s for s in graph.get_state_history(thread()) if s.next == ("human_review",)
    )
    return graph, paused


@pytest.mark.parametrize("as_node", ["budget", "human_review", "normalize", "execute"])
def test_a_fork_as_a_node_reads_the_same_through_get_state_and_history(
    saver: BaseCheckpointSaver, as_node: str
) -> None:
    graph, paused = finished_purchase(saver)

    graph.update_state(paused.config, {"amount": 2}, as_node=as_node)
    assert_reads_agree(graph, thread())
    graph.invoke(None, thread())
    assert_reads_agree(graph, thread())


def test_a_task_the_fork_left_pending_runs_when_the_thread_continues(
    saver: BaseCheckpointSaver,
) -> None:
    graph, paused = finished_purchase(saver)

    # budget writes again; human_review (its join already complete) stays pending
    fork = graph.update_state(paused.config, {"amount": 2}, as_node="budget")
    result = graph.invoke(None, thread())

    assert graph.get_state(fork).next == ("human_review",)
    assert [i.value for i in result["__interrupt__"]] == ["approve?"]  # asked again
    assert graph.get_state(thread()).next == ("human_review",)
    done = graph.invoke(Command(resume="ok"), thread())
    assert done["log"][-2:] == ["review:ok", "execute"]
    assert graph.get_state(thread()).next == ()
    assert_reads_agree(graph, thread())


def test_history_lists_next_nodes_in_graph_order_as_get_state_does(
    saver: BaseCheckpointSaver,
) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    for name in ("zeta", "beta", "alpha"):
        builder.add_node(name, appender(name))
        builder.add_edge(START, name)
    graph = builder.compile(checkpointer=saver, interrupt_before=["zeta"])

    graph.invoke({"x": 0, "log": []}, thread())

    (latest, *_) = graph.get_state_history(thread())
    assert latest.next == ("zeta", "beta", "alpha")
    assert graph.get_state(thread()).next == ("zeta", "beta", "alpha")

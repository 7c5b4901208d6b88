"""Subgraph state and time travel, written from LangGraph 1.2's documented behaviour.

- ``get_state(config, subgraphs=True)``: a task that runs a subgraph (the node is
  a compiled graph, or its function calls one) has the subgraph's own
  ``StateSnapshot`` as its ``state``; that snapshot's config addresses the
  subgraph's checkpoint, and the parent graph's state methods given it act on
  the subgraph (read it, list its history, fork it with ``update_state``).
- Replaying a parent checkpoint taken before a subgraph ran runs the subgraph
  afresh: its interrupt fires again and takes the new answer.
- A subgraph invoked from a node with its own ``thread_id`` in the config is a
  root graph on that thread (its own checkpointer, its own state, no nesting).

Each test runs on every checkpointer backend (the ``saver`` fixture).
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig

from engine.checkpoint.memory import InMemorySaver
from engine.graph import START, StateGraph
from engine.types import Command, StateSnapshot, interrupt


class State(TypedDict, total=False):
    text: str
    answer: str
    count: int


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def _child() -> Any:
    def prepare(state: State) -> dict[str, Any]:
        return {"text": state["text"] + "!"}

    def ask(state: State) -> dict[str, Any]:
        return {"answer": interrupt(f"about {state['text']}?")}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("prepare", prepare)
    builder.add_node("ask", ask)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "ask")
    return builder.compile()


def _parent(saver: Any, *, called_from_a_function: bool) -> Any:
    child = _child()

    def first(state: State) -> dict[str, Any]:
        return {"text": state["text"] + "1"}

    def run_child(state: State) -> Any:
        return child.invoke(state)

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("child", run_child if called_from_a_function else child)
    builder.add_edge(START, "first")
    builder.add_edge("first", "child")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("called_from_a_function", [False, True])
def test_get_state_with_subgraphs_gives_the_subgraphs_own_snapshot(
    saver, called_from_a_function: bool
) -> None:
    graph = _parent(saver, called_from_a_function=called_from_a_function)
    graph.invoke({"text": "x"}, thread())

    (task,) = graph.get_state(thread(), subgraphs=True).tasks
    child = task.state

    assert isinstance(child, StateSnapshot)
    assert child.values == {"text": "x1!"}
    assert child.next == ("ask",)
    assert [i.value for i in child.interrupts] == ["about x1!?"]
    conf = child.config["configurable"]
    assert conf["thread_id"] == "t"
    assert conf["checkpoint_ns"].startswith("child:")
    assert conf["checkpoint_id"]
    # without subgraphs=True the task only points at the subgraph's namespace
    (plain,) = graph.get_state(thread()).tasks
    assert not isinstance(plain.state, StateSnapshot)


@pytest.mark.parametrize("called_from_a_function", [False, True])
def test_a_subgraph_snapshot_config_reads_and_forks_the_subgraph(
    saver, called_from_a_function: bool
) -> None:
    graph = _parent(saver, called_from_a_function=called_from_a_function)
    graph.invoke({"text": "x"}, thread())
    child = graph.get_state(thread(), subgraphs=True).tasks[0].state

    assert graph.get_state(child.config).values == {"text": "x1!"}
    assert [s.next for s in graph.get_state_history(child.config)][0] == ("ask",)

    forked = graph.update_state(child.config, {"text": "edited"})

    assert (
        forked["configurable"]["checkpoint_ns"]
        == (child.config["configurable"]["checkpoint_ns"])
    )
    assert graph.get_state(thread(), subgraphs=True).tasks[0].state.values == {
        "text": "edited"
    }
    assert graph.invoke(Command(resume="yes"), thread()) == {
        "text": "edited",
        "answer": "yes",
    }


@pytest.mark.parametrize("called_from_a_function", [False, True])
def test_replaying_from_before_a_subgraph_ran_runs_it_afresh(
    saver, called_from_a_function: bool
) -> None:
    graph = _parent(saver, called_from_a_function=called_from_a_function)
    graph.invoke({"text": "x"}, thread())
    assert graph.invoke(Command(resume="first answer"), thread())["answer"] == (
        "first answer"
    )
    before = next(s for s in graph.get_state_history(thread()) if s.next == ("child",))

    replayed = graph.invoke(None, before.config)

    assert [i.value for i in replayed["__interrupt__"]] == ["about x1!?"]
    assert graph.get_state(thread()).next == ("child",)
    done = graph.invoke(Command(resume="second answer"), thread())
    assert done == {"text": "x1!", "answer": "second answer"}


def test_a_subgraph_snapshot_config_maps_its_parents_checkpoints(saver) -> None:
    graph = _parent(saver, called_from_a_function=False)
    graph.invoke({"text": "x"}, thread())
    root = graph.get_state(thread())
    child = graph.get_state(thread(), subgraphs=True).tasks[0].state

    conf = child.config["configurable"]

    assert conf["checkpoint_map"] == {
        "": root.config["configurable"]["checkpoint_id"],
        conf["checkpoint_ns"]: conf["checkpoint_id"],
    }


def test_replaying_the_newest_checkpoint_runs_the_subgraph_afresh(saver) -> None:
    def ask_again(state: State) -> dict[str, Any]:
        return {"count": interrupt("and then?")}

    child_builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    child_builder.add_node("ask", lambda s: {"answer": interrupt("first?")})
    child_builder.add_node("ask_again", ask_again)
    child_builder.add_edge(START, "ask")
    child_builder.add_edge("ask", "ask_again")
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("child", child_builder.compile())
    builder.add_edge(START, "child")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"text": "x"}, thread())
    graph.invoke(Command(resume="one"), thread())  # now paused at "and then?"
    newest = graph.get_state(thread())

    replayed = graph.invoke(None, newest.config)

    assert [i.value for i in replayed["__interrupt__"]] == ["first?"]  # not reused


def test_a_subgraph_checkpoint_config_given_to_the_parent_replays_the_parent(
    saver,
) -> None:
    graph = _parent(saver, called_from_a_function=False)
    graph.invoke({"text": "x"}, thread())
    child = graph.get_state(thread(), subgraphs=True).tasks[0].state
    history = list(
        graph.get_state_history(
            {
                "configurable": {
                    **thread()["configurable"],
                    "checkpoint_ns": child.config["configurable"]["checkpoint_ns"],
                }
            }
        )
    )
    before_ask = next(s for s in history if s.next == ("ask",))

    replayed = graph.invoke(None, before_ask.config)

    assert [i.value for i in replayed["__interrupt__"]] == ["about x1!?"]
    assert graph.invoke(Command(resume="yes"), thread()) == {
        "text": "x1!",
        "answer": "yes",
    }


def test_a_subgraph_keeping_its_state_replays_from_before_the_replay_point(
    saver,
) -> None:
    def ask(state: State) -> dict[str, Any]:
        return {"answer": interrupt("which?")}

    child_builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    child_builder.add_node("ask", ask)
    child_builder.add_edge(START, "ask")
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("first", lambda s: {"text": s["text"] + "1"})
    builder.add_node("child", child_builder.compile(checkpointer=True))
    builder.add_edge(START, "first")
    builder.add_edge("first", "child")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"text": "x"}, thread())
    assert graph.invoke(Command(resume="old"), thread())["answer"] == "old"
    before = next(s for s in graph.get_state_history(thread()) if s.next == ("child",))

    replayed = graph.invoke(None, before.config)

    assert [i.value for i in replayed["__interrupt__"]] == ["which?"]
    assert graph.invoke(Command(resume="new"), thread())["answer"] == "new"


def _counter() -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("count", lambda s: {"count": (s.get("count") or 0) + 1})
    builder.add_edge(START, "count")
    return builder


def test_a_subgraph_invoked_with_its_own_thread_id_is_its_own_thread(saver) -> None:
    child_saver = InMemorySaver()
    child = _counter().compile(checkpointer=child_saver)

    def call(state: State) -> dict[str, Any]:
        out = child.invoke({"text": state["text"]}, thread(f"child-{state['text']}"))
        return {"count": out["count"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("call", call)
    builder.add_edge(START, "call")
    graph = builder.compile(checkpointer=saver)

    assert graph.invoke({"text": "a"}, thread())["count"] == 1
    assert graph.invoke({"text": "a"}, thread())["count"] == 2  # its state carried

    assert child.get_state(thread("child-a")).values == {"text": "a", "count": 2}
    spaces = {
        (
            c.config["configurable"]["thread_id"],
            c.config["configurable"]["checkpoint_ns"],
        )
        for c in child_saver.list(None)
    }
    assert spaces == {("child-a", "")}
    assert {
        c.config["configurable"]["checkpoint_ns"] for c in saver.list(thread())
    } == {""}


def test_a_subgraph_on_its_own_thread_without_a_checkpointer_keeps_nothing(
    saver,
) -> None:
    child = _counter().compile()

    def call(state: State) -> dict[str, Any]:
        return {"count": child.invoke({"text": "a"}, thread("child"))["count"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("call", call)
    builder.add_edge(START, "call")
    graph = builder.compile(checkpointer=saver)

    assert graph.invoke({"text": "a"}, thread())["count"] == 1
    assert graph.invoke({"text": "a"}, thread())["count"] == 1
    assert list(saver.list(thread("child"))) == []


def test_a_subgraph_on_its_own_thread_returns_its_interrupt_instead_of_pausing(
    saver,
) -> None:
    def ask(state: State) -> dict[str, Any]:
        return {"answer": interrupt("child question")}

    child_builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    child_builder.add_node("ask", ask)
    child_builder.add_edge(START, "ask")
    child = child_builder.compile(checkpointer=InMemorySaver())

    def own_thread(state: State) -> dict[str, Any]:
        out = child.invoke({"text": "x"}, thread("child"))
        return {"answer": out["__interrupt__"][0].value}

    def nested(state: State, config: RunnableConfig) -> Any:
        return child.invoke({"text": "x"}, config)  # the task's own config nests

    for node, pauses in ((own_thread, False), (nested, True)):
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
        builder.add_node("node", node)
        builder.add_edge(START, "node")
        graph = builder.compile(checkpointer=saver)
        out = graph.invoke({"text": "x"}, thread(node.__name__))

        assert ("__interrupt__" in out) is pauses
        if not pauses:
            assert out["answer"] == "child question"
            updates = list(
                graph.stream(
                    {"text": "x"},
                    thread("streamed"),
                    stream_mode="updates",
                    subgraphs=True,
                )
            )
            assert [ns for ns, _ in updates] == [()]  # no nested chunks


def test_checkpointer_true_cannot_be_used_for_a_root_graph() -> None:
    graph = _counter().compile(checkpointer=True)

    with pytest.raises(RuntimeError, match="root graphs"):
        graph.invoke({"text": "a"}, thread())

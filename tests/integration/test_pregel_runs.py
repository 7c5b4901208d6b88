"""Compiled graphs run end to end with InMemorySaver: interrupts, resume, breakpoints,
history, update_state and subgraphs.

Expected behaviour was learned by running the same graphs on LangGraph 1.2. The
engine's interrupt and task ids differ by design, so ids are compared by
structure, never literally. Deliberate differences (issue 3): an interrupt cannot
be swallowed by ``except Exception``; resuming a thread that is not interrupted
raises ``InvalidResumeError``; a resume map naming unknown interrupts raises
``UnknownInterruptError`` (LangGraph: ``RuntimeError``).
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.errors import InvalidResumeError, InvalidUpdateError, UnknownInterruptError
from engine.graph import START, StateGraph
from engine.types import Command, Interrupt, StateSnapshot, interrupt
from tests._support.graphs import (
    LogState,
    appender,
    asking,
    chain,
    interrupt_chain,
    interrupt_values,
    parallel,
    thread,
    without_interrupt,
)


def saved(builder: StateGraph[Any, Any, Any, Any], **kwargs: Any) -> Any:
    return builder.compile(checkpointer=InMemorySaver(), **kwargs)


def steps(graph: Any, config: dict[str, Any]) -> list[int]:
    return [s.metadata["step"] for s in graph.get_state_history(config)]


# -- interrupt() and resume --------------------------------------------------------------


def test_invoke_returns_the_interrupt_and_the_state_so_far() -> None:
    graph = saved(interrupt_chain())

    result = graph.invoke({"x": 0}, thread())

    assert without_interrupt(result) == {"x": 0, "log": ["pre"]}
    assert isinstance(result["__interrupt__"], list)
    (pause,) = result["__interrupt__"]
    assert isinstance(pause, Interrupt)
    assert pause.value == {"q": "name?"}
    assert isinstance(pause.id, str) and pause.id


def test_get_state_shows_the_pending_interrupt() -> None:
    graph = saved(interrupt_chain())
    result = graph.invoke({"x": 0}, thread())

    state = graph.get_state(thread())

    assert state.values == {"x": 0, "log": ["pre"]}
    assert state.next == ("ask",)
    assert state.metadata["step"] == 1
    assert state.metadata["source"] == "loop"
    assert state.parent_config is not None
    (task,) = state.tasks
    assert (task.name, task.path[0], task.error, task.result) == (
        "ask",
        "__pregel_pull",
        None,
        None,
    )
    assert interrupt_values(task.interrupts) == [{"q": "name?"}]
    assert state.interrupts == task.interrupts
    assert state.interrupts[0].id == result["__interrupt__"][0].id


def test_stream_reports_the_interrupt_in_updates_and_values() -> None:
    graph = saved(interrupt_chain())

    updates = list(graph.stream({"x": 0}, thread("u"), stream_mode="updates"))
    values = list(graph.stream({"x": 0}, thread("v"), stream_mode="values"))

    assert updates[0] == {"pre": {"log": ["pre"]}}
    assert isinstance(updates[1]["__interrupt__"], tuple)
    assert interrupt_values(updates[1]["__interrupt__"]) == [{"q": "name?"}]
    assert values[:2] == [{"x": 0, "log": []}, {"x": 0, "log": ["pre"]}]
    assert without_interrupt(values[2]) == {"x": 0, "log": ["pre"]}
    assert interrupt_values(values[2]["__interrupt__"]) == [{"q": "name?"}]


def test_resume_reruns_the_node_and_returns_the_answer_from_interrupt() -> None:
    calls: list[str] = []

    def ask(state: Any) -> dict[str, Any]:
        calls.append("ask")
        return {"log": [f"ans:{interrupt('name?')}"]}

    builder = chain(["pre"])
    builder.add_node("ask", ask)
    builder.add_node("post", appender("post"))
    builder.add_edge("pre", "ask")
    builder.add_edge("ask", "post")
    graph = saved(builder)
    graph.invoke({"x": 0}, thread())

    result = graph.invoke(Command(resume="bob"), thread())

    assert result == {"x": 0, "log": ["pre", "ans:bob", "post"]}
    assert calls == ["ask", "ask"]  # the node runs again from its start
    state = graph.get_state(thread())
    assert (state.next, state.tasks, state.interrupts) == ((), (), ())
    assert state.metadata["step"] == 3


async def test_ainvoke_and_astream_interrupt_and_resume() -> None:
    graph = saved(interrupt_chain())

    result = await graph.ainvoke({"x": 0}, thread())
    chunks = [
        c
        async for c in graph.astream(
            Command(resume="A"), thread(), stream_mode="updates"
        )
    ]

    assert interrupt_values(result["__interrupt__"]) == [{"q": "name?"}]
    assert chunks == [{"ask": {"log": ["ans:A"]}}, {"post": {"log": ["post"]}}]


def test_several_interrupts_in_one_node_resume_in_order() -> None:
    def two(state: Any) -> dict[str, Any]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"log": [first, second]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("two", two)
    builder.add_edge(START, "two")
    graph = saved(builder)

    first = graph.invoke({"x": 0}, thread())
    second = graph.invoke(Command(resume="A"), thread())
    pending = graph.get_state(thread())
    done = graph.invoke(Command(resume="B"), thread())

    assert interrupt_values(first["__interrupt__"]) == ["first?"]
    assert without_interrupt(second) == {"x": 0, "log": []}
    assert interrupt_values(second["__interrupt__"]) == ["second?"]
    assert first["__interrupt__"][0].id != second["__interrupt__"][0].id
    assert pending.next == ("two",)
    assert pending.metadata["step"] == 0
    assert interrupt_values(pending.interrupts) == ["second?"]
    assert done == {"x": 0, "log": ["A", "B"]}


def two_questions() -> Any:
    return saved(parallel(("p1", asking("p1", "q1")), ("p2", asking("p2", "q2"))))


def test_parallel_interrupts_are_all_reported() -> None:
    graph = two_questions()

    result = graph.invoke({"x": 0}, thread())
    state = graph.get_state(thread())

    assert sorted(interrupt_values(result["__interrupt__"])) == ["q1", "q2"]
    assert sorted(state.next) == ["p1", "p2"]
    assert sorted(interrupt_values(state.interrupts)) == ["q1", "q2"]
    assert len({i.id for i in state.interrupts}) == 2


def test_parallel_interrupts_resume_together_with_an_id_map() -> None:
    graph = two_questions()
    graph.invoke({"x": 0}, thread())
    pending = graph.get_state(thread()).interrupts

    result = graph.invoke(
        Command(resume={i.id: i.value.upper() for i in pending}), thread()
    )

    assert result == {"x": 0, "log": ["p1:Q1", "p2:Q2"]}


def test_parallel_interrupts_resume_one_at_a_time() -> None:
    graph = two_questions()
    graph.invoke({"x": 0}, thread())
    ids = {i.value: i.id for i in graph.get_state(thread()).interrupts}

    partial = graph.invoke(Command(resume={ids["q1"]: "one"}), thread())
    state = graph.get_state(thread())
    done = graph.invoke(Command(resume={ids["q2"]: "two"}), thread())

    assert interrupt_values(partial["__interrupt__"]) == ["q2"]
    assert state.next == ("p2",)
    assert interrupt_values(state.interrupts) == ["q2"]
    assert state.values == {"x": 0, "log": ["p1:one"]}
    assert done == {"x": 0, "log": ["p1:one", "p2:two"]}


def test_invoke_output_at_an_interrupt_includes_finished_siblings() -> None:
    # LangGraph returns the writes of the tasks that finished in the interrupted
    # step, as get_state().values does.
    graph = saved(parallel(("ask", asking("ask", "q1")), ("ok", appender("ok"))))

    result = graph.invoke({"x": 0}, thread())

    assert without_interrupt(result) == {"x": 0, "log": ["ok"]}


def test_finished_sibling_of_an_interrupted_task_does_not_run_again() -> None:
    calls: list[str] = []

    def ok(state: Any) -> dict[str, Any]:
        calls.append("ok")
        return {"log": ["ok"]}

    graph = saved(parallel(("ask", asking("ask", "q1")), ("ok", ok)))
    graph.invoke({"x": 0}, thread())
    state = graph.get_state(thread())

    result = graph.invoke(Command(resume="A"), thread())

    assert state.values == {"x": 0, "log": ["ok"]}
    assert state.next == ("ask",)
    assert sorted((t.name, t.result) for t in state.tasks) == [
        ("ask", None),
        ("ok", {"log": ["ok"]}),
    ]
    assert result == {"x": 0, "log": ["ask:A", "ok"]}  # path order
    assert calls == ["ok"]


def test_except_exception_around_interrupt_does_not_swallow_it() -> None:
    # Issue 3, deliberate difference (c): in LangGraph the node logs "swallowed".
    def sneaky(state: Any) -> dict[str, Any]:
        try:
            answer = interrupt("q")
        except Exception:
            answer = "swallowed"
        return {"log": [answer]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("sneaky", sneaky)
    builder.add_edge(START, "sneaky")
    graph = saved(builder)

    paused = graph.invoke({"x": 0}, thread())
    resumed = graph.invoke(Command(resume="answer"), thread())

    assert interrupt_values(paused["__interrupt__"]) == ["q"]
    assert without_interrupt(paused) == {"x": 0, "log": []}
    assert resumed == {"x": 0, "log": ["answer"]}


def test_resume_a_finished_thread_raises_and_changes_nothing() -> None:
    graph = saved(interrupt_chain())
    graph.invoke({"x": 0}, thread())
    graph.invoke(Command(resume="bob"), thread())
    before = graph.get_state(thread())
    history = steps(graph, thread())

    with pytest.raises(InvalidResumeError, match="not interrupted"):
        graph.invoke(Command(resume="again"), thread())

    assert graph.get_state(thread()) == before
    assert steps(graph, thread()) == history


def test_resume_a_fresh_thread_raises() -> None:
    graph = saved(interrupt_chain())

    with pytest.raises(InvalidResumeError):
        graph.invoke(Command(resume=1), thread("fresh"))

    assert steps(graph, thread("fresh")) == []


UNKNOWN_ID = "0123456789abcdef" * 2  # shaped like an interrupt id, but not pending


@pytest.mark.parametrize("questions", [1, 2])
def test_resume_with_an_unknown_interrupt_id_raises_and_changes_nothing(
    questions: int,
) -> None:
    # LangGraph ignores the map and interrupts again; issue 3 asks for an error.
    graph = two_questions() if questions == 2 else saved(interrupt_chain())
    graph.invoke({"x": 0}, thread())
    before = graph.get_state(thread())

    with pytest.raises(UnknownInterruptError, match=UNKNOWN_ID) as info:
        graph.invoke(Command(resume={UNKNOWN_ID: 1}), thread())

    assert info.value.reason == "not_pending"
    assert info.value.interrupt_ids == (UNKNOWN_ID,)
    assert sorted(info.value.pending_ids) == sorted(i.id for i in before.interrupts)
    assert graph.get_state(thread()) == before


def test_resume_one_value_for_several_pending_interrupts_is_ambiguous() -> None:
    graph = two_questions()
    graph.invoke({"x": 0}, thread())

    with pytest.raises(UnknownInterruptError) as info:
        graph.invoke(Command(resume="same"), thread())

    assert info.value.reason == "ambiguous"
    assert sorted(graph.get_state(thread()).next) == ["p1", "p2"]


# -- static breakpoints ---------------------------------------------------------------------


def abc() -> StateGraph[Any, Any, Any, Any]:
    return chain(["a", "b", "c"])


def test_interrupt_before_at_compile_time_pauses_and_none_resumes() -> None:
    graph = saved(abc(), interrupt_before=["b"])

    paused = graph.invoke({"x": 0}, thread())
    state = graph.get_state(thread())
    done = graph.invoke(None, thread())

    assert paused == {"x": 0, "log": ["a"]}  # a static breakpoint adds no __interrupt__
    assert (state.next, state.metadata["step"], state.interrupts) == (("b",), 1, ())
    assert [(t.name, t.interrupts, t.result) for t in state.tasks] == [("b", (), None)]
    assert done == {"x": 0, "log": ["a", "b", "c"]}


def test_interrupt_after_at_compile_time_pauses_after_the_node() -> None:
    graph = saved(abc(), interrupt_after=["a"])

    paused = graph.invoke({"x": 0}, thread())
    state = graph.get_state(thread())

    assert paused == {"x": 0, "log": ["a"]}
    assert (state.next, state.metadata["step"]) == (("b",), 1)
    assert graph.invoke(None, thread()) == {"x": 0, "log": ["a", "b", "c"]}


@pytest.mark.parametrize("kind", ["interrupt_before", "interrupt_after"])
def test_static_breakpoint_streams_an_empty_interrupt(kind: str) -> None:
    node = "b" if kind == "interrupt_before" else "a"
    graph = saved(abc(), **{kind: [node]})

    chunks = list(graph.stream({"x": 0}, thread(), stream_mode="updates"))

    assert chunks == [{"a": {"log": ["a"]}}, {"__interrupt__": ()}]


def test_breakpoints_per_call() -> None:
    graph = saved(abc())

    before = graph.invoke({"x": 0}, thread("1"), interrupt_before=["c"])
    before_state = graph.get_state(thread("1"))
    after = graph.invoke({"x": 0}, thread("2"), interrupt_after=["b"])
    after_state = graph.get_state(thread("2"))

    assert before == after == {"x": 0, "log": ["a", "b"]}
    assert before_state.next == after_state.next == ("c",)
    assert graph.invoke(None, thread("1")) == {"x": 0, "log": ["a", "b", "c"]}
    assert graph.invoke(None, thread("2")) == {"x": 0, "log": ["a", "b", "c"]}


def test_interrupt_before_every_node_steps_through_the_graph() -> None:
    graph = saved(abc(), interrupt_before="*")

    outputs = [graph.invoke({"x": 0}, thread())]
    outputs += [graph.invoke(None, thread()) for _ in range(4)]

    assert [o["log"] for o in outputs] == [
        [],
        ["a"],
        ["a", "b"],
        ["a", "b", "c"],
        ["a", "b", "c"],
    ]


# -- history -----------------------------------------------------------------------------


def finished_interrupt_thread() -> Any:
    graph = saved(interrupt_chain())
    graph.invoke({"x": 0}, thread())
    graph.invoke(Command(resume="bob"), thread())
    return graph


def test_get_state_history_is_newest_first_back_to_the_input_checkpoint() -> None:
    graph = finished_interrupt_thread()

    history = list(graph.get_state_history(thread()))

    assert [(s.metadata["step"], s.metadata["source"], s.next) for s in history] == [
        (3, "loop", ()),
        (2, "loop", ("post",)),
        (1, "loop", ("ask",)),
        (0, "loop", ("pre",)),
        (-1, "input", ("__start__",)),
    ]
    assert [s.values for s in history] == [
        {"x": 0, "log": ["pre", "ans:bob", "post"]},
        {"x": 0, "log": ["pre", "ans:bob"]},
        {"x": 0, "log": ["pre"]},
        {"x": 0, "log": []},
        {"log": []},
    ]


def test_get_state_history_links_each_checkpoint_to_its_parent() -> None:
    history = list(finished_interrupt_thread().get_state_history(thread()))

    for newer, older in zip(history, history[1:], strict=False):
        assert newer.parent_config == older.config
        assert (
            newer.config["configurable"]["checkpoint_id"]
            > older.config["configurable"]["checkpoint_id"]
        )
    assert history[-1].parent_config is None


def test_get_state_history_records_what_each_step_did() -> None:
    history = list(finished_interrupt_thread().get_state_history(thread()))

    assert [[(t.name, t.result) for t in s.tasks] for s in history] == [
        [],
        [("post", {"log": ["post"]})],
        [("ask", {"log": ["ans:bob"]})],
        [("pre", {"log": ["pre"]})],
        [("__start__", {"x": 0})],
    ]
    assert interrupt_values(history[2].tasks[0].interrupts) == [{"q": "name?"}]


def test_get_state_history_limit_before_and_filter() -> None:
    graph = finished_interrupt_thread()
    history = list(graph.get_state_history(thread()))

    assert steps(graph, thread()) == [3, 2, 1, 0, -1]
    assert [s.metadata["step"] for s in graph.get_state_history(thread(), limit=2)] == [
        3,
        2,
    ]
    assert [
        s.metadata["step"]
        for s in graph.get_state_history(thread(), before=history[2].config)
    ] == [0, -1]
    assert [
        s.metadata["step"]
        for s in graph.get_state_history(thread(), filter={"source": "input"})
    ] == [-1]


def test_get_state_of_an_unknown_thread_is_empty() -> None:
    graph = saved(abc())

    state = graph.get_state(thread("none"))

    assert (state.values, state.next, state.tasks, state.metadata) == ({}, (), (), None)
    assert list(graph.get_state_history(thread("none"))) == []


def test_get_state_of_a_past_checkpoint_matches_its_history_entry() -> None:
    graph = saved(abc())
    graph.invoke({"x": 0}, thread())

    for entry in graph.get_state_history(thread()):
        state = graph.get_state(entry.config)
        assert (state.values, state.next) == (entry.values, entry.next)


def test_invoke_from_a_past_checkpoint_replays_from_there() -> None:
    graph = saved(interrupt_chain())
    graph.invoke({"x": 0}, thread())
    graph.invoke(Command(resume="z"), thread())
    input_checkpoint = list(graph.get_state_history(thread()))[-1]

    replay = graph.invoke(None, input_checkpoint.config)

    assert without_interrupt(replay) == {"x": 0, "log": ["pre"]}
    assert interrupt_values(replay["__interrupt__"]) == [{"q": "name?"}]


def test_state_without_a_checkpointer_raises_value_error() -> None:
    graph = abc().compile()

    with pytest.raises(ValueError):
        graph.get_state(thread())
    with pytest.raises(ValueError):
        graph.update_state(thread(), {"x": 1})


# -- update_state ---------------------------------------------------------------------------


def test_update_state_as_the_last_node_that_ran() -> None:
    graph = saved(abc(), interrupt_before=["b"])
    graph.invoke({"x": 0}, thread())

    config = graph.update_state(thread(), {"x": 42, "log": ["manual"]})
    state = graph.get_state(thread())

    assert sorted(config["configurable"]) == [
        "checkpoint_id",
        "checkpoint_ns",
        "thread_id",
    ]
    assert (
        state.config["configurable"]["checkpoint_id"]
        == config["configurable"]["checkpoint_id"]
    )
    assert state.values == {"x": 42, "log": ["a", "manual"]}  # through the reducer
    assert (state.next, state.metadata["source"], state.metadata["step"]) == (
        ("b",),
        "update",
        2,
    )
    assert graph.invoke(None, thread()) == {"x": 42, "log": ["a", "manual", "b", "c"]}


def test_update_state_as_a_named_node_follows_its_edges() -> None:
    graph = saved(abc(), interrupt_before=["b"])
    graph.invoke({"x": 0}, thread())

    graph.update_state(thread(), {"log": ["as-b"]}, as_node="b")
    state = graph.get_state(thread())

    assert state.values == {"x": 0, "log": ["a", "as-b"]}
    assert state.next == ("c",)
    assert graph.invoke(None, thread()) == {"x": 0, "log": ["a", "as-b", "c"]}


def test_update_state_after_parallel_nodes_is_ambiguous() -> None:
    graph = saved(parallel(("a", appender("a")), ("b", appender("b"))))
    graph.invoke({"x": 0}, thread())
    history = steps(graph, thread())

    with pytest.raises(InvalidUpdateError, match="Ambiguous update, specify as_node"):
        graph.update_state(thread(), {"x": 1})

    assert steps(graph, thread()) == history


def test_update_state_as_an_unknown_node_raises() -> None:
    graph = saved(abc())
    graph.invoke({"x": 0}, thread())

    with pytest.raises(InvalidUpdateError, match="nope"):
        graph.update_state(thread(), {"x": 1}, as_node="nope")


def test_update_state_on_a_fresh_thread_starts_it() -> None:
    graph = saved(abc())

    graph.update_state(thread("fresh"), {"x": 1})
    state = graph.get_state(thread("fresh"))

    assert state.values == {"x": 1, "log": []}
    assert (state.next, state.metadata["source"], state.metadata["step"]) == (
        ("a",),
        "update",
        0,
    )
    assert graph.invoke(None, thread("fresh")) == {"x": 1, "log": ["a", "b", "c"]}


def test_update_state_with_an_unknown_key_raises() -> None:
    # Issue 3, deliberate difference (a): unknown keys are refused everywhere.
    graph = saved(abc())
    graph.invoke({"x": 0}, thread())

    with pytest.raises(InvalidUpdateError, match="'zzz'"):
        graph.update_state(thread(), {"zzz": 1})


# -- failures ----------------------------------------------------------------------------------


def test_a_failing_task_saves_no_new_step_and_keeps_siblings_results() -> None:
    def boom(state: Any) -> dict[str, Any]:
        raise KeyError("boom")

    graph = saved(parallel(("a", lambda s: {"x": 10, "log": ["a"]}), ("boom", boom)))

    with pytest.raises(KeyError, match="boom"):
        graph.invoke({"x": 1}, thread())

    state = graph.get_state(thread())
    assert steps(graph, thread()) == [0, -1]
    assert state.next == ("boom",)
    assert state.values == {
        "x": 10,
        "log": ["a"],
    }  # the finished sibling's writes are kept
    errors = {t.name: t.error for t in state.tasks}
    assert errors["a"] is None
    assert "boom" in str(errors["boom"])


def test_a_conflicting_step_saves_no_new_step() -> None:
    graph = saved(parallel(("a", lambda s: {"x": 1}), ("b", lambda s: {"x": 2})))

    with pytest.raises(InvalidUpdateError, match="At key 'x'"):
        graph.invoke({"x": 0}, thread())

    assert steps(graph, thread()) == [0, -1]


# -- subgraphs ------------------------------------------------------------------------------


def parent_of_asking_child() -> tuple[Any, list[str]]:
    calls: list[str] = []

    def child_ask(state: Any) -> dict[str, Any]:
        calls.append("child_ask")
        return {"log": ["child:" + interrupt("child q")]}

    child_builder = chain(["c1"])
    child_builder.add_node("child_ask", child_ask)
    child_builder.add_edge("c1", "child_ask")
    builder = chain(["p1"])
    builder.add_node("sub", child_builder.compile())
    builder.add_node("p2", appender("p2"))
    builder.add_edge("p1", "sub")
    builder.add_edge("sub", "p2")
    return saved(builder), calls


def test_subgraph_interrupt_surfaces_in_the_parent() -> None:
    graph, _ = parent_of_asking_child()

    result = graph.invoke({"x": 0}, thread())
    state = graph.get_state(thread())

    assert without_interrupt(result) == {"x": 0, "log": ["p1"]}
    assert interrupt_values(result["__interrupt__"]) == ["child q"]
    assert state.next == ("sub",)
    (task,) = state.tasks
    assert interrupt_values(task.interrupts) == ["child q"]
    assert interrupt_values(state.interrupts) == ["child q"]
    assert sorted(task.state["configurable"]) == ["checkpoint_ns", "thread_id"]
    assert task.state["configurable"]["checkpoint_ns"].startswith("sub:")


def test_get_state_with_subgraphs_nests_the_child_snapshot() -> None:
    graph, _ = parent_of_asking_child()
    graph.invoke({"x": 0}, thread())

    (task,) = graph.get_state(thread(), subgraphs=True).tasks

    child = task.state
    assert isinstance(child, StateSnapshot)
    assert child.values == {"x": 0, "log": ["p1", "c1"]}
    assert child.next == ("child_ask",)
    assert child.metadata["step"] == 1
    assert interrupt_values(child.interrupts) == ["child q"]
    assert child.config["configurable"]["checkpoint_ns"].startswith("sub:")
    assert child.interrupts[0].id == task.interrupts[0].id


def test_subgraph_interrupt_resumes_from_the_parent() -> None:
    graph, calls = parent_of_asking_child()
    graph.invoke({"x": 0}, thread())

    result = graph.invoke(Command(resume="yes"), thread())

    assert result == {"x": 0, "log": ["p1", "p1", "c1", "child:yes", "p2"]}
    assert calls == ["child_ask", "child_ask"]
    state = graph.get_state(thread(), subgraphs=True)
    assert (state.next, state.tasks, state.metadata["step"]) == ((), (), 3)


def test_subgraph_interrupt_and_resume_stream_with_namespaces() -> None:
    graph, _ = parent_of_asking_child()

    first = [
        (tuple(p.split(":")[0] for p in ns), chunk)
        for ns, chunk in graph.stream(
            {"x": 0}, thread(), stream_mode="updates", subgraphs=True
        )
    ]
    second = [
        (tuple(p.split(":")[0] for p in ns), chunk)
        for ns, chunk in graph.stream(
            Command(resume="ok"), thread(), stream_mode="updates", subgraphs=True
        )
    ]

    assert [(ns, next(iter(c))) for ns, c in first] == [
        ((), "p1"),
        (("sub",), "c1"),
        (("sub",), "__interrupt__"),
        ((), "__interrupt__"),
    ]
    assert interrupt_values(first[-1][1]["__interrupt__"]) == ["child q"]
    assert second == [
        (("sub",), {"child_ask": {"log": ["child:ok"]}}),
        ((), {"sub": {"x": 0, "log": ["p1", "c1", "child:ok"]}}),
        ((), {"p2": {"log": ["p2"]}}),
    ]
    assert steps(graph, thread()) == [3, 2, 1, 0, -1]


def test_stateful_subgraph_keeps_its_state_across_parent_runs() -> None:
    child = chain(["c"]).compile(checkpointer=True)
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LogState)
    builder.add_node("sub", child)
    builder.add_edge(START, "sub")
    graph = saved(builder)

    assert graph.invoke({"x": 0, "log": []}, thread()) == {"x": 0, "log": ["c"]}
    # child remembers ["c"], gets the parent's ["c"] as input, then adds "c"
    assert graph.invoke({"x": 0, "log": []}, thread()) == {
        "x": 0,
        "log": ["c", "c", "c", "c"],
    }

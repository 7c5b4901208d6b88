"""DeltaChannel and UntrackedValue through whole runs, on every saver.

Expected values, metadata and histories are what LangGraph 1.2 gives for the
same graph (observed with its InMemorySaver).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest

from engine.channels import DeltaChannel, UntrackedValue
from engine.checkpoint.base import BaseCheckpointSaver
from engine.graph import END, START, StateGraph
from engine.graph.state import CompiledStateGraph
from engine.types import Overwrite
from tests._support.savers import SaverSpec


def extend(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    out = list(state)
    for write in writes:
        out.extend(write if isinstance(write, list) else [write])
    return out


class State(TypedDict):
    items: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=3)]
    n: int


def _graph(saver: BaseCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"items": [f"a{s['n']}"], "n": s["n"] + 1})
    builder.add_node("b", lambda s: {"items": [f"b{s['n']}"]})
    builder.add_node("j", lambda s: {})
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge(["a", "b"], "j")
    builder.add_conditional_edges(
        "j", lambda s: "end" if s["n"] >= 5 else "go", {"go": "a", "end": END}
    )
    return builder.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "t"}}

# (step, source, items, counters) of each checkpoint, newest first (LangGraph's)
HISTORY = [
    (3, "loop", ["x", "a0", "b0", "a1"], None),
    (2, "loop", ["x", "a0", "b0"], {"items": [2, 4]}),
    (1, "loop", ["x", "a0", "b0"], {"items": [2, 3]}),
    (0, "loop", ["x"], {"items": [1, 2]}),
    (-1, "input", [], {"items": [0, 1]}),
]


def test_values_history_and_counters_match_langgraph(
    saver: BaseCheckpointSaver,
) -> None:
    graph = _graph(saver)

    out = graph.invoke({"items": ["x"], "n": 0}, CONFIG)

    assert out == {"items": ["x", "a0", "b0", "a1"], "n": 2}
    seen = [
        (
            s.metadata["step"],
            s.metadata["source"],
            s.values["items"],
            s.metadata.get("counters_since_delta_snapshot"),
        )
        for s in graph.get_state_history(CONFIG)
    ]
    assert seen == HISTORY


def test_only_snapshot_steps_store_the_value(saver: BaseCheckpointSaver) -> None:
    graph = _graph(saver)
    graph.invoke({"items": ["x"], "n": 0}, CONFIG)

    stored = {
        t.metadata["step"]: t.checkpoint["channel_values"].get("items", "absent")
        for t in saver.list(CONFIG)
    }

    # the third write (step 3) reaches snapshot_frequency=3
    assert stored == {
        3: ["x", "a0", "b0", "a1"],
        2: "absent",
        1: "absent",
        0: "absent",
        -1: "absent",
    }


def test_history_lists_the_writes_since_the_seed(saver: BaseCheckpointSaver) -> None:
    graph = _graph(saver)
    graph.invoke({"items": ["x"], "n": 0}, CONFIG)
    step2 = next(s for s in graph.get_state_history(CONFIG) if s.metadata["step"] == 2)
    head = graph.get_state(CONFIG)

    at_step2 = saver.get_delta_channel_history(config=step2.config, channels=["items"])
    at_head = saver.get_delta_channel_history(config=head.config, channels=["items"])

    assert [w[1:] for w in at_step2["items"]["writes"]] == [
        ("items", ["x"]),
        ("items", ["a0"]),
        ("items", ["b0"]),
    ]
    assert "seed" not in at_step2["items"]
    # the head stores its own snapshot: the walk starts at its parent
    assert [w[2] for w in at_head["items"]["writes"]] == [["x"], ["a0"], ["b0"], ["a1"]]
    assert saver.get_delta_channel_history(config=head.config, channels=[]) == {}


def test_a_second_run_resumes_from_snapshot_plus_writes(
    saver_spec: SaverSpec,
) -> None:
    with saver_spec.open() as first:
        _graph(first).invoke({"items": ["x"], "n": 0}, CONFIG)
        _graph(first).invoke({"items": ["y"], "n": 3}, CONFIG)
        expected = _graph(first).get_state(CONFIG).values
        if not saver_spec.shared:
            reopened = first
    if saver_spec.shared:
        with saver_spec.open() as reopened:
            assert _graph(reopened).get_state(CONFIG).values == expected
    else:
        assert _graph(reopened).get_state(CONFIG).values == expected
    assert expected == {
        "items": ["x", "a0", "b0", "a1", "y", "a3", "b3", "a4"],
        "n": 5,
    }


def test_update_state_and_overwrite_are_kept(saver: BaseCheckpointSaver) -> None:
    graph = _graph(saver)
    graph.invoke({"items": ["x"], "n": 0}, CONFIG)

    graph.update_state(CONFIG, {"items": ["u"]}, as_node="j")
    assert graph.get_state(CONFIG).values["items"] == ["x", "a0", "b0", "a1", "u"]
    graph.update_state(CONFIG, {"items": Overwrite(["reset"])}, as_node="j")
    graph.update_state(CONFIG, {"items": ["v"]}, as_node="j")

    assert graph.get_state(CONFIG).values["items"] == ["reset", "v"]


def test_forking_an_old_checkpoint_does_not_replay_its_other_branch(
    saver: BaseCheckpointSaver,
) -> None:
    graph = _graph(saver)
    graph.invoke({"items": ["x"], "n": 0}, CONFIG)
    by_step = {s.metadata["step"]: s.config for s in graph.get_state_history(CONFIG)}

    forked = graph.update_state(by_step[1], {"items": ["f"]}, as_node="j")

    assert graph.get_state(forked).values["items"] == ["x", "a0", "b0", "f"]
    # the original branch still reads as before
    assert graph.get_state(by_step[2]).values["items"] == ["x", "a0", "b0"]
    assert graph.get_state(by_step[3]).values["items"] == ["x", "a0", "b0", "a1"]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_every_durability_rebuilds_the_same_value(
    saver: BaseCheckpointSaver, durability: str
) -> None:
    graph = _graph(saver)

    graph.invoke({"items": ["x"], "n": 3}, CONFIG, durability=durability)  # type: ignore[arg-type]
    graph.invoke({"items": ["y"], "n": 3}, CONFIG, durability=durability)  # type: ignore[arg-type]

    expected = ["x", "a3", "b3", "a4", "y", "a3", "b3", "a4"]
    assert graph.get_state(CONFIG).values == {"items": expected, "n": 5}
    history = [s.values["items"] for s in graph.get_state_history(CONFIG)]
    if durability == "exit":
        assert history == [expected, expected[:4]]
    else:
        assert history[:4] == [expected, expected[:7], expected[:7], expected[:5]]
        assert len(history) == 10


async def test_async_runs_read_and_write_delta_channels(
    asaver: BaseCheckpointSaver,
) -> None:
    graph = _graph(asaver)
    await graph.ainvoke({"items": ["x"], "n": 0}, CONFIG)
    await graph.ainvoke({"items": ["y"], "n": 4}, CONFIG)

    state = await graph.aget_state(CONFIG)
    history = [s.values["items"] async for s in graph.aget_state_history(CONFIG)]
    writes = await asaver.aget_delta_channel_history(
        config=state.config, channels=["items"]
    )

    assert state.values["items"] == ["x", "a0", "b0", "a1", "y", "a4", "b4"]
    assert history[0] == state.values["items"]
    assert history[2:] == [
        ["x", "a0", "b0", "a1", "y"],
        ["x", "a0", "b0", "a1"],
        ["x", "a0", "b0", "a1"],
        ["x", "a0", "b0"],
        ["x", "a0", "b0"],
        ["x"],
        [],
    ]
    assert writes["items"]["seed"] == ["x", "a0", "b0", "a1"]


class Scratch(TypedDict):
    total: int
    scratch: Annotated[str, UntrackedValue]


def test_untracked_value_is_never_stored(saver: BaseCheckpointSaver) -> None:
    builder = StateGraph(Scratch)
    builder.add_node("put", lambda s: {"scratch": "secret", "total": s["total"] + 1})
    builder.add_node("read", lambda s: {"total": s["total"] + len(s["scratch"])})
    builder.add_edge(START, "put")
    builder.add_edge("put", "read")
    graph = builder.compile(checkpointer=saver)

    out = graph.invoke({"total": 0}, CONFIG)

    assert out == {"total": 7, "scratch": "secret"}
    assert "scratch" not in graph.get_state(CONFIG).values
    for saved in saver.list(CONFIG):
        assert "scratch" not in saved.checkpoint["channel_values"]

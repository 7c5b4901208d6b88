"""Append-only list channels are stored as deltas, and still read back whole."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import orjson
import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.graph import END, START, StateGraph
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)

STEPS = 2_000


def _item(i: int) -> dict:
    return {"role": "user", "content": f"message number {i}"}


@pytest.mark.slow
def test_growing_list_reads_back_whole_and_stores_only_growth(
    saver: BaseCheckpointSaver,
) -> None:
    checkpoint = make_checkpoint({"messages": [], "step": -1})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    sizes: dict[int, int] = {}
    for step in range(STEPS):
        checkpoint, changed = next_checkpoint(
            checkpoint, {"step": step}, append={"messages": [_item(step)]}, step=step
        )
        config = saver.put(config, checkpoint, make_metadata(step, "loop"), changed)
        if step + 1 in (STEPS // 2, STEPS):
            sizes[step + 1] = saver.stored_bytes("t1")

    full_size = len(orjson.dumps([_item(i) for i in range(STEPS)]))
    per_step = (sizes[STEPS] - sizes[STEPS // 2]) / (STEPS // 2)
    assert per_step < full_size / 10, (per_step, full_size)

    items = [_item(i) for i in range(STEPS)]
    seen = 0
    for loaded in saver.list(make_config("t1")):
        n = loaded.checkpoint["channel_values"]["step"] + 1
        assert loaded.checkpoint["channel_values"]["messages"] == items[:n]
        seen += 1
    assert seen == STEPS + 1


def test_delta_chains_on_two_branches_read_independently(
    saver: BaseCheckpointSaver,
) -> None:
    root = make_checkpoint({"log": ["a"]})
    root_config = saver.put(
        make_config("t1"), root, make_metadata(), root["channel_versions"]
    )
    left, left_changed = next_checkpoint(root, append={"log": ["left"]})
    right, right_changed = next_checkpoint(root, append={"log": ["right", "more"]})

    left_config = saver.put(root_config, left, make_metadata(0), left_changed)
    right_config = saver.put(root_config, right, make_metadata(0), right_changed)
    after, after_changed = next_checkpoint(left, append={"log": ["again"]})
    after_config = saver.put(left_config, after, make_metadata(1), after_changed)

    def log(config):
        loaded = saver.get_tuple(config)
        assert loaded is not None
        return loaded.checkpoint["channel_values"]["log"]

    assert log(root_config) == ["a"]
    assert log(left_config) == ["a", "left"]
    assert log(right_config) == ["a", "right", "more"]
    assert log(after_config) == ["a", "left", "again"]


def test_list_replaced_after_deltas_is_stored_whole(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({"log": []})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    for i in range(5):
        checkpoint, changed = next_checkpoint(checkpoint, append={"log": [i]})
        config = saver.put(config, checkpoint, make_metadata(i), changed)
    checkpoint, changed = next_checkpoint(checkpoint, {"log": ["reset"]})
    config = saver.put(config, checkpoint, make_metadata(5), changed)
    checkpoint, changed = next_checkpoint(checkpoint, append={"log": ["next"]})
    config = saver.put(config, checkpoint, make_metadata(6), changed)

    loaded = saver.get_tuple(config)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["log"] == ["reset", "next"]


def test_delta_hint_with_truncation_start(saver: BaseCheckpointSaver) -> None:
    # The runtime's hint says value == base[:start] + new items (start may be
    # shorter than the base, e.g. after a RemoveMessage); the saver must honour it.
    checkpoint = make_checkpoint({"log": [1, 2, 3]})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    nxt, changed = next_checkpoint(checkpoint, append={"log": [9]})
    nxt["channel_values"]["log"] = [1, 2, 9]
    nxt["channel_deltas"] = {"log": (checkpoint["channel_versions"]["log"], 2)}

    config = saver.put(config, nxt, make_metadata(0), changed)

    loaded = saver.get_tuple(config)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["log"] == [1, 2, 9]


def test_only_lists_are_remembered_as_delta_bases(saver: BaseCheckpointSaver) -> None:
    """The SQL savers remember what they stored so a later step's delta needs no
    read of its base (``ChainBook``); a counter can never be a base, so a loop of
    a thousand steps must not fill that memory with its versions."""
    book = getattr(saver, "_chains", None)
    if book is None:
        pytest.skip("the memory saver reads its bases from memory")

    class S(TypedDict):
        n: int
        log: Annotated[list[str], operator.add]

    def tick(state: S) -> dict:
        return {"n": state["n"] + 1, "log": [f"step {state['n']}"]}

    builder = StateGraph(S)
    builder.add_node("tick", tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", lambda s: "tick" if s["n"] < 30 else END)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"n": 0, "log": []}, {"configurable": {"thread_id": "b1"}})

    remembered = {channel for (_, _, channel, _) in book._known}
    assert remembered == {"log"}

"""The in-memory saver keeps a run's large input once (``_memory_inputs``).

The input checkpoint keeps the input dict (``__start__``), the step after it the
same values in their state channels: a large value there is kept as a record
that reads it from the input's dict. Every read must give what a second copy
would have given, and only the save right after the input may share.
"""

from __future__ import annotations

import copy
from typing import Any, TypedDict

import pytest

from engine.checkpoint._blobs import MEMBER, BlobRecord, member_record
from engine.checkpoint.base import empty_checkpoint
from engine.checkpoint.memory import InMemorySaver
from engine.errors import SerializationError
from engine.graph import END, START, StateGraph


class State(TypedDict, total=False):
    n: int
    items: list[dict[str, Any]]
    text: str
    small: list[int]


def _loop(state: State) -> dict[str, Any]:
    return {"n": state["n"] + 1}


def _graph(saver: InMemorySaver, steps: int = 3) -> Any:
    builder = StateGraph(State)
    builder.add_node("tick", _loop)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges(
        "tick", lambda s: "tick" if s["n"] < steps else END, ["tick", END]
    )
    return builder.compile(checkpointer=saver)


def _input() -> dict[str, Any]:
    return {
        "n": 0,
        "items": [{"id": i, "tags": ["a", (i, "t")]} for i in range(100)],
        "text": "x" * 5000,
        "small": [1, 2, 3],
    }


def _records(saver: InMemorySaver, thread: str, channel: str) -> list[Any]:
    return [v for k, v in saver.blobs.items() if k[0] == thread and k[2] == channel]


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_large_input_values_are_kept_once_and_read_back_exactly() -> None:
    saver = InMemorySaver()
    graph = _graph(saver)
    given = _input()
    expected = copy.deepcopy(given)

    graph.invoke(given, _config("t"))

    for channel in ("items", "text"):  # large: read from the input's dict
        (record,) = _records(saver, "t", channel)
        assert isinstance(record, BlobRecord) and record.kind == MEMBER
    (small,) = _records(saver, "t", "small")  # small: its own copy
    assert isinstance(small, bytes)
    history = list(graph.get_state_history(_config("t")))
    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
    for snapshot in history[:-1]:
        for key in ("items", "text", "small"):
            assert snapshot.values[key] == expected[key]
        assert type(snapshot.values["items"][5]["tags"][1]) is tuple
    # every read decodes afresh: changing what one read gave changes no other
    first = graph.get_state(_config("t")).values["items"]
    first.append("mine")
    assert graph.get_state(_config("t")).values["items"] == expected["items"]


def _put(
    saver: InMemorySaver,
    parent: str | None,
    source: str,
    values: dict[str, Any],
    version: str,
) -> str:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = dict.fromkeys(values, version)
    conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ""}
    if parent is not None:
        conf["checkpoint_id"] = parent
    saved = saver.put(
        {"configurable": conf},
        checkpoint,
        {"source": source, "step": -1 if source == "input" else 0},
        dict.fromkeys(values, version),
    )
    return str(saved["configurable"]["checkpoint_id"])


@pytest.mark.parametrize(
    ("source", "after_input", "shared"),
    [
        ("loop", True, True),  # the run's first step: the one save that shares
        ("update", True, False),  # update_state naming the input checkpoint
        ("fork", True, False),
        ("loop", False, False),  # the input checkpoint is not its parent
    ],
)
def test_only_the_runs_next_step_reads_values_from_the_input(
    source: str, after_input: bool, shared: bool
) -> None:
    """The same object, changed in place since the input was saved, is stored as
    it now is by every other save (update_state and fork run after code that
    may have changed it)."""
    saver = InMemorySaver()
    items = [{"id": i} for i in range(100)]
    if after_input:
        first = _put(saver, None, "input", {"__start__": {"items": items}}, "1")
    else:  # a run replaying from ``first`` right after another run's input
        first = _put(saver, None, "loop", {"other": 1}, "1")
        _put(saver, first, "input", {"__start__": {"items": items}}, "2")
    if not shared:
        items.append({"id": "late"})

    _put(saver, first, source, {"items": items}, "3")

    (record,) = _records(saver, "t", "items")
    assert (isinstance(record, BlobRecord) and record.kind == MEMBER) is shared
    if not shared:
        state = saver.get_tuple(_config("t"))
        assert state is not None
        assert state.checkpoint["channel_values"]["items"][-1] == {"id": "late"}


def test_what_a_later_step_stores_of_the_same_object_is_its_own() -> None:
    """A node that changes the input's list in place and writes it back stores
    the changed list (the sharing is for the save after the input only)."""
    saver = InMemorySaver()
    builder = StateGraph(State)

    def grow(state: State) -> dict[str, Any]:
        state["items"].append({"id": "grown"})
        return {"items": state["items"], "n": state["n"] + 1}

    builder.add_node("grow", grow)
    builder.add_edge(START, "grow")
    builder.add_edge("grow", END)
    graph = builder.compile(checkpointer=saver)

    graph.invoke(_input(), _config("t"))

    assert graph.get_state(_config("t")).values["items"][-1] == {"id": "grown"}
    step_0 = list(graph.get_state_history(_config("t")))[1]
    assert step_0.metadata["step"] == 0
    assert len(step_0.values["items"]) == 100


@pytest.mark.parametrize("how", ["prune", "copy"])
def test_shared_values_survive_pruning_and_copying(how: str) -> None:
    """The input checkpoint may go; the value the next ones read from stays."""
    saver = InMemorySaver()
    graph = _graph(saver)
    expected = copy.deepcopy(_input())
    graph.invoke(_input(), _config("t"))

    if how == "prune":
        saver.prune(["t"])
        thread = "t"
        assert len(list(graph.get_state_history(_config(thread)))) == 1
    else:
        saver.copy_thread("t", "copy")
        saver.delete_thread("t")
        thread = "copy"

    assert graph.get_state(_config(thread)).values["items"] == expected["items"]
    assert graph.get_state(_config(thread)).values["text"] == expected["text"]


def test_a_member_record_that_reads_nothing_is_reported_as_corrupt() -> None:
    saver = InMemorySaver()
    graph = _graph(saver)
    graph.invoke(_input(), _config("t"))
    key = next(k for k in saver.blobs if k[0] == "t" and k[2] == "items")
    for broken in (
        member_record("__start__", "no-such-version", "items"),
        member_record("__start__", key[3], "no-such-key"),
        BlobRecord(MEMBER, "json", b"[1]", "x"),
    ):
        saver.blobs[key] = broken
        with pytest.raises(SerializationError, match="corrupt"):
            graph.get_state(_config("t"))

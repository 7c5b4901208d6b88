"""The loop's own saves to the in-memory saver (``put_loop_step``): what they
store is what the loop handed over at the time of each save, a wide checkpoint
keeps the loop's node dicts instead of copies, and a saver whose class
overrides ``put_step`` still has its override called."""

from __future__ import annotations

import copy
import math
import operator
import random
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from engine.checkpoint._memory_compact import (
    SEEN_AS_DICTS,
    compact_loop_structure,
    expand_structure,
)
from engine.checkpoint.base import EXPECTED_HEAD
from engine.checkpoint.memory import InMemorySaver
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer, PlainDict
from engine.errors import CheckpointConflictError
from engine.graph import END, START, StateGraph
from engine.pregel._persist import loop_step_of
from tests._support.graphs import chain, thread
from tests._support.savers import file_tables

NODES = [f"n{i}" for i in range(30)]  # wide: compact tuples, not one JSON object


class Recording(InMemorySaver):
    """Keeps a deep copy of every structure the loop hands over, when it does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handed: dict[str, dict[str, Any]] = {}
        self.metadata_types: list[type] = []

    def put_loop_step(self, config, task_writes, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def,override]
        self.handed[checkpoint["id"]] = copy.deepcopy(
            {
                k: checkpoint[k]
                for k in ("channel_versions", "versions_seen", "updated_channels")
            }
        )
        self.metadata_types.append(type(metadata))
        return super().put_loop_step(
            config, task_writes, checkpoint, metadata, new_versions
        )


class OwnPutStep(InMemorySaver):
    """A subclass with its own ``put_step``: the loop must call it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def put_step(self, *args: Any) -> Any:  # type: ignore[override]
        self.calls += 1
        return super().put_step(*args)


def test_what_a_wide_run_stores_is_what_the_loop_handed_over_at_each_save():
    """Deep copies taken when each save was made equal what reads back after
    the run: the loop changed none of the dicts the saver kept (a node's dict
    changed in place later would show here as a later version)."""
    saver = Recording()
    graph = chain(NODES).compile(checkpointer=saver)
    graph.invoke({"x": 0, "log": []}, thread())
    graph.invoke({"x": 1, "log": []}, thread())  # a second run on the thread

    assert len(saver.handed) == 2 * (len(NODES) + 2)
    for snapshot in graph.get_state_history(thread()):
        stored = saver.get_tuple(snapshot.config)
        assert stored is not None
        handed = saver.handed.get(stored.checkpoint["id"])
        if handed is None:  # the input checkpoints come through put_loop_step too
            pytest.fail(f"not saved by the loop: {stored.checkpoint['id']}")
        for key, value in handed.items():
            assert stored.checkpoint[key] == value, key


def test_the_wide_form_keeps_the_loops_node_dicts_and_shares_names():
    saver = InMemorySaver()
    graph = chain(NODES).compile(checkpointer=saver)
    graph.invoke({"x": 0, "log": []}, thread())

    rows = [row for _, row in sorted(saver.storage["t1"][""].items())]
    compact = [row[0][1] for row in rows if not isinstance(row[0], bytes)]
    assert compact, "a 30-node chain is kept as compact tuples"
    last_keys, last_values = compact[-1]
    assert SEEN_AS_DICTS in last_keys and "versions_seen" not in last_keys
    nodes, dicts = last_values[last_keys.index(SEEN_AS_DICTS)]
    assert all(type(d) is dict for d in dicts)
    # A node that did not run again between two checkpoints is kept once.
    before_keys, before_values = compact[-2]
    before_nodes, before_dicts = before_values[before_keys.index(SEEN_AS_DICTS)]
    shared = dict(zip(before_nodes, before_dicts, strict=True))
    assert shared["n0"] is dict(zip(nodes, dicts, strict=True))["n0"]


def test_reading_a_wide_checkpoint_gives_fresh_dicts():
    saver = InMemorySaver()
    graph = chain(NODES).compile(checkpointer=saver)
    graph.invoke({"x": 0, "log": []}, thread())

    first = saver.get_tuple(thread())
    assert first is not None
    kept = copy.deepcopy(first.checkpoint["versions_seen"])
    for by in first.checkpoint["versions_seen"].values():
        by["changed"] = "by the caller"
    again = saver.get_tuple(thread())
    assert again is not None
    assert again.checkpoint["versions_seen"] == kept


def test_a_wide_run_kept_in_files_reads_back_after_a_restart(tmp_path: Path):
    with InMemorySaver(factory=file_tables(tmp_path)) as saver:
        graph = chain(NODES).compile(checkpointer=saver)
        graph.invoke({"x": 0, "log": []}, thread())
        before = [
            (s.config, s.values, s.next) for s in graph.get_state_history(thread())
        ]
        head = saver.get_tuple(thread())
    with InMemorySaver(factory=file_tables(tmp_path)) as reopened:
        graph = chain(NODES).compile(checkpointer=reopened)
        after = [
            (s.config, s.values, s.next) for s in graph.get_state_history(thread())
        ]
        again = reopened.get_tuple(thread())
    assert after == before
    assert head is not None and again is not None
    assert again.checkpoint == head.checkpoint


def test_a_subclass_overriding_put_step_has_it_called():
    saver = OwnPutStep()
    assert loop_step_of(saver) is None
    assert loop_step_of(InMemorySaver()) is not None
    graph = chain(["a", "b"]).compile(checkpointer=saver)
    graph.invoke({"x": 0, "log": []}, thread())
    assert saver.calls == 4  # the input, the start step and one per node


def test_a_put_step_set_on_the_saver_itself_is_called():
    saver = InMemorySaver()
    calls: list[str] = []
    own = saver.put_step

    def spy(*args: Any) -> Any:
        calls.append(args[2]["id"])
        return own(*args)

    saver.put_step = spy  # type: ignore[method-assign]
    assert loop_step_of(saver) is None
    chain(["a", "b"]).compile(checkpointer=saver).invoke({"x": 0, "log": []}, thread())
    assert len(calls) == 4


def test_compact_loop_structure_refuses_other_shapes_and_reads_back():
    by_node = {"a": {"c": "1"}, "b": {"c": "2"}}
    checkpoint = {
        "v": 4,
        "id": "x",
        "ts": "t",
        "channel_values": {},
        "channel_versions": {"c": "2"},
        "versions_seen": by_node,
        "updated_channels": ["c"],
    }
    made = compact_loop_structure(checkpoint, (), None)
    assert made is not None
    restored = expand_structure(made[0])
    assert restored["versions_seen"] == by_node
    assert restored["versions_seen"]["a"] is not by_node["a"]  # fresh on reading
    assert restored["updated_channels"] == ["c"]
    # the next save shares the names when they did not change
    again = compact_loop_structure(
        {**checkpoint, "id": "y", "channel_versions": {"c": "3"}}, (), made
    )
    assert again is not None
    keys, values = again[0]
    assert (
        values[keys.index("channel_versions")][0]
        is (made[0][1][made[0][0].index("channel_versions")][0])
    )
    for shape in (
        {**checkpoint, "versions_seen": list(by_node.items())},
        {**checkpoint, "channel_versions": [("c", "2")]},
        {**checkpoint, "updated_channels": ("c",)},
    ):
        assert compact_loop_structure(shape, (), None) is None


# --- the loop's metadata, marked plain when it is -----------------------------------


class Messages(TypedDict):
    log: Annotated[list[str], operator.add]


def _one_step(saver: InMemorySaver) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Messages)
    builder.add_node("a", lambda state: {"log": ["a"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", END)
    return builder.compile(checkpointer=saver)


def test_a_steps_metadata_is_marked_plain_and_reads_back_as_a_dict():
    saver = Recording()
    config = {**thread(), "metadata": {"who": "me", "n": 3}}
    _one_step(saver).invoke({"log": []}, config)
    assert saver.metadata_types == [dict, PlainDict, PlainDict]  # input: not
    stored = saver.get_tuple(thread())
    assert stored is not None
    assert type(stored.metadata) is dict
    assert stored.metadata["who"] == "me" and stored.metadata["writes"] == {
        "a": ["log"]
    }


@pytest.mark.parametrize("value", [math.nan, 2.5, 2**70])
def test_metadata_that_needs_the_walk_is_not_marked_and_reads_back_exactly(
    value: Any,
):
    """A float (NaN needs a tag) in the run's metadata: not marked. A big int
    is plain by the check, marked, and still tagged (orjson refuses it)."""
    saver = Recording()
    config = {**thread(), "metadata": {"value": value}}
    _one_step(saver).invoke({"log": []}, config)
    marked = type(value) is int
    assert saver.metadata_types[-1] is (PlainDict if marked else dict)
    stored = saver.get_tuple(thread())
    assert stored is not None
    got = stored.metadata["value"]
    assert math.isnan(got) if value != value else got == value, got
    assert type(got) is type(value)


# --- a task's scalar writes, kept as they are ---------------------------------------


SCALARS = [0, -(2**70), 2.5, math.inf, "text", "", True, False, None]


def _first_checkpoint(saver: InMemorySaver) -> Any:
    """Put an empty first checkpoint on thread ``t1``; its config."""
    return saver.put(
        {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}},
        {
            "v": 4,
            "id": "1",
            "ts": "t",
            "channel_values": {},
            "channel_versions": {},
            "versions_seen": {},
            "updated_channels": None,
        },
        {},
        {},
    )


def _saved_writes(saver: InMemorySaver, writes: list[tuple[str, Any]]) -> list[Any]:
    config = _first_checkpoint(saver)
    saver.put_writes(config, writes, "task-1", "path")
    stored = saver.get_tuple(config)
    assert stored is not None
    return stored.pending_writes


def test_scalar_writes_are_kept_as_they_are_and_read_back_exactly():
    saver = InMemorySaver()
    writes = [(f"c{i}", value) for i, value in enumerate(SCALARS)]
    pending = _saved_writes(saver, writes)
    assert [(c, v) for _, c, v in pending] == writes
    assert [type(v) for _, _, v in pending] == [type(v) for v in SCALARS]
    ((_, bucket),) = saver.writes.items()
    # one flat tuple, not packed JSON: task id, path, index, then the writes
    assert bucket == ("task-1", "path", 0, *(x for write in writes for x in write))
    # NaN is not equal to itself: read back as NaN
    nan = _saved_writes(InMemorySaver(), [("c", math.nan)])
    assert math.isnan(nan[0][2])


@pytest.mark.parametrize(
    "writes",
    [
        [("c", [1, 2])],  # a list: the task may change it later
        [("c", 1), ("d", {"k": "v"})],
        [("c", (1, 2))],
        [("__error__", "boom")],  # a special write has its own entry
    ],
)
def test_other_writes_are_serialized_as_before(writes: list[tuple[str, Any]]):
    saver = InMemorySaver()
    pending = _saved_writes(saver, writes)
    assert [(c, v) for _, c, v in pending] == writes
    for _, bucket in saver.writes.items():
        entries = bucket.values() if isinstance(bucket, dict) else [bucket]
        assert all("*s" not in entry for entry in entries)
    kept = writes[0][1]
    if isinstance(kept, list):
        kept.append(3)  # changed after the save: the stored write is not
        assert _saved_writes(saver, [])[0][2] == [1, 2]


def test_a_second_task_joins_a_checkpoint_s_lone_scalar_writes():
    saver = InMemorySaver()
    config = _first_checkpoint(saver)
    saver.put_writes(config, [("n", 1), ("flag", None)], "task-b", "b")
    saver.put_writes(config, [("n", 2)], "task-a", "a")
    saver.put_writes(config, [("n", 3)], "task-b", "b")  # already kept: ignored
    stored = saver.get_tuple(config)
    assert stored is not None
    assert stored.pending_writes == [
        ("task-a", "n", 2),
        ("task-b", "n", 1),
        ("task-b", "flag", None),
    ]


def test_stored_bytes_count_scalar_writes_as_packed():
    plain, packed = InMemorySaver(), InMemorySaver(serde=_PackingSerde())
    writes = [("n", 3), ("branch:to:tick", None), ("s", "x")]
    _saved_writes(plain, writes)
    _saved_writes(packed, writes)
    assert plain.stored_bytes("t1") == packed.stored_bytes("t1")


def test_scalar_writes_survive_a_persistent_dict(tmp_path: Path):
    writes = [(f"c{i}", value) for i, value in enumerate(SCALARS)]
    with InMemorySaver(factory=file_tables(tmp_path)) as saver:
        _saved_writes(saver, writes)
    with InMemorySaver(factory=file_tables(tmp_path)) as reopened:
        stored = reopened.get_tuple(thread())
        assert stored is not None
        assert [(c, v) for _, c, v in stored.pending_writes] == writes


class _PackingSerde(JsonPlusSerializer):
    """The default serializer under another class: writes are packed as JSON."""


# -- the one-pass save (``_put_usual_loop_step``) stores what the general one does --

_ID_LIKE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # checkpoint, task
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00"  # creation time
)


def _tables(saver: InMemorySaver) -> Any:
    """The saver's tables with ids and times replaced by their order of first
    appearance (two runs differ in nothing else: versions are seeded)."""
    seen: dict[str, str] = {}

    def norm(value: Any) -> Any:
        if isinstance(value, str) and _ID_LIKE.fullmatch(value):
            return seen.setdefault(value, f"#{len(seen)}")
        if isinstance(value, bytes):
            return _ID_LIKE.sub(lambda m: norm(m.group()), value.decode("latin-1"))
        if isinstance(value, dict):
            return [(norm(k), norm(v)) for k, v in value.items()]
        if isinstance(value, (tuple, list)):
            return (type(value).__name__, [norm(v) for v in value])
        return value

    return norm([dict(saver.storage), dict(saver.writes), dict(saver.blobs)])


class Appended(TypedDict, total=False):
    n: int
    flag: bool | None
    note: Any
    log: Annotated[list[str], operator.add]


def _mixed_graph(appending: bool = False) -> Any:
    """A narrow loop whose steps write ints, None, a dict and, ``appending``,
    an appended list (a delta channel: its saves are the general save's)."""

    def step(state: Appended) -> dict[str, Any]:
        n = state["n"] + 1
        out = {"n": n, "flag": None if n % 2 else True, "note": {"at": n, "t": [n]}}
        return {**out, "log": [f"s{n}"]} if appending else out

    builder = StateGraph(Appended)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: "step" if s["n"] < 6 else END)
    return builder


class Counter(TypedDict):
    x: int


def _wide_counter() -> Any:
    """A 30-node chain of one int channel (no delta channel)."""
    builder = StateGraph(Counter)
    for name in NODES:
        builder.add_node(name, lambda s: {"x": s["x"] + 1})
    builder.add_edge(START, NODES[0])
    for a, b in zip(NODES, NODES[1:], strict=False):
        builder.add_edge(a, b)
    builder.add_edge(NODES[-1], END)
    return builder


@pytest.mark.parametrize("shape", ["narrow", "appending", "wide", "wide appending"])
@pytest.mark.parametrize("ttl", [None, 60.0])
def test_the_one_pass_save_stores_exactly_what_the_general_save_stores(
    shape: str, ttl: float | None, monkeypatch: pytest.MonkeyPatch
):
    """The same runs (seeded versions) with the one-pass save and with it
    turned off store the same tables, ids and times aside; and the one-pass
    save did make the loop's steps (a TTL leaves them all to the general one)."""
    builder, first = {
        "narrow": (_mixed_graph(), {"n": 0}),
        "appending": (_mixed_graph(appending=True), {"n": 0, "log": []}),
        "wide": (_wide_counter(), {"x": 0}),
        "wide appending": (chain(NODES), {"x": 0, "log": []}),
    }[shape]
    inputs = [first, dict(first)]  # a second run on the thread
    made: list[bool] = []
    own = InMemorySaver._put_usual_loop_step

    def counted(self: InMemorySaver, *args: Any) -> bool:
        made.append(own(self, *args))
        return made[-1]

    tables = []
    for one_pass in (True, False):
        if one_pass:
            monkeypatch.setattr(InMemorySaver, "_put_usual_loop_step", counted)
        else:
            monkeypatch.setattr(
                InMemorySaver, "_put_usual_loop_step", lambda self, *args: False
            )
        random.seed(7)
        saver = InMemorySaver(default_ttl=ttl)
        graph = builder.compile(checkpointer=saver)
        outputs = [graph.invoke(inp, thread()) for inp in inputs]
        tables.append((outputs, _tables(saver)))
    assert tables[0] == tables[1]
    if ttl is not None:
        assert True not in made
    elif shape in ("narrow", "wide"):  # all but each run's input checkpoint
        assert made.count(True) == len(made) - len(inputs)


def test_the_one_pass_save_refuses_a_stale_head_and_stores_nothing():
    saver = InMemorySaver()
    graph = _mixed_graph().compile(checkpointer=saver)
    graph.invoke({"n": 0, "log": []}, thread())
    head = saver.get_tuple(thread())
    assert head is not None
    before = _tables(saver)
    checkpoint = copy.deepcopy(head.checkpoint)
    checkpoint["id"] = "ffffffff-ffff-6fff-8fff-ffffffffffff"
    stale = {
        "configurable": {
            "thread_id": "t1",
            "checkpoint_ns": "",
            "checkpoint_id": head.parent_config["configurable"]["checkpoint_id"],  # type: ignore[index]
            EXPECTED_HEAD: "not the head",
        }
    }
    with pytest.raises(CheckpointConflictError):
        saver.put_loop_step(
            stale, [], checkpoint, PlainDict(source="loop", step=9), {"n": "x"}
        )
    assert _tables(saver) == before

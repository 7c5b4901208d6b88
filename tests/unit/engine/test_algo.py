"""The pure super-step algorithm: planning (prepare_next_tasks) and applying writes.

No loop, no saver, no clock: hand-built checkpoints and channel dicts only.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import operator
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from engine._internal._constants import PULL, PUSH, TASKS
from engine._internal._ids import task_id_for
from engine.channels import (
    BaseChannel,
    BinaryOperatorAggregate,
    EphemeralValue,
    LastValue,
    LastValueAfterFinish,
    NamedBarrierValue,
    Topic,
)
from engine.checkpoint.base import Checkpoint, empty_checkpoint
from engine.errors import InvalidUpdateError
from engine.pregel._algo import (
    PregelTaskWrites,
    apply_writes,
    next_names,
    prepare_next_tasks,
    task_path_str,
)
from engine.pregel._node_callable import NodeCallable
from engine.pregel._read import PregelNode
from engine.types import Send


def counter() -> Callable[[], int]:
    """A ``get_next_version`` handing out 1, 2, 3..."""
    return itertools.count(1).__next__


def node(name: str, triggers: Sequence[str], reads: Sequence[str] | str) -> PregelNode:
    return PregelNode(
        name=name,
        triggers=triggers,
        channels=reads,
        bound=NodeCallable(lambda state: state, name),
    )


def writes(
    name: str,
    pairs: Sequence[tuple[str, Any]],
    triggers: Sequence[str] = (),
    path: tuple[Any, ...] | None = None,
) -> PregelTaskWrites:
    return PregelTaskWrites(
        path=path if path is not None else (PULL, name),
        name=name,
        writes=pairs,
        triggers=triggers,
    )


def index(nodes: dict[str, PregelNode]) -> dict[str, tuple[str, ...]]:
    """trigger channel -> subscribed node names (what Pregel precomputes)."""
    out: dict[str, list[str]] = {}
    for name, item in nodes.items():
        for trigger in item.triggers:
            out.setdefault(trigger, []).append(name)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def start(
    channels: dict[str, BaseChannel[Any, Any, Any]],
    nodes: dict[str, PregelNode],
    pairs: Sequence[tuple[str, Any]],
) -> tuple[Checkpoint, Callable[[], int]]:
    """A checkpoint after an input step that wrote ``pairs`` (no triggers consumed)."""
    checkpoint = empty_checkpoint()
    bump = counter()
    apply_writes(checkpoint, channels, [writes("__input__", pairs)], bump, index(nodes))
    return checkpoint, bump


def names(tasks: dict[str, Any]) -> list[str]:
    return sorted(task.name for task in tasks.values())


# -- planning ----------------------------------------------------------------------


def test_prepare_next_tasks_plans_nothing_on_an_empty_checkpoint() -> None:
    nodes = {"a": node("a", ["go:a"], ["x"])}
    channels = {"x": LastValue(int), "go:a": EphemeralValue(None)}

    assert prepare_next_tasks(empty_checkpoint(), nodes, channels, 0) == {}


def test_prepare_next_tasks_plans_only_nodes_whose_trigger_advanced() -> None:
    nodes = {"a": node("a", ["go:a"], ["x"]), "b": node("b", ["go:b"], ["x"])}
    channels = {
        "x": LastValue(int),
        "go:a": EphemeralValue(None),
        "go:b": EphemeralValue(None),
    }
    checkpoint, _ = start(channels, nodes, [("x", 1), ("go:a", None)])

    tasks = prepare_next_tasks(checkpoint, nodes, channels, 0)

    (task,) = tasks.values()
    assert task.name == "a"
    assert task.input == {"x": 1}
    assert task.triggers == ("go:a",)
    assert task.path == (PULL, "a")
    assert task.id in tasks


def test_prepare_next_tasks_reads_a_single_channel_as_a_bare_value() -> None:
    nodes = {"a": node("a", ["x"], "x")}
    channels = {"x": LastValue(int)}
    checkpoint, _ = start(channels, nodes, [("x", 7)])

    (task,) = prepare_next_tasks(checkpoint, nodes, channels, 0).values()

    assert task.input == 7


def test_prepare_next_tasks_task_ids_are_deterministic_per_checkpoint_and_step() -> (
    None
):
    nodes = {"a": node("a", ["x"], ["x"])}
    channels = {"x": LastValue(int)}
    checkpoint, _ = start(channels, nodes, [("x", 1)])

    first = prepare_next_tasks(checkpoint, nodes, channels, 3)
    again = prepare_next_tasks(checkpoint, nodes, channels, 3)
    next_step = prepare_next_tasks(checkpoint, nodes, channels, 4)

    assert list(first) == list(again)
    assert list(first) != list(next_step)


def test_a_pull_task_id_is_the_hash_of_its_parts() -> None:
    """Stored pending writes are matched by task id, so the id of a pull task
    must stay the one its checkpoint, step, name and triggers give."""
    nodes = {"a": node("a", ["x", "go:a"], ["x"])}
    channels = {"x": LastValue(int), "go:a": EphemeralValue(None)}
    checkpoint, _ = start(channels, nodes, [("x", 1), ("go:a", None)])
    expected = task_id_for(checkpoint["id"], "", "3", "a", PULL, "go:a", "x")

    assert list(prepare_next_tasks(checkpoint, nodes, channels, 3)) == [expected]
    assert list(prepare_next_tasks(checkpoint, nodes, channels, 3)) == [expected]
    # the same node under another name, or with other triggers, ids by those
    renamed = {"b": nodes["a"]}
    assert list(prepare_next_tasks(checkpoint, renamed, channels, 3)) == [
        task_id_for(checkpoint["id"], "", "3", "b", PULL, "go:a", "x")
    ]
    nodes["a"].triggers.remove("go:a")
    nodes["a"].refresh_triggers()
    assert list(prepare_next_tasks(checkpoint, nodes, channels, 3)) == [
        task_id_for(checkpoint["id"], "", "3", "a", PULL, "x")
    ]


class _Named(str, enum.Enum):  # noqa: UP042 (str() is "_Named.NODE", not its value)
    NODE = "node"


@pytest.mark.parametrize(
    "parts",
    [
        ("1f1f0252-a3a4-68d9-8000-6d083864e1cf", "", "3", "a", PULL, "go:a"),
        ("cid", "parent:1", "0", "work", PUSH, 7),  # a Send's index
        ("cid", "", "1", "nœud-é", PULL, "x"),  # not ASCII
        ("cid", b"\xffraw", 2),  # bytes as they are
        ("cid", "", "1", _Named.NODE, PULL, True),  # str() of each, not its value
    ],
)
def test_task_ids_are_the_digest_of_the_parts_each_encoded(parts: tuple) -> None:
    """Stored pending writes are matched by task id: however the parts are joined,
    the digest is of each part as UTF-8 text (bytes as they are), NUL-separated."""
    data = b"\x00".join(p if isinstance(p, bytes) else str(p).encode() for p in parts)
    raw = bytearray(hashlib.blake2b(data, digest_size=16).digest())
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80

    assert task_id_for(*parts) == str(uuid.UUID(bytes=bytes(raw)))


def test_prepare_next_tasks_skips_a_node_that_already_saw_the_version() -> None:
    nodes = {"a": node("a", ["x"], ["x"])}
    channels = {"x": LastValue(int)}
    checkpoint, bump = start(channels, nodes, [("x", 1)])
    (task,) = prepare_next_tasks(checkpoint, nodes, channels, 0).values()

    apply_writes(checkpoint, channels, [task], bump, index(nodes))

    assert checkpoint["versions_seen"]["a"] == {
        "x": checkpoint["channel_versions"]["x"]
    }
    assert prepare_next_tasks(checkpoint, nodes, channels, 1) == {}


def test_prepare_next_tasks_replans_when_the_trigger_advances_again() -> None:
    nodes = {"a": node("a", ["x"], ["x"])}
    channels = {"x": LastValue(int)}
    checkpoint, bump = start(channels, nodes, [("x", 1)])
    (task,) = prepare_next_tasks(checkpoint, nodes, channels, 0).values()
    apply_writes(checkpoint, channels, [task], bump, index(nodes))

    apply_writes(
        checkpoint, channels, [writes("other", [("x", 2)])], bump, index(nodes)
    )

    (again,) = prepare_next_tasks(checkpoint, nodes, channels, 1).values()
    assert again.input == {"x": 2}


def test_prepare_next_tasks_considers_only_subscribers_of_updated_channels() -> None:
    nodes = {"a": node("a", ["go:a"], ["x"]), "b": node("b", ["go:b"], ["x"])}
    channels = {
        "x": LastValue(int),
        "go:a": EphemeralValue(None),
        "go:b": EphemeralValue(None),
    }
    checkpoint, _ = start(channels, nodes, [("go:a", None), ("go:b", None)])
    subscribers = index(nodes)

    everything = prepare_next_tasks(checkpoint, nodes, channels, 0)
    only_b = prepare_next_tasks(
        checkpoint,
        nodes,
        channels,
        0,
        updated_channels={"go:b"},
        trigger_to_nodes=subscribers,
    )
    none = prepare_next_tasks(
        checkpoint,
        nodes,
        channels,
        0,
        updated_channels={"x"},
        trigger_to_nodes=subscribers,
    )

    assert names(everything) == ["a", "b"]
    assert names(only_b) == ["b"]
    assert none == {}


def test_prepare_next_tasks_turns_sends_into_push_tasks_in_order() -> None:
    nodes = {"work": node("work", ["go:work"], ["x"])}
    channels = {
        "x": LastValue(int),
        "go:work": EphemeralValue(None),
        TASKS: Topic(Send),
    }
    checkpoint, _ = start(
        channels,
        nodes,
        [(TASKS, Send("work", {"item": 1})), (TASKS, Send("work", {"item": 2}))],
    )

    tasks = list(prepare_next_tasks(checkpoint, nodes, channels, 0).values())

    assert [(t.name, t.path, t.input) for t in tasks] == [
        ("work", (PUSH, 0), {"item": 1}),
        ("work", (PUSH, 1), {"item": 2}),
    ]
    assert tasks[0].id != tasks[1].id
    assert tasks[0].triggers == (PUSH,)


def test_next_names_lists_a_plan_as_a_full_plan_does_sends_then_graph_order() -> None:
    nodes = {
        "zeta": node("zeta", ["go"], ["x"]),
        "alpha": node("alpha", ["go"], ["x"]),
        "work": node("work", ["go:work"], ["x"]),
    }
    channels = {
        "x": LastValue(int),
        "go": EphemeralValue(None),
        "go:work": EphemeralValue(None),
        TASKS: Topic(Send),
    }
    checkpoint, _ = start(
        channels, nodes, [("go", None), (TASKS, Send("work", {"item": 1}))]
    )
    node_index = {name: i for i, name in enumerate(nodes)}

    incremental = prepare_next_tasks(
        checkpoint,
        nodes,
        channels,
        0,
        updated_channels={"go"},
        trigger_to_nodes=index(nodes),
    )
    full = prepare_next_tasks(checkpoint, nodes, channels, 0)

    assert [t.name for t in incremental.values()] == ["work", "alpha", "zeta"]
    assert [t.name for t in full.values()] == ["work", "zeta", "alpha"]
    assert next_names(incremental, node_index) == ["work", "zeta", "alpha"]
    assert next_names(full, node_index) == ["work", "zeta", "alpha"]


def test_prepare_next_tasks_ignores_sends_to_unknown_nodes() -> None:
    nodes = {"work": node("work", ["go:work"], ["x"])}
    channels = {
        "x": LastValue(int),
        TASKS: Topic(Send),
        "go:work": EphemeralValue(None),
    }
    checkpoint, _ = start(channels, nodes, [(TASKS, Send("nope", 1))])

    assert prepare_next_tasks(checkpoint, nodes, channels, 0) == {}


def test_prepare_next_tasks_waits_for_a_named_barrier() -> None:
    nodes = {"c": node("c", ["join"], ["x"])}
    channels = {"x": LastValue(int), "join": NamedBarrierValue(str, {"a", "b"})}
    checkpoint, bump = start(channels, nodes, [("join", "a")])

    assert prepare_next_tasks(checkpoint, nodes, channels, 0) == {}

    apply_writes(
        checkpoint, channels, [writes("b", [("join", "b")])], bump, index(nodes)
    )

    assert names(prepare_next_tasks(checkpoint, nodes, channels, 1)) == ["c"]


# -- applying writes ------------------------------------------------------------------


def test_apply_writes_returns_updated_channels_and_bumps_their_versions() -> None:
    channels = {
        "total": BinaryOperatorAggregate(int, operator.add),
        "last": LastValue(str),
    }
    checkpoint = empty_checkpoint()
    tasks = [
        writes("b", [("total", 2)]),
        writes("a", [("total", 1), ("last", "a")]),
    ]

    updated = apply_writes(checkpoint, channels, tasks, counter(), {})

    assert updated == {"total", "last"}
    assert channels["total"].get() == 3
    assert checkpoint["channel_versions"] == {"total": 1, "last": 1}


def test_apply_writes_replaces_a_nodes_versions_seen_instead_of_changing_it() -> None:
    """A snapshot taken before (a save still queued) shares each node's dict;
    the next step must leave the shared one as it was."""
    channels = {"n": BinaryOperatorAggregate(int, operator.add)}
    checkpoint = empty_checkpoint()
    bump = counter()
    apply_writes(checkpoint, channels, [writes("a", [("n", 1)])], bump, {})
    apply_writes(checkpoint, channels, [writes("a", [("n", 1)], ["n"])], bump, {})
    shared = dict(checkpoint["versions_seen"])  # what a snapshot keeps
    before = dict(shared["a"])

    apply_writes(checkpoint, channels, [writes("a", [("n", 1)], ["n"])], bump, {})

    assert shared["a"] == before == {"n": 1}
    assert checkpoint["versions_seen"]["a"] == {"n": 2}  # a new dict


def test_apply_writes_in_path_order_whatever_the_finish_order() -> None:
    def run(order: Sequence[int]) -> list[str]:
        channels = {"log": BinaryOperatorAggregate(list, operator.add)}
        tasks = [
            writes("b", [("log", ["b"])]),
            writes("a", [("log", ["a"])]),
            writes("work", [("log", ["push1"])], path=(PUSH, 1)),
            writes("work", [("log", ["push10"])], path=(PUSH, 10)),
            writes("work", [("log", ["push2"])], path=(PUSH, 2)),
        ]
        apply_writes(
            empty_checkpoint(), channels, [tasks[i] for i in order], counter(), {}
        )
        return channels["log"].get()

    expected = ["a", "b", "push1", "push2", "push10"]
    for order in itertools.permutations(range(5)):
        assert run(order) == expected


def test_task_path_str_sorts_numbers_numerically() -> None:
    assert task_path_str((PUSH, 2)) < task_path_str((PUSH, 10))
    assert task_path_str((PULL, "a")) < task_path_str((PULL, "b"))


def test_apply_writes_rejects_two_writes_to_a_last_value() -> None:
    channels = {"last": LastValue(str, key="last")}
    tasks = [writes(n, [("last", n)]) for n in "ab"]

    with pytest.raises(InvalidUpdateError, match="At key 'last'"):
        apply_writes(empty_checkpoint(), channels, tasks, counter(), {})


def test_apply_writes_records_versions_seen_for_the_triggers() -> None:
    channels = {"x": LastValue(int), "y": LastValue(int)}
    checkpoint = empty_checkpoint()
    bump = counter()
    apply_writes(checkpoint, channels, [writes("in", [("x", 1), ("y", 2)])], bump, {})

    apply_writes(
        checkpoint, channels, [writes("a", [], triggers=["x"])], bump, {"x": ("a",)}
    )

    assert checkpoint["versions_seen"] == {"a": {"x": 1}}


def test_apply_writes_skips_reserved_and_unknown_write_keys() -> None:
    channels = {"x": LastValue(int)}
    checkpoint = empty_checkpoint()
    tasks = [
        writes("a", [("__interrupt__", "paused"), ("__no_writes__", None), ("x", 1)]),
    ]

    assert apply_writes(checkpoint, channels, tasks, counter(), {}) == {"x"}
    assert checkpoint["channel_versions"] == {"x": 1}


def test_apply_writes_clears_ephemeral_channels_a_step_did_not_write() -> None:
    channels = {"go": EphemeralValue(None), "x": LastValue(int)}
    checkpoint = empty_checkpoint()
    bump = counter()
    apply_writes(
        checkpoint, channels, [writes("in", [("go", None), ("x", 1)])], bump, {}
    )
    assert channels["go"].is_available()

    updated = apply_writes(
        checkpoint, channels, [writes("a", [], triggers=["go"])], bump, {"go": ("a",)}
    )

    assert not channels["go"].is_available()
    assert channels["x"].get() == 1
    assert checkpoint["channel_versions"]["go"] == 2  # clearing is a change
    assert checkpoint["channel_versions"]["x"] == 1
    assert updated == set()


def test_apply_writes_without_triggers_does_not_clear_ephemeral_channels() -> None:
    channels = {"go": EphemeralValue(None)}
    checkpoint = empty_checkpoint()
    bump = counter()
    apply_writes(checkpoint, channels, [writes("in", [("go", None)])], bump, {})

    apply_writes(checkpoint, channels, [writes("in2", [])], bump, {})

    assert channels["go"].is_available()


def test_apply_writes_consumes_the_barrier_of_the_task_it_triggered() -> None:
    channels = {"join": NamedBarrierValue(str, {"a", "b"})}
    checkpoint = empty_checkpoint()
    bump = counter()
    apply_writes(
        checkpoint, channels, [writes("in", [("join", "a"), ("join", "b")])], bump, {}
    )
    assert channels["join"].is_available()

    apply_writes(
        checkpoint,
        channels,
        [writes("c", [], triggers=["join"])],
        bump,
        {"join": ("c",)},
    )

    assert not channels["join"].is_available()
    assert checkpoint["channel_versions"]["join"] == 2


def test_apply_writes_finishes_deferred_channels_when_nothing_else_is_triggered() -> (
    None
):
    channels = {
        "go:a": EphemeralValue(None),
        "go:late": LastValueAfterFinish(None),
    }
    subscribers = {"go:a": ("a",), "go:late": ("late",)}
    checkpoint = empty_checkpoint()
    bump = counter()
    apply_writes(
        checkpoint, channels, [writes("in", [("go:a", None)])], bump, subscribers
    )

    # step 1: "a" runs and schedules the deferred node and itself again
    updated = apply_writes(
        checkpoint,
        channels,
        [writes("a", [("go:late", None), ("go:a", None)], triggers=["go:a"])],
        bump,
        subscribers,
    )
    assert updated == {"go:a"}
    assert not channels["go:late"].is_available()

    # step 2: "a" runs and stops: nothing else to do, so the deferred node opens
    updated = apply_writes(
        checkpoint, channels, [writes("a", [], triggers=["go:a"])], bump, subscribers
    )
    assert updated == {"go:late"}
    assert channels["go:late"].is_available()

    # step 3: the deferred node runs and consumes its trigger
    apply_writes(
        checkpoint,
        channels,
        [writes("late", [], triggers=["go:late"])],
        bump,
        subscribers,
    )
    assert not channels["go:late"].is_available()


def test_apply_writes_folds_sends_into_the_tasks_topic_then_clears_it() -> None:
    channels = {TASKS: Topic(Send)}
    checkpoint = empty_checkpoint()
    bump = counter()

    apply_writes(
        checkpoint,
        channels,
        [writes("a", [(TASKS, Send("w", 1))]), writes("b", [(TASKS, Send("w", 2))])],
        bump,
        {},
    )
    assert channels[TASKS].get() == [Send("w", 1), Send("w", 2)]

    apply_writes(
        checkpoint,
        channels,
        [writes("w", [], triggers=[PUSH], path=(PUSH, 0))],
        bump,
        {},
    )
    assert not channels[TASKS].is_available()

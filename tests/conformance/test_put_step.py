"""put_step: a step's last task writes and the next checkpoint, all or nothing."""

from __future__ import annotations

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.errors import CheckpointConflictError
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
    put_first,
    save_steps,
)


def _first(saver: BaseCheckpointSaver):
    return put_first(saver, "t1", {"n": 0})


def test_put_step_saves_writes_on_parent_and_the_new_checkpoint(saver) -> None:
    first, config = _first(saver)
    second, changed = next_checkpoint(first, {"n": 1})

    stored = saver.put_step(
        fenced(config, first["id"]),
        [("task-a", "~pull, a", [("n", 1)])],
        second,
        make_metadata(0, "loop"),
        changed,
    )

    parent = saver.get_tuple(config)
    child = saver.get_tuple(stored)
    assert parent is not None and child is not None
    assert parent.pending_writes == [("task-a", "n", 1)]
    assert child.checkpoint["channel_values"] == {"n": 1}
    assert child.parent_config is not None
    assert child.parent_config["configurable"]["checkpoint_id"] == first["id"]


def test_put_step_that_conflicts_writes_nothing(saver) -> None:
    first, config = _first(saver)
    winner, changed = next_checkpoint(first, {"n": 1})
    saver.put(fenced(config, first["id"]), winner, make_metadata(0, "loop"), changed)
    loser, loser_changed = next_checkpoint(first, {"n": 2})

    with pytest.raises(CheckpointConflictError):
        saver.put_step(
            fenced(config, first["id"]),
            [("task-b", "~pull, b", [("n", 2)])],
            loser,
            make_metadata(0, "loop"),
            loser_changed,
        )

    parent = saver.get_tuple(config)
    assert parent is not None and parent.pending_writes == []
    assert saver.get_tuple(make_config("t1", loser["id"])) is None
    assert len(list(saver.list(make_config("t1")))) == 2


def test_put_step_whose_value_cannot_be_stored_writes_nothing(saver) -> None:
    first, config = _first(saver)
    bad, changed = next_checkpoint(first, {"n": object()})

    with pytest.raises(Exception, match="Cannot store"):
        saver.put_step(
            fenced(config, first["id"]),
            [("task-a", "~pull, a", [("n", 1)])],
            bad,
            make_metadata(0, "loop"),
            changed,
        )

    parent = saver.get_tuple(config)
    assert parent is not None and parent.pending_writes == []
    assert saver.get_tuple(make_config("t1")).checkpoint["id"] == first["id"]


def test_put_step_without_parent_skips_writes(saver) -> None:
    checkpoint = make_checkpoint({"n": 0})

    stored = saver.put_step(
        make_config("t1"),
        [("task-a", "", [("n", 1)])],
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )

    loaded = saver.get_tuple(stored)
    assert loaded is not None and loaded.pending_writes == []


async def test_aput_step_matches_put_step(asaver) -> None:
    checkpoint = make_checkpoint({"n": 0})
    config = await asaver.aput(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    second, changed = next_checkpoint(checkpoint, {"n": 1})

    stored = await asaver.aput_step(
        fenced(config, checkpoint["id"]),
        [("task-a", "~pull, a", [("n", 1)])],
        second,
        make_metadata(0, "loop"),
        changed,
    )

    parent = await asaver.aget_tuple(config)
    child = await asaver.aget_tuple(stored)
    assert parent.pending_writes == [("task-a", "n", 1)]
    assert child.checkpoint["channel_values"] == {"n": 1}


# -- a step's writes kept with the checkpoint that follows them ----------------------
# (the SQL savers store them in that checkpoint's row; every saver reads the same)


def _pending(saver: BaseCheckpointSaver, thread_id: str, checkpoint_id: str):
    loaded = saver.get_tuple(make_config(thread_id, checkpoint_id))
    assert loaded is not None
    return loaded.pending_writes


def test_each_checkpoint_of_a_loop_reads_the_writes_of_its_step(saver) -> None:
    ids = save_steps(saver, "t1", 4)

    for step, checkpoint_id in enumerate(ids[:-1]):
        assert _pending(saver, "t1", checkpoint_id) == [
            (f"task-{step}", "n", step + 1),
            (f"task-{step}", "log", [step]),
        ]
    assert _pending(saver, "t1", ids[-1]) == []
    history = {t.checkpoint["id"]: t.pending_writes for t in saver.list(make_config())}
    assert [history[i] for i in ids] == [_pending(saver, "t1", i) for i in ids]


def test_a_later_save_of_the_same_task_keeps_the_writes_of_the_step(saver) -> None:
    ids = save_steps(saver, "t1", 2)

    saver.put_writes(make_config("t1", ids[0]), [("n", 99)], "task-0", "~pull, a")
    saver.put_writes(make_config("t1", ids[0]), [("n", 7)], "task-x", "~pull, b")

    assert _pending(saver, "t1", ids[0]) == [
        ("task-0", "n", 1),
        ("task-0", "log", [0]),
        ("task-x", "n", 7),
    ]


def test_pruning_keeps_the_writes_of_every_kept_checkpoint(saver) -> None:
    """c0 -> c1 -> c2 -> c3, and a fork f of c1: pruning keeps c1 (a fork point),
    c3 and f (branch heads). c1's writes were kept with c2, which goes; c3's
    were c2's, whose checkpoint goes, so c3's new parent c1 must not get them."""
    ids = save_steps(saver, "t1", 3)
    c1 = saver.get_tuple(make_config("t1", ids[1]))
    assert c1 is not None
    fork, changed = next_checkpoint(c1.checkpoint, {"n": 50}, step=9)
    saver.put(make_config("t1", ids[1]), fork, make_metadata(9, "fork"), changed)
    before = {i: _pending(saver, "t1", i) for i in (ids[1], ids[3], fork["id"])}

    saver.prune(["t1"])

    kept = {t.checkpoint["id"]: t for t in saver.list(make_config())}
    assert set(kept) == {ids[1], ids[3], fork["id"]}
    assert {i: t.pending_writes for i, t in kept.items()} == before
    assert before[ids[1]] == [("task-1", "n", 2), ("task-1", "log", [1])]
    assert kept[ids[3]].parent_config["configurable"]["checkpoint_id"] == ids[1]


def test_a_copied_thread_reads_the_writes_of_every_step(saver) -> None:
    ids = save_steps(saver, "t1", 3)

    saver.copy_thread("t1", "t2")

    assert [_pending(saver, "t2", i) for i in ids] == [
        _pending(saver, "t1", i) for i in ids
    ]


def test_a_checkpoint_saved_between_a_step_and_the_next_hides_no_writes(
    saver,
) -> None:
    """Ids come from clocks: a checkpoint saved later by another process may sort
    between a checkpoint and the one that followed it."""
    ids = save_steps(saver, "t1", 2)
    first = saver.get_tuple(make_config("t1", ids[0]))
    assert first is not None
    for n in range(3):
        between, changed = next_checkpoint(first.checkpoint, {"n": 100 + n})
        between["id"] = ids[0] + f"~{n}"  # sorts after ids[0], before ids[1]
        assert ids[0] < between["id"] < ids[1]
        saver.put(make_config("t1", ids[0]), between, make_metadata(9, "fork"), changed)

    assert _pending(saver, "t1", ids[0]) == [("task-0", "n", 1), ("task-0", "log", [0])]

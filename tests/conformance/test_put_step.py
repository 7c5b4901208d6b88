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
)


def _first(saver: BaseCheckpointSaver):
    checkpoint = make_checkpoint({"n": 0})
    config = saver.put(
        fenced(make_config("t1"), None),
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )
    return checkpoint, config


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

"""delete_for_runs: a run's checkpoints go, with their writes; everything else stays."""

from __future__ import annotations

import uuid

import pytest

from engine.checkpoint.base import BaseCheckpointSaver, get_checkpoint_id
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)


def _put(
    saver: BaseCheckpointSaver,
    thread_id: str,
    run_id: str,
    *,
    parent: dict | None = None,
    ns: str = "",
    values: dict | None = None,
) -> dict:
    checkpoint = make_checkpoint(values or {"n": run_id})
    config = make_config(
        thread_id, get_checkpoint_id(parent) if parent else None, checkpoint_ns=ns
    )
    return saver.put(
        config,
        checkpoint,
        make_metadata(run_id=run_id),
        checkpoint["channel_versions"],
    )


def _runs(saver: BaseCheckpointSaver, thread_id: str, ns: str | None = None) -> list:
    config = make_config(thread_id)
    if ns is None:
        del config["configurable"]["checkpoint_ns"]
    else:
        config["configurable"]["checkpoint_ns"] = ns
    return [t.metadata.get("run_id") for t in saver.list(config)]


def test_one_runs_checkpoints_are_deleted(saver) -> None:
    first = _put(saver, "t1", "run-1")
    _put(saver, "t1", "run-2", parent=first)

    saver.delete_for_runs(["run-1"])

    assert _runs(saver, "t1") == ["run-2"]
    assert saver.get_tuple(first) is None


def test_several_runs_at_once_in_every_thread_and_namespace(saver) -> None:
    a = _put(saver, "t1", "run-1")
    b = _put(saver, "t1", "run-2", parent=a)
    _put(saver, "t1", "run-3", parent=b)
    _put(saver, "t2", "run-1")
    _put(saver, "t2", "run-1", ns="child:1")
    _put(saver, "t3", "run-4")

    saver.delete_for_runs(["run-1", "run-2"])

    assert _runs(saver, "t1") == ["run-3"]
    assert _runs(saver, "t2", ns=None) == []
    assert _runs(saver, "t3") == ["run-4"]


def test_the_deleted_checkpoints_writes_go_and_the_others_stay(saver) -> None:
    kept = _put(saver, "t1", "run-1")
    doomed = _put(saver, "t1", "run-2", parent=kept)
    saver.put_writes(kept, [("n", "kept")], "task-a")
    saver.put_writes(doomed, [("n", "doomed")], "task-b")

    saver.delete_for_runs(["run-2"])

    assert saver.get_tuple(doomed) is None
    remaining = saver.get_tuple(kept)
    assert remaining is not None
    assert remaining.pending_writes == [("task-a", "n", "kept")]


def test_writes_saved_with_a_deleted_step_stay_with_their_parent(saver) -> None:
    first = make_checkpoint({"n": 0})
    parent = saver.put(
        make_config("t1"),
        first,
        make_metadata(run_id="run-1"),
        first["channel_versions"],
    )
    second, changed = next_checkpoint(first, {"n": 1})
    saver.put_step(  # fenced, as the runtime saves: SQL savers keep the writes
        fenced(parent, first["id"]),  # in the new checkpoint's row
        [("task-1", "~pull, a", [("n", 1)])],
        second,
        make_metadata(0, "loop", run_id="run-2"),
        changed,
    )

    saver.delete_for_runs(["run-2"])

    remaining = saver.get_tuple(make_config("t1"))
    assert remaining is not None
    assert remaining.checkpoint["id"] == first["id"]
    assert remaining.pending_writes == [("task-1", "n", 1)]


def test_children_of_deleted_checkpoints_move_to_the_nearest_ancestor(saver) -> None:
    a = _put(saver, "t1", "run-1")
    b = _put(saver, "t1", "run-2", parent=a)
    c = _put(saver, "t1", "run-2", parent=b)
    d = _put(saver, "t1", "run-3", parent=c)
    lone = _put(saver, "t2", "run-2")
    _put(saver, "t2", "run-3", parent=lone)

    saver.delete_for_runs(["run-2"])

    child = saver.get_tuple(d)
    assert child is not None
    assert child.parent_config is not None
    assert get_checkpoint_id(child.parent_config) == get_checkpoint_id(a)
    orphan = saver.get_tuple(make_config("t2"))
    assert orphan is not None
    assert orphan.parent_config is None


def test_values_only_the_deleted_checkpoints_read_are_freed(saver) -> None:
    _put(saver, "t1", "run-1", values={"small": "x"})
    _put(saver, "t2", "run-3", values={"big": "y" * 5000})
    doomed = _put(saver, "t1", "run-2", values={"big": "y" * 5000})
    before = saver.stored_bytes("t1")

    saver.delete_for_runs(["run-2"])

    assert saver.get_tuple(doomed) is None
    assert saver.stored_bytes("t1") < before - 5000
    remaining = saver.get_tuple(make_config("t2"))
    assert remaining is not None
    assert remaining.checkpoint["channel_values"] == {"big": "y" * 5000}


def test_unknown_runs_and_no_runs_delete_nothing(saver) -> None:
    _put(saver, "t1", "run-1")

    saver.delete_for_runs([])
    saver.delete_for_runs([str(uuid.uuid4())])

    assert _runs(saver, "t1") == ["run-1"]


def test_checkpoints_without_a_run_id_are_kept(saver) -> None:
    checkpoint = make_checkpoint({"n": 1})
    saver.put(make_config("t1"), checkpoint, make_metadata(), {})
    _put(saver, "t2", "None")

    saver.delete_for_runs(["None"])

    assert len(list(saver.list(make_config("t1")))) == 1
    assert _runs(saver, "t2") == []


@pytest.mark.asyncio
async def test_the_async_twin(asaver) -> None:
    checkpoint = make_checkpoint({"n": 1})
    stored = await asaver.aput(
        make_config("t1"),
        checkpoint,
        make_metadata(run_id="run-1"),
        checkpoint["channel_versions"],
    )
    await asaver.aput_writes(stored, [("n", 2)], "task-a")

    await asaver.adelete_for_runs(["run-1"])

    assert await asaver.aget_tuple(stored) is None
    assert [t async for t in asaver.alist(make_config("t1"))] == []

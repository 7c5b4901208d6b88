"""What a saver keeps is its own: changing the objects handed to ``put``,
``put_writes`` or ``put_step`` afterwards, or the ones a read returned, never
changes what the next read gives (LangGraph's savers serialize on the way in;
ours keep the same guarantee however they store a checkpoint)."""

from __future__ import annotations

import copy

from engine.checkpoint.base import BaseCheckpointSaver
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)


def _snapshot(saver: BaseCheckpointSaver, config: dict) -> tuple:  # type: ignore[type-arg]
    loaded = saver.get_tuple(config)  # type: ignore[arg-type]
    assert loaded is not None
    return (
        copy.deepcopy(loaded.checkpoint),
        copy.deepcopy(loaded.metadata),
        copy.deepcopy(loaded.pending_writes),
    )


def test_changing_what_was_put_changes_nothing_stored(
    saver: BaseCheckpointSaver,
) -> None:
    first = make_checkpoint({"items": [{"a": 1}], "n": 1, "none": None})
    first["versions_seen"] = {"node": {"n": first["channel_versions"]["n"]}}
    first["updated_channels"] = ["items", "n"]
    meta = make_metadata(-1, writes={"node": ["n"]}, tags=["x"])
    stored = saver.put(make_config("t1"), first, meta, first["channel_versions"])
    writes = [("items", [{"w": 1}])]
    saver.put_writes(stored, writes, "task-1")
    before = _snapshot(saver, stored)

    first["channel_values"]["items"][0]["a"] = 99
    first["channel_values"]["items"].append("more")
    first["channel_versions"]["n"] = "changed"
    first["versions_seen"]["node"]["n"] = "changed"
    first["versions_seen"]["other"] = {}
    first["updated_channels"].append("none")
    meta["writes"]["node"].append("items")  # type: ignore[typeddict-item]
    meta["tags"].append("y")  # type: ignore[typeddict-item]
    writes[0][1][0]["w"] = 2

    assert _snapshot(saver, stored) == before


def test_changing_what_a_read_returned_changes_nothing_stored(
    saver: BaseCheckpointSaver,
) -> None:
    first = make_checkpoint({"items": [1, 2], "n": 1})
    first["versions_seen"] = {"node": {"n": first["channel_versions"]["n"]}}
    first["updated_channels"] = ["n"]
    stored = saver.put(
        make_config("t1"), first, make_metadata(), first["channel_versions"]
    )
    second, changed = next_checkpoint(first, {"n": 2})
    latest = saver.put(stored, second, make_metadata(0, "loop"), changed)
    before = [_snapshot(saver, config) for config in (stored, latest)]

    for config in (stored, latest):
        loaded = saver.get_tuple(config)
        assert loaded is not None
        checkpoint = loaded.checkpoint
        checkpoint["channel_values"]["items"].append(3)
        checkpoint["channel_versions"]["n"] = "changed"
        checkpoint["versions_seen"]["node"]["n"] = "changed"
        if checkpoint.get("updated_channels") is not None:
            checkpoint["updated_channels"].append("x")
        loaded.metadata["step"] = 42
    for listed in saver.list(make_config("t1")):
        listed.checkpoint["versions_seen"].clear()
        listed.checkpoint["channel_versions"].clear()

    assert [_snapshot(saver, config) for config in (stored, latest)] == before


def test_a_step_saved_with_put_step_is_kept_whole(saver: BaseCheckpointSaver) -> None:
    first = make_checkpoint({"n": 1})
    stored = saver.put(
        make_config("t1"), first, make_metadata(), first["channel_versions"]
    )
    second, changed = next_checkpoint(first, {"n": [2]})
    meta = make_metadata(0, "loop", writes={"node": ["n"]})
    writes = [("n", [2])]
    put_step = getattr(saver, "put_step", None)
    if put_step is None:
        saver.put_writes(stored, writes, "task-1")
        latest = saver.put(stored, second, meta, changed)
    else:
        latest = put_step(stored, [("task-1", "", writes)], second, meta, changed)
    before = (_snapshot(saver, stored), _snapshot(saver, latest))

    second["channel_values"]["n"].append(3)
    second["versions_seen"].setdefault("node", {})["n"] = "changed"
    meta["writes"]["node"].append("x")  # type: ignore[typeddict-item]
    writes[0][1].append(3)

    assert (_snapshot(saver, stored), _snapshot(saver, latest)) == before

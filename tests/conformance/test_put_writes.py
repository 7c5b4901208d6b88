"""put_writes: pending writes of finished tasks, saved against a checkpoint."""

from __future__ import annotations

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from tests._support.builders import make_checkpoint, make_config, make_metadata


@pytest.fixture
def base_config(saver: BaseCheckpointSaver) -> dict:
    checkpoint = make_checkpoint({"n": 0})
    return saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )


def _pending(saver: BaseCheckpointSaver, config: dict) -> list:
    loaded = saver.get_tuple(config)
    assert loaded is not None
    return loaded.pending_writes


def test_writes_come_back_in_task_path_order(saver, base_config) -> None:
    saver.put_writes(base_config, [("n", 2), ("log", ["b"])], "task-b", "~pull, b")
    saver.put_writes(base_config, [("n", 1)], "task-a", "~pull, a")
    saver.put_writes(base_config, [("log", ["c"])], "task-c", "~push, 0")

    assert _pending(saver, base_config) == [
        ("task-a", "n", 1),
        ("task-b", "n", 2),
        ("task-b", "log", ["b"]),
        ("task-c", "log", ["c"]),
    ]


def test_regular_writes_are_idempotent(saver, base_config) -> None:
    saver.put_writes(base_config, [("n", 1), ("log", ["x"])], "task-a")
    saver.put_writes(base_config, [("n", 99), ("log", ["y"])], "task-a")  # a retry

    assert _pending(saver, base_config) == [
        ("task-a", "n", 1),
        ("task-a", "log", ["x"]),
    ]


def test_special_writes_replace(saver, base_config) -> None:
    saver.put_writes(base_config, [("__interrupt__", ["first"])], "task-a")
    saver.put_writes(base_config, [("__error__", "boom 1")], "task-b")
    saver.put_writes(base_config, [("__interrupt__", ["second"])], "task-a")
    saver.put_writes(base_config, [("__error__", "boom 2")], "task-b")
    saver.put_writes(base_config, [("__resume__", ["yes"])], "task-a")

    pending = _pending(saver, base_config)

    assert sorted(pending) == sorted(
        [
            ("task-a", "__interrupt__", ["second"]),
            ("task-a", "__resume__", ["yes"]),
            ("task-b", "__error__", "boom 2"),
        ]
    )


def test_writes_belong_to_their_checkpoint_and_namespace(saver, base_config) -> None:
    other = make_checkpoint({"n": 0})
    other_config = saver.put(
        make_config("t1", checkpoint_ns="sub:1"),
        other,
        make_metadata(),
        other["channel_versions"],
    )
    saver.put_writes(base_config, [("n", 1)], "task-a")
    saver.put_writes(other_config, [("n", 2)], "task-a")

    assert _pending(saver, base_config) == [("task-a", "n", 1)]
    assert _pending(saver, other_config) == [("task-a", "n", 2)]


def test_write_values_round_trip_types(saver, base_config) -> None:
    values = [("a", b"\x01"), ("b", {1, 2}), ("c", (1, [2])), ("d", None)]
    saver.put_writes(base_config, values, "task-a")

    assert _pending(saver, base_config) == [("task-a", k, v) for k, v in values]


def test_put_writes_needs_a_checkpoint_id(saver, base_config) -> None:
    with pytest.raises(ValueError, match="checkpoint_id"):
        saver.put_writes(make_config("t1"), [("n", 1)], "task-a")


def test_empty_writes_store_nothing(saver, base_config) -> None:
    saver.put_writes(base_config, [], "task-a")

    assert _pending(saver, base_config) == []

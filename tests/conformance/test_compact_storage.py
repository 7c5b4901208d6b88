"""How checkpoints and writes are stored compactly, and that reads cannot tell.

Structures are stored packed (``engine.checkpoint._blobs.pack_structure``: each
distinct version once, the engine's own version form shortened), a task's
regular writes in one entry (``engine.checkpoint._pending_writes``), and on Postgres the
creation time as a TIMESTAMPTZ when it has the engine's form. Every version
form, every timestamp and every mix of writes must read back exactly.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.checkpoint._blobs import pack_structure, unpack_structure
from engine.checkpoint._pending_writes import pack_writes
from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.postgres._sql import split_ts
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)

ODD_VERSIONS: dict[str, Any] = {
    "default": "000000000007.0a1b2c3d",
    "same": "000000000007.0a1b2c3d",
    "zero": "000000000000.ffffffff",
    "short": "7.0a1b2c3d",  # looks like a packed one
    "long": "0000000000007.0a1b2c3d",
    "upper": "000000000007.0A1B2C3D",
    "int": 3,
    "float": 2.5,
    "text": "1",
    "empty": "",
}


def _round_trip(saver: BaseCheckpointSaver, checkpoint: dict[str, Any]) -> None:
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    loaded = saver.get_tuple(config)
    assert loaded is not None
    got = loaded.checkpoint
    for key in ("channel_versions", "versions_seen", "updated_channels"):
        assert got.get(key, "absent") == checkpoint.get(key, "absent"), key
    assert {k: type(v) for k, v in got["channel_versions"].items()} == {
        k: type(v) for k, v in checkpoint["channel_versions"].items()
    }
    assert [t.checkpoint for t in saver.list(make_config("t1"))] == [got]


def test_versions_of_every_form_round_trip(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({name: name for name in ODD_VERSIONS})
    checkpoint["channel_versions"] = dict(ODD_VERSIONS)
    checkpoint["versions_seen"] = {
        "__input__": {},
        "node": {"int": 3, "short": "7.0a1b2c3d", "default": "000000000006.00000000"},
    }
    checkpoint["updated_channels"] = ["zero", "default", "not-a-channel"]
    _round_trip(saver, checkpoint)


@pytest.mark.parametrize("updated", [None, [], "absent"])
def test_updated_channels_none_empty_or_absent(
    saver: BaseCheckpointSaver, updated: Any
) -> None:
    checkpoint = make_checkpoint({"n": 1})
    if updated == "absent":
        checkpoint.pop("updated_channels", None)
    else:
        checkpoint["updated_channels"] = updated
    _round_trip(saver, checkpoint)


def test_structures_that_cannot_be_packed_are_stored_whole(
    saver: BaseCheckpointSaver,
) -> None:
    checkpoint = make_checkpoint({"n": 1})
    checkpoint["V"] = ["not", "a", "table"]  # type: ignore[typeddict-unknown-key]
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    loaded = saver.get_tuple(config)
    assert loaded is not None
    assert loaded.checkpoint["V"] == ["not", "a", "table"]  # type: ignore[typeddict-item]
    assert loaded.checkpoint["channel_versions"] == checkpoint["channel_versions"]


def test_packing_is_exact_and_smaller() -> None:
    structure = {
        "v": 4,
        "channel_versions": dict(ODD_VERSIONS),
        "versions_seen": {"a": {"int": 3, "x": "000000000007.0a1b2c3d"}},
        "updated_channels": ["int", "other"],
        "schema_version": 1,
    }
    packed = pack_structure(structure)
    assert "channel_versions" not in packed
    assert packed["V"].count("7.0a1b2c3d") == 1  # stored once, shortened
    assert ["7.0a1b2c3d"] in packed["V"]  # the look-alike is kept apart
    unpacked = unpack_structure(packed)
    assert unpacked == structure
    assert list(unpacked) == list(structure)  # key order too
    assert unpack_structure(structure) == structure  # whole ones pass through


@pytest.mark.parametrize(
    "ts",
    [
        "2026-01-02T03:04:05.123456+00:00",  # the engine's form
        "2026-01-02T03:04:05+00:00",  # no microseconds
        "2026-01-02T03:04:05.123456+02:00",  # another offset
        "2026-01-02 03:04:05.123456+00:00",
        "0999-01-02T03:04:05.123456+00:00",
        "not a time",
    ],
)
def test_creation_times_of_every_form_round_trip(
    saver: BaseCheckpointSaver, ts: str
) -> None:
    checkpoint = make_checkpoint({"n": 1})
    checkpoint["ts"] = ts
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    loaded = saver.get_tuple(config)
    assert loaded is not None and loaded.checkpoint["ts"] == ts
    (summary,) = saver.list_summaries(make_config("t1"))
    assert summary.created_at == ts


def test_engine_timestamps_become_timestamptz_on_postgres() -> None:
    ts = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC).isoformat()
    assert split_ts(ts) == (None, datetime.fromisoformat(ts))
    assert split_ts("2026-01-02T03:04:05+00:00") == ("2026-01-02T03:04:05+00:00", None)
    assert split_ts("2026-02-30T03:04:05.123456+00:00")[1] is None
    assert split_ts(None) == (None, None)


# -- writes ---------------------------------------------------------------------------


@pytest.fixture
def base_config(saver: BaseCheckpointSaver) -> dict[str, Any]:
    checkpoint = make_checkpoint({"n": 0})
    return saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )


def _pending(saver: BaseCheckpointSaver, config: dict[str, Any]) -> list[Any]:
    loaded = saver.get_tuple(config)
    assert loaded is not None
    return list(loaded.pending_writes or [])


def test_a_tasks_regular_writes_are_kept_as_a_whole(saver, base_config) -> None:
    saver.put_writes(base_config, [("n", 1)], "task-a")
    saver.put_writes(base_config, [("n", 2), ("log", ["more"])], "task-a")  # retry

    assert _pending(saver, base_config) == [("task-a", "n", 1)]


def test_special_writes_come_before_regular_ones_in_write_order(
    saver, base_config
) -> None:
    writes = [
        ("a", 1),
        ("__error__", "boom"),
        ("b", [2]),
        ("__interrupt__", ["ask"]),
        ("a", 3),
        ("__resume__", ["yes"]),
    ]
    saver.put_writes(base_config, writes, "task-a", "~pull, a")
    saver.put_writes(base_config, [("c", None)], "task-b", "~pull, a")

    assert _pending(saver, base_config) == [
        ("task-a", "__resume__", ["yes"]),
        ("task-a", "__interrupt__", ["ask"]),
        ("task-a", "__error__", "boom"),
        ("task-a", "a", 1),
        ("task-a", "b", [2]),
        ("task-a", "a", 3),
        ("task-b", "c", None),
    ]


def test_special_writes_still_replace_beside_packed_ones(saver, base_config) -> None:
    saver.put_writes(base_config, [("__interrupt__", ["first"]), ("x", 1)], "task-a")
    saver.put_writes(base_config, [("__interrupt__", ["second"]), ("x", 2)], "task-a")

    assert _pending(saver, base_config) == [
        ("task-a", "__interrupt__", ["second"]),
        ("task-a", "x", 1),
    ]


def test_writes_are_counted_as_stored_on_every_backend(saver, base_config) -> None:
    before = saver.stored_bytes("t1")
    saver.put_writes(base_config, [("n", 1), ("s", "x"), ("b", b"\x01")], "task-a")

    packed = pack_writes(
        [
            ("n", *saver.serde.dumps_typed(1)),
            ("s", *saver.serde.dumps_typed("x")),
            ("b", *saver.serde.dumps_typed(b"\x01")),
        ]
    )
    assert saver.stored_bytes("t1") - before == len(packed)


def test_step_writes_and_a_history_read_back(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({"n": 0, "log": []})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    configs = [config]
    for step in range(5):
        saver.put_writes(config, [("n", step), ("log", [step])], f"task-{step}")
        checkpoint, changed = next_checkpoint(
            checkpoint, {"n": step}, append={"log": [step]}, step=step
        )
        config = saver.put(config, checkpoint, make_metadata(step, "loop"), changed)
        configs.append(config)
    history = list(saver.list(make_config("t1")))
    assert [t.config for t in history] == list(reversed(configs))
    assert history[0].checkpoint["channel_values"] == {"n": 4, "log": [0, 1, 2, 3, 4]}
    oldest_first = list(reversed(history))
    for i, t in enumerate(oldest_first[:-1]):
        assert t.pending_writes == [(f"task-{i}", "n", i), (f"task-{i}", "log", [i])]
    assert oldest_first[-1].pending_writes == []


def test_none_values_and_the_schema_version_pack_small() -> None:
    structure = {
        "v": 4,
        "channel_versions": {"go": "000000000003.0a1b2c3d", "n": 2},
        "versions_seen": {},
        "channel_values": {"go": None},
        "schema_version": 2,
    }
    packed = pack_structure(structure)
    assert packed["nil"] == [0]
    assert packed["sv"] == 2
    assert "channel_values" not in packed
    assert unpack_structure(packed) == structure
    # a value that is not None, or a channel without a version, keeps the map
    for values in ({"go": None, "n": 1}, {"gone": None}):
        odd = {**structure, "channel_values": values}
        assert pack_structure(odd)["channel_values"] == values
        assert unpack_structure(pack_structure(odd)) == odd


def test_none_values_take_no_value_row(saver: BaseCheckpointSaver, saver_spec) -> None:
    if not saver_spec.shared:
        pytest.skip("the memory saver has no SQL")
    checkpoint = make_checkpoint({"go": None, "msg": "hi"})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )

    rows = saver_spec.execute(
        "SELECT channel FROM engine_checkpoint_blobs WHERE thread_id = 't1'"
    )
    assert [tuple(r) for r in rows] == [("msg",)]
    loaded = saver.get_tuple(config)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"go": None, "msg": "hi"}

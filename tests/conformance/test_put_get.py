"""put + get_tuple: what goes in comes back, per thread and namespace."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)


def test_put_then_get_tuple_round_trips_channel_values(
    saver: BaseCheckpointSaver,
) -> None:
    values = {
        "msg": "hi",
        "n": 2,
        "raw": b"\x00\xff",
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "ids": {uuid.UUID(int=7)},
        "pair": (1, "a"),
        "nested": {"k": [1.5, None, True, "\x00nul"]},
    }
    checkpoint = make_checkpoint(values)

    stored = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    loaded = saver.get_tuple(stored)

    assert loaded is not None
    assert loaded.checkpoint["id"] == checkpoint["id"]
    assert loaded.checkpoint["channel_values"] == values
    assert loaded.checkpoint["channel_versions"] == checkpoint["channel_versions"]
    assert loaded.metadata == make_metadata()
    assert loaded.parent_config is None
    assert loaded.pending_writes == []
    assert stored == make_config("t1", checkpoint["id"])
    assert loaded.config == stored


def test_get_tuple_without_id_returns_newest_and_links_parent(
    saver: BaseCheckpointSaver,
) -> None:
    first = make_checkpoint({"n": 1})
    saver.put(make_config("t1"), first, make_metadata(-1), first["channel_versions"])
    second, changed = next_checkpoint(first, {"n": 2})
    saver.put(make_config("t1", first["id"]), second, make_metadata(0, "loop"), changed)

    latest = saver.get_tuple(make_config("t1"))
    old = saver.get_tuple(make_config("t1", first["id"]))

    assert latest is not None and old is not None
    assert latest.checkpoint["id"] == second["id"]
    assert latest.checkpoint["channel_values"] == {"n": 2}
    assert latest.parent_config == make_config("t1", first["id"])
    assert old.checkpoint["channel_values"] == {"n": 1}
    assert saver.get(make_config("t1")) == latest.checkpoint


def test_unchanged_channels_keep_their_stored_version(
    saver: BaseCheckpointSaver,
) -> None:
    first = make_checkpoint({"big": list(range(100)), "n": 0})
    saver.put(make_config("t1"), first, make_metadata(), first["channel_versions"])
    second, changed = next_checkpoint(first, {"n": 1})
    assert "big" not in changed

    saver.put(make_config("t1", first["id"]), second, make_metadata(0), changed)
    loaded = saver.get_tuple(make_config("t1"))

    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"big": list(range(100)), "n": 1}


def test_channel_without_value_is_absent(saver: BaseCheckpointSaver) -> None:
    first = make_checkpoint({"a": 1, "b": 2})
    saver.put(make_config("t1"), first, make_metadata(), first["channel_versions"])
    second, changed = next_checkpoint(first, {"a": 3})
    del second["channel_values"]["b"]
    second["channel_versions"]["b"] = changed["b"] = (
        "00000000000000000000000000000002.5"
    )

    saver.put(make_config("t1", first["id"]), second, make_metadata(0), changed)
    loaded = saver.get_tuple(make_config("t1"))

    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"a": 3}


def test_missing_thread_or_checkpoint_is_none(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({"n": 1})
    saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )

    assert saver.get_tuple(make_config("nope")) is None
    assert (
        saver.get_tuple(make_config("t1", "1ef00000-0000-6000-8000-000000000000"))
        is None
    )
    assert saver.get_tuple(make_config("t1", checkpoint_ns="child:1")) is None


def test_namespaces_are_separate(saver: BaseCheckpointSaver) -> None:
    root = make_checkpoint({"who": "root"})
    child = make_checkpoint({"who": "child"})
    saver.put(make_config("t1"), root, make_metadata(), root["channel_versions"])
    saver.put(
        make_config("t1", checkpoint_ns="sub:1"),
        child,
        make_metadata(),
        child["channel_versions"],
    )

    got_root = saver.get_tuple(make_config("t1"))
    got_child = saver.get_tuple(make_config("t1", checkpoint_ns="sub:1"))

    assert got_root is not None and got_child is not None
    assert got_root.checkpoint["channel_values"] == {"who": "root"}
    assert got_child.checkpoint["channel_values"] == {"who": "child"}
    assert got_child.config["configurable"]["checkpoint_ns"] == "sub:1"


def test_put_requires_thread_id(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({"n": 1})

    with pytest.raises(ValueError, match="thread_id"):
        saver.put({"configurable": {}}, checkpoint, make_metadata(), {})
    with pytest.raises(ValueError, match="thread_id"):
        saver.get_tuple({"configurable": {}})


def test_re_put_same_id_replaces_metadata(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({"n": 1})
    versions = checkpoint["channel_versions"]
    saver.put(make_config("t1"), checkpoint, make_metadata(-1), versions)

    saver.put(make_config("t1"), checkpoint, make_metadata(-1, note="again"), versions)
    loaded = saver.get_tuple(make_config("t1"))

    assert loaded is not None
    assert loaded.metadata["note"] == "again"  # type: ignore[typeddict-item]
    assert len(list(saver.list(make_config("t1")))) == 1


def test_unstorable_value_fails_and_stores_nothing(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({"bad": object()})

    with pytest.raises(Exception, match="Cannot store a value of type builtins:object"):
        saver.put(
            make_config("t1"),
            checkpoint,
            make_metadata(),
            checkpoint["channel_versions"],
        )

    assert saver.get_tuple(make_config("t1")) is None


def test_metadata_round_trips_exactly(saver: BaseCheckpointSaver) -> None:
    odd = {
        "z": 1,
        "a": 2,
        "nul": "a\x00b",
        "who": "ann",
        "float": 1e16,
        "big": 2**70,
        "t": (1,),
    }
    checkpoint = make_checkpoint({"n": 1})
    saver.put(
        make_config("t1"),
        checkpoint,
        make_metadata(**odd),
        checkpoint["channel_versions"],
    )

    loaded = saver.get_tuple(make_config("t1"))
    by_string = list(saver.list(None, filter={"nul": "a\x00b"}))
    beside_nul = list(saver.list(None, filter={"who": "ann", "source": "input"}))
    no_match = list(saver.list(None, filter={"who": "bob"}))

    assert loaded is not None
    assert loaded.metadata == make_metadata(**odd)
    assert list(loaded.metadata) == list(make_metadata(**odd))  # key order kept
    assert type(loaded.metadata["float"]) is float  # type: ignore[typeddict-item]
    assert [t.checkpoint["id"] for t in by_string] == [checkpoint["id"]]
    assert [t.checkpoint["id"] for t in beside_nul] == [checkpoint["id"]]
    assert no_match == []


def test_sql_can_read_stored_checkpoints(
    saver: BaseCheckpointSaver, saver_spec
) -> None:
    if not saver_spec.shared:
        pytest.skip("the memory saver has no SQL")
    checkpoint = make_checkpoint({"msg": "hi"})
    saver.put(
        make_config("t1"),
        checkpoint,
        make_metadata(user="ann"),
        checkpoint["channel_versions"],
    )

    # the id and creation time have their own columns (not repeated in the JSON);
    # versions are packed: each one once in "V", named by position in "cv"
    # (the engine's form shortened: see engine.checkpoint._blobs.pack_structure)
    if saver_spec.kind == "postgres":
        rows = saver_spec.execute(
            "SELECT c.metadata->>'user', c.checkpoint_id, c.created_at, "
            "c.checkpoint->'V'->>((c.checkpoint->'cv'->>'msg')::int), "
            "convert_from(b.blob, 'UTF8') "
            "FROM engine_checkpoints c JOIN engine_checkpoint_blobs b USING (thread_id) "
            "WHERE b.channel = 'msg'"
        )
        created: object = dt.datetime.fromisoformat(checkpoint["ts"])
    else:
        rows = saver_spec.execute(
            "SELECT json_extract(CAST(c.metadata AS TEXT), '$.user'), "
            "c.checkpoint_id, c.ts, "
            "json_extract(CAST(c.checkpoint AS TEXT), '$.V[' || "
            "json_extract(CAST(c.checkpoint AS TEXT), '$.cv.msg') || ']'), "
            "CAST(b.blob AS TEXT) "
            "FROM engine_checkpoints c JOIN engine_checkpoint_blobs b USING (thread_id) "
            "WHERE b.channel = 'msg'"
        )
        created = checkpoint["ts"]
    counter, _, rest = checkpoint["channel_versions"]["msg"].partition(".")

    assert rows == [
        (
            "ann",
            checkpoint["id"],
            created,
            f"{int(counter)}.{rest}",
            '"hi"',
        )
    ]

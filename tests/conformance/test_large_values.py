"""Large values: a long list (or a state dict holding one) is stored and read back
exactly by every saver; Postgres sends it in parts, each serialized just before
it is sent, and puts them together in the save's transaction (see
``engine.checkpoint._sqlcore.saves.PART_BYTES``)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from engine.checkpoint._sqlcore import saves
from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.postgres._sql import DIALECT
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import SerializationError
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)
from tests._support.savers import SaverSpec
from tests._support.sql_ops import flat, insert_rows, statements_of

ITEMS = 3000  # about 190 KiB of JSON: several parts


def _items(n: int = ITEMS) -> list[dict[str, Any]]:
    return [
        {"id": i, "text": f"item number {i}", "tags": ["a", (i, "b")]} for i in range(n)
    ]


def _input_checkpoint(value: Any) -> Any:
    """A thread's input checkpoint: the input dict (holding the long list) in
    ``__start__``, as a run's first save has it."""
    return make_checkpoint({"__start__": {"n": 0, "items": value, "note": "x"}})


def _put_after(
    saver: BaseCheckpointSaver, parent: Any, checkpoint: Any, changed: Any
) -> None:
    """Save ``checkpoint`` as the run's next step after ``parent`` (fenced on it)."""
    saver.put(
        fenced(make_config("t1", parent["id"]), parent["id"]),
        checkpoint,
        make_metadata(0, "loop"),
        changed,
    )


def _part_rows(saver_spec: SaverSpec) -> list[tuple[Any, ...]]:
    return saver_spec.execute(
        "SELECT version FROM engine_checkpoint_blobs WHERE version LIKE '~part %%'"
    )


def test_a_long_list_and_a_dict_holding_one_read_back_exactly(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    items = _items()
    root = _input_checkpoint(items)
    saver.put(
        make_config("t1"), root, make_metadata(-1, "input"), root["channel_versions"]
    )
    step, changed = next_checkpoint(root, {"items": items, "n": 1})
    _put_after(saver, root, step, changed)

    first = saver.get_tuple(make_config("t1", root["id"]))
    latest = saver.get_tuple(make_config("t1"))

    assert first is not None and latest is not None
    assert first.checkpoint["channel_values"]["__start__"] == {
        "n": 0,
        "items": items,
        "note": "x",
    }
    assert latest.checkpoint["channel_values"]["items"] == items
    assert latest.checkpoint["channel_values"]["items"][7]["tags"][1] == (7, "b")
    if saver_spec.kind == "postgres":
        assert _part_rows(saver_spec) == []  # put together, none left behind


def test_a_value_failing_halfway_stores_nothing(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    """The item that cannot be stored comes after several parts were sent: the
    transaction fails whole, parts included."""
    root = make_checkpoint({"n": 0})
    saver.put(
        make_config("t1"), root, make_metadata(-1, "input"), root["channel_versions"]
    )
    bad = [*_items(), object()]
    step, changed = next_checkpoint(root, {"items": bad})

    with pytest.raises(SerializationError, match="builtins:object"):
        _put_after(saver, root, step, changed)

    latest = saver.get_tuple(make_config("t1"))
    assert latest is not None and latest.checkpoint["id"] == root["id"]
    if saver_spec.kind == "postgres":
        assert _part_rows(saver_spec) == []


def test_a_version_stored_already_keeps_its_first_value(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    """As for any value: the first insert of a (channel, version) is the one
    kept, sent in parts or not."""
    first = _input_checkpoint(_items())
    saver.put(
        make_config("t1"), first, make_metadata(-1, "input"), first["channel_versions"]
    )
    again = {
        **first,
        "id": first["id"][:-1] + "f",
        "channel_values": {
            "__start__": {"n": 0, "items": _items(ITEMS + 5), "note": "y"}
        },
    }
    saver.put(
        make_config("t1"), again, make_metadata(-1, "input"), again["channel_versions"]
    )

    loaded = saver.get_tuple(make_config("t1", again["id"]))

    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["__start__"]["note"] == "x"
    assert len(loaded.checkpoint["channel_values"]["__start__"]["items"]) == ITEMS
    if saver_spec.kind == "postgres":
        assert _part_rows(saver_spec) == []


async def test_an_async_saver_reads_back_a_long_list(
    asaver: BaseCheckpointSaver,
) -> None:
    items = _items()
    root = _input_checkpoint(items)
    await asaver.aput(
        make_config("t1"), root, make_metadata(-1, "input"), root["channel_versions"]
    )

    loaded = await asaver.aget_tuple(make_config("t1"))

    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["__start__"]["items"] == items


def _yielded(checkpoint: Any) -> list[Any]:
    """Drive a Postgres put's operation without a database: what it yields."""
    return statements_of(
        saves.put(
            DIALECT,
            JsonPlusSerializer(),
            make_config("t1"),
            checkpoint,
            make_metadata(-1, "input"),
            checkpoint["channel_versions"],
        )
    )


def test_postgres_sends_a_long_list_in_parts_no_bigger_than_the_limit() -> None:
    value = _input_checkpoint(_items())
    whole = JsonPlusSerializer().dumps_typed(value["channel_values"]["__start__"])

    yielded = _yielded(value)

    parts = [s for s in yielded if s.sql == DIALECT["insert_blob_part"]]
    joins = [s for s in yielded if s.sql == DIALECT["join_blob_parts"]]
    assert len(parts) >= 4 and len(joins) == 1
    payloads = [s.params[4] for s in parts]
    # each part is the limit and at most one piece more (64 short items), never
    # the whole value; joined in order they are exactly the value's payload
    assert max(map(len, payloads)) < saves.PART_BYTES + 8 * 1024
    assert b"".join(payloads) == whole[1]
    assert [s.params[5] for s in parts] == list(range(len(parts)))
    assert joins[0].params[3] == [s.params[3] for s in parts]
    assert len(set(joins[0].params[3])) == len(parts)
    # the value's own row is the join's, not a regular insert
    inserted = [
        row for s in yielded for row in insert_rows(s, DIALECT["insert_blob"]) or ()
    ]
    assert all(row[2] != "__start__" for row in inserted)


def test_postgres_sends_a_small_value_as_one_row() -> None:
    yielded = _yielded(_input_checkpoint(_items(300)))  # a long list, but small

    assert not [s for s in yielded if s.sql == DIALECT["insert_blob_part"]]
    inserted = [
        row for s in yielded for row in insert_rows(s, DIALECT["insert_blob"]) or ()
    ]
    assert [row[2] for row in inserted] == ["__start__"]


def test_postgres_never_holds_a_long_list_serialized_whole(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    """A 1.3 MiB list saved: the save's peak stays a fraction of its JSON (each
    part and the driver's copy of it), where one row would hold it twice."""
    if saver_spec.kind != "postgres":
        pytest.skip("only Postgres sends a value in parts")
    items = _items(20_000)
    size = len(JsonPlusSerializer().dumps_typed(items)[1])
    root = make_checkpoint({"items": items})
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        saver.put(make_config("t1"), root, make_metadata(), root["channel_versions"])
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()

    loaded = saver.get_tuple(make_config("t1"))
    assert loaded is not None and loaded.checkpoint["channel_values"]["items"] == items
    assert size > 1 << 20
    assert peak < size / 4, f"peak {peak} bytes for a {size}-byte value"


def test_a_long_list_due_a_full_copy_goes_in_parts_and_reads_back(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    """A list channel written as deltas: when its chain is due a full copy (the
    appended items outweigh the root), that copy is a whole value like any other,
    sent in parts on Postgres."""
    root = make_checkpoint({"log": ["first"]})
    saver.put(make_config("t1"), root, make_metadata(), root["channel_versions"])
    grown, changed = next_checkpoint(root, append={"log": _items()})
    assert "log" in grown["channel_deltas"]  # a delta hint the saver may not use
    _put_after(saver, root, grown, changed)

    loaded = saver.get_tuple(make_config("t1"))

    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["log"] == ["first", *_items()]
    if saver_spec.shared:
        assert _part_rows(saver_spec) == []


def test_postgres_sends_a_list_due_a_full_copy_in_parts() -> None:
    root = make_checkpoint({"log": ["first"]})
    grown, changed = next_checkpoint(root, append={"log": _items()})

    yielded = statements_of(
        saves.put(
            DIALECT,
            JsonPlusSerializer(),
            fenced(make_config("t1", root["id"]), root["id"]),
            grown,
            make_metadata(0, "loop"),
            changed,
        )
    )

    parts = [s for s in flat(yielded) if s.sql == DIALECT["insert_blob_part"]]
    assert parts and {s.params[2] for s in parts} == {"log"}
    whole = JsonPlusSerializer().dumps_typed(["first", *_items()])[1]
    assert b"".join(s.params[4] for s in parts) == whole

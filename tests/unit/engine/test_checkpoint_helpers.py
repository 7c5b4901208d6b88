"""LangGraph's checkpoint helpers, InMemorySaver kept in files, SqliteSaver.cursor."""

from __future__ import annotations

import sqlite3
import threading
from collections import defaultdict
from typing import Any

import pytest

from engine.channels import LastValue
from engine.checkpoint._memory_compact import compact_structure, expand_structure
from engine.checkpoint.base import (
    EXCLUDED_METADATA_KEYS,
    create_checkpoint,
    empty_checkpoint,
    get_checkpoint_metadata,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from engine.checkpoint.memory import InMemorySaver, PersistentDict
from engine.checkpoint.sqlite import SqliteSaver
from engine.errors import SerializationError
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)
from tests._support.savers import file_tables

# -- create_checkpoint --------------------------------------------------------------------


def test_create_checkpoint_reads_the_channels_it_has_versions_for():
    channels = {"a": LastValue(int), "b": LastValue(int), "c": LastValue(int)}
    channels["a"].update([1])
    channels["c"].update([3])
    previous = empty_checkpoint()
    previous["channel_versions"] = {"a": 1, "b": 2}
    previous["versions_seen"] = {"node": {"a": 1}}

    created = create_checkpoint(previous, channels, 5)

    assert created["channel_values"] == {"a": 1}  # b is empty, c has no version
    assert created["channel_versions"] == {"a": 1, "b": 2}
    assert created["versions_seen"] == {"node": {"a": 1}}
    assert created["updated_channels"] is None
    assert created["id"] != previous["id"]
    assert created["id"] > previous["id"]


def test_create_checkpoint_without_channels_keeps_the_values_and_takes_an_id():
    previous = make_checkpoint({"n": 1})

    created = create_checkpoint(previous, None, 3, id="chosen")

    assert created["id"] == "chosen"
    assert created["channel_values"] == {"n": 1}
    assert created["ts"] >= previous["ts"]


# -- metadata -----------------------------------------------------------------------------


CONFIG: Any = {
    "configurable": {
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c",
        "langgraph_step": 3,
        "user": "from-configurable",
        "tenant": "acme\x00",
        "n": 1,
        "listed": [1],
        "__secret": "x",
    },
    "metadata": {"run_id": "r1", "user": "from-metadata", "ratio": 1.5, "none": None},
}


def test_checkpoint_metadata_takes_plain_config_values_langgraphs_way():
    metadata = get_checkpoint_metadata(
        CONFIG, {"source": "loop", "step": 1, "writes": {"a": 1}, "note": "a\x00b"}
    )

    assert metadata == {
        "source": "loop",
        "step": 1,
        "writes": {"a": 1},
        "note": "ab",
        "run_id": "r1",
        "user": "from-metadata",
        "ratio": 1.5,
        "tenant": "acme",
        "n": 1,
    }
    assert {"thread_id", "checkpoint_ns", "langgraph_step"} <= EXCLUDED_METADATA_KEYS


def test_serializable_metadata_leaves_the_writes_out():
    metadata = get_serializable_checkpoint_metadata(
        CONFIG, {"source": "loop", "step": 1, "writes": {"a": object()}}
    )

    assert "writes" not in metadata
    assert metadata["run_id"] == "r1"


def test_writes_sort_key_orders_by_path_task_then_index():
    writes = [("~b", "t1", 0), ("~a", "t2", 1), ("~a", "t2", -1), ("~a", "t1", 5)]

    assert sorted(writes, key=lambda w: writes_sort_key(*w)) == [
        ("~a", "t1", 5),
        ("~a", "t2", -1),
        ("~a", "t2", 1),
        ("~b", "t1", 0),
    ]
    assert writes_sort_key("~p") == ("~p", "", 0)


# -- InMemorySaver(factory=PersistentDict) ------------------------------------------------


def test_an_in_memory_saver_kept_in_files_survives_a_restart(tmp_path):
    first, changed = make_checkpoint({"log": ["a"]}), None
    with InMemorySaver(factory=file_tables(tmp_path)) as saver:
        config = saver.put(
            make_config(), first, make_metadata(), first["channel_versions"]
        )
        second, changed = next_checkpoint(first, append={"log": ["b"]})
        config = saver.put(config, second, make_metadata(0, "loop"), changed)
        saver.put_writes(config, [("log", ["c"])], "task-1")
        saver.set_thread_ttl("t1", 3600)

    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == [f"table{i}.json" for i in range(1, 5)]
    assert all(not f.read_bytes().startswith(b"\x80") for f in files)  # not pickle

    with InMemorySaver(factory=file_tables(tmp_path)) as reopened:
        loaded = reopened.get_tuple(make_config())
        assert loaded is not None
        assert loaded.checkpoint["id"] == second["id"]
        assert loaded.checkpoint["channel_values"] == {"log": ["a", "b"]}
        assert loaded.pending_writes == [("task-1", "log", ["c"])]
        assert len(list(reopened.list(make_config()))) == 2
        assert "t1" in reopened.deadlines


_READ_ORDER = (
    "v",
    "id",
    "ts",
    "channel_versions",
    "versions_seen",
    "updated_channels",
)
"""The first keys of a checkpoint the in-memory saver reads back, in order."""


def _put_first(saver: InMemorySaver, checkpoint: Any) -> str:
    """Put ``checkpoint`` as thread t1's first; its id."""
    config = saver.put(
        make_config(), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    return str(config["configurable"]["checkpoint_id"])


def test_a_checkpoint_kept_as_compact_tuples_reads_back():
    """Wide structures are kept as tuples (earlier versions kept every one so, and a
    PersistentDict saved them so): a row written in that form reads back."""
    saver = InMemorySaver()
    checkpoint = make_checkpoint({"n": 1, "gone": None})
    cid = _put_first(saver, checkpoint)
    _, metadata, parent, *_ = saver.storage["t1"][""][cid]
    versions = checkpoint["channel_versions"]
    keys = (*_READ_ORDER, "channel_values")
    values = (
        checkpoint["v"],
        checkpoint["id"],
        checkpoint["ts"],
        (tuple(versions), tuple(versions.values())),
        tuple(
            (node, tuple(seen), tuple(seen.values()))
            for node, seen in checkpoint["versions_seen"].items()
        ),
        None,
        ("gone",),
    )
    saver.storage["t1"][""][cid] = (("*mem", (keys, values)), metadata, parent)

    loaded = saver.get_tuple(make_config())
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"n": 1, "gone": None}
    assert loaded.checkpoint["channel_versions"] == versions
    assert loaded.checkpoint["versions_seen"] == checkpoint["versions_seen"]
    summaries = saver.list_summaries(make_config())
    assert [s.created_at for s in summaries] == [checkpoint["ts"]]


@pytest.mark.parametrize("width", [3, 40])
def test_narrow_and_wide_checkpoints_round_trip_in_their_own_form(width: int):
    saver = InMemorySaver()
    first = make_checkpoint({f"c{i}": i for i in range(width)} | {"gone": None})
    first["versions_seen"] = {
        f"node{i}": {f"c{i}": first["channel_versions"][f"c{i}"]} for i in range(width)
    }
    config = saver.put(make_config(), first, make_metadata(), first["channel_versions"])
    second, changed = next_checkpoint(first, {"c0": 100}, step=0)
    saver.put(config, second, make_metadata(0, "loop"), changed)

    rows = saver.storage["t1"][""]
    kinds = {type(rows[c["id"]][0]) for c in (first, second)}
    assert kinds == ({bytes} if width == 3 else {tuple})  # JSON, or compact tuples
    for checkpoint in (first, second):
        loaded = saver.get_tuple(make_config("t1", checkpoint["id"]))
        assert loaded is not None
        expected = {k: v for k, v in checkpoint.items() if k != "channel_deltas"}
        assert loaded.checkpoint == expected
        assert list(loaded.checkpoint)[:2] == ["v", "id"]


def _wide(seen: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "v": 4,
        "id": "c",
        "ts": "t",
        "channel_values": {},
        "channel_versions": {"a": "1"},
        "versions_seen": {node: dict(by) for node, by in seen.items()},
        "updated_channels": None,
    }


def test_compact_versions_seen_follow_each_change_and_share_what_did_not():
    """A thread's next compact structure shares the entries of the nodes whose
    versions did not change, and only those, whatever happens between calls:
    a node sees something new, nodes are added or come in another order,
    versions of other types (never shared: 1 == 1.0), the caller's dicts
    changed in place after a call."""
    seen = {f"n{i}": {f"c{i}": "001"} for i in range(6)}
    steps: list[dict[str, dict[str, Any]]] = []
    for change in (
        {"n2": {"c2": "002"}},  # one node saw something new
        {},  # nothing new
        {"new": {"c0": "003"}},  # a node runs for the first time
        {"n4": {"c4": 4}},  # an int version: never shared
        {"n4": {"c4": 4.0}},  # equal to 4, another type
        {"n0": {"c0": "001", "extra": "005"}},
        # a node runs for the first time while a known one sees something new
        {"n1": {"c1": "006"}, "later": {"c3": "007"}},
    ):
        seen = {**seen, **change}
        steps.append(seen)
    steps.append(dict(reversed(list(steps[-1].items()))))  # another order

    prev = None
    previous_entries: dict[str, Any] = {}
    for expected in steps:
        checkpoint = _wide(expected)
        made = compact_structure(checkpoint, (), prev)
        assert made is not None
        restored = expand_structure(made[0])["versions_seen"]
        assert restored == expected
        for node, by in expected.items():  # exact types, not only equal values
            assert [type(v) for v in restored[node].values()] == [
                type(v) for v in by.values()
            ]
        entries = {e[0]: e for e in made[0][1][made[0][0].index("versions_seen")]}
        for node, entry in entries.items():
            unchanged = (
                node in previous_entries
                and all(type(v) is str for v in expected[node].values())
                and restored[node]
                == dict(
                    zip(
                        previous_entries[node][1],
                        previous_entries[node][2],
                        strict=True,
                    )
                )
            )
            assert (entry is previous_entries.get(node)) == unchanged, node
        # What the caller does to its dicts afterwards cannot reach the kept copy.
        for by in checkpoint["versions_seen"].values():
            by["late"] = "999"
        assert expand_structure(made[0])["versions_seen"] == expected
        prev, previous_entries = made, entries


@pytest.mark.parametrize("schema_version", [None, 3])
def test_a_narrow_structure_is_kept_as_a_short_array_and_reads_back_exactly(
    schema_version: int | None,
):
    """The loop's key order is kept as an array, the ten zeros opening each version
    as one byte; strings that look like the pattern or the byte round-trip too."""
    saver = InMemorySaver()
    tricky = '"0000000000\x01\x02 "0000000000 "00000000000000000 "0000000'
    checkpoint = make_checkpoint({"n": 1, "gone": None, "0000000000x": tricky})
    checkpoint["versions_seen"] = {
        "node": {"n": "000000000001.00000000", "gone": "000000012345.0000abcd"}
    }
    checkpoint["updated_channels"] = ["n", "0000000000x"]
    if schema_version is not None:
        checkpoint["schema_version"] = schema_version
    checkpoint["channel_deltas"] = {}  # a hint: never kept
    kept = saver.storage["t1"][""][_put_first(saver, checkpoint)][0]
    assert kept.startswith(b"[4,") and b"\x01" in kept and b"\x02" in kept
    assert b"channel_versions" not in kept and b'"0000000' not in kept
    loaded = saver.get_tuple(make_config())
    assert loaded is not None
    expected = {k: v for k, v in checkpoint.items() if k != "channel_deltas"}
    assert loaded.checkpoint == expected
    assert list(loaded.checkpoint) == [
        *_READ_ORDER,
        *(["schema_version"] if schema_version is not None else []),
        "channel_values",
    ]


def test_a_structure_of_another_shape_is_kept_as_its_json_object():
    saver = InMemorySaver()
    checkpoint = make_checkpoint({"n": 1})
    checkpoint["extra"] = "kept"  # type: ignore[typeddict-unknown-key]
    del checkpoint["updated_channels"]  # type: ignore[misc]
    kept = saver.storage["t1"][""][_put_first(saver, checkpoint)][0]
    assert kept.startswith(b"{")
    loaded = saver.get_tuple(make_config())
    assert loaded is not None
    assert loaded.checkpoint == checkpoint


def test_a_structure_kept_as_a_json_object_by_an_earlier_version_reads_back():
    saver = InMemorySaver()
    checkpoint = make_checkpoint({"n": 1, "gone": None})
    cid = _put_first(saver, checkpoint)
    row = saver.storage["t1"][""][cid]
    earlier = (
        b'{"v":4,"channel_versions":{"n":"%s","gone":"%s"},"versions_seen":'
        b'{"__input__":{}},"updated_channels":null,"channel_values":{"gone":null}}'
        % (
            checkpoint["channel_versions"]["n"].encode(),
            checkpoint["channel_versions"]["gone"].encode(),
        )
    )
    saver.storage["t1"][""][cid] = (earlier, *row[1:])

    loaded = saver.get_tuple(make_config())
    assert loaded is not None
    assert loaded.checkpoint == checkpoint


def test_a_corrupt_narrow_structure_is_a_clear_serialization_error():
    saver = InMemorySaver()
    checkpoint = make_checkpoint({"n": 1})
    cid = _put_first(saver, checkpoint)
    row = saver.storage["t1"][""][cid]
    for broken in (b"[4,{}]", b'[4,{"n":\x01', b"[4,{},{},null,{}]"):
        saver.storage["t1"][""][cid] = (broken, *row[1:])
        with pytest.raises(SerializationError, match=cid):
            saver.get_tuple(make_config())


def test_the_default_factory_keeps_nothing_on_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with InMemorySaver(factory=defaultdict) as saver:
        checkpoint = make_checkpoint({"n": 1})
        saver.put(make_config(), checkpoint, {}, checkpoint["channel_versions"])

    assert list(tmp_path.iterdir()) == []


def test_persistent_dict_saves_atomically_and_loads_back(tmp_path):
    path = tmp_path / "d.json"
    with PersistentDict(list, filename=str(path)) as table:
        table[("a", 1)].append(b"\x00bytes")
        table["plain"] = {"x": 1}

    assert table == {}  # close() empties it
    reloaded = PersistentDict(filename=str(path))
    reloaded.load()
    assert reloaded == {("a", 1): [b"\x00bytes"], "plain": {"x": 1}}
    assert not (tmp_path / "d.json.tmp").exists()


def test_persistent_dict_flags(tmp_path):
    path = tmp_path / "d.json"
    path.write_bytes(b'{"kept": 1}')

    fresh = PersistentDict(filename=str(path))
    fresh.flag = "n"
    fresh.load()
    assert fresh == {}

    read_only = PersistentDict(filename=str(path))
    read_only.flag = "r"
    read_only.load()
    read_only["new"] = 2
    read_only.sync()
    assert path.read_bytes() == b'{"kept": 1}'


def test_persistent_dict_refuses_files_it_cannot_trust(tmp_path):
    pickled = tmp_path / "p.pckl"
    pickled.write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94.")
    evil = tmp_path / "e.json"
    evil.write_bytes(b'{"__t":"dataclass","c":"os:system","v":{}}')

    with pytest.raises(SerializationError, match="not a PersistentDict file"):
        PersistentDict(filename=str(pickled)).load()
    with pytest.raises(SerializationError, match="os:system"):
        PersistentDict(filename=str(evil)).load()
    with pytest.raises(FileNotFoundError):
        PersistentDict(filename=str(tmp_path / "missing.json")).load()


# -- SqliteSaver.cursor -------------------------------------------------------------------


@pytest.fixture
def sqlite_saver(tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        yield saver


def test_cursor_sets_up_the_tables_and_commits_the_block(sqlite_saver, tmp_path):
    with sqlite_saver.cursor() as cur:
        cur.execute("CREATE TABLE mine (x INTEGER)")
        cur.execute("INSERT INTO mine VALUES (1)")
        cur.execute("SELECT count(*) FROM engine_checkpoints")

    other = sqlite3.connect(tmp_path / "c.db")
    assert other.execute("SELECT x FROM mine").fetchall() == [(1,)]
    other.close()


def test_cursor_rolls_the_block_back_when_it_raises(sqlite_saver):
    with sqlite_saver.cursor() as cur:
        cur.execute("CREATE TABLE mine (x INTEGER)")

    with pytest.raises(RuntimeError), sqlite_saver.cursor() as cur:
        cur.execute("INSERT INTO mine VALUES (1)")
        raise RuntimeError("stop")

    with sqlite_saver.cursor(transaction=False) as cur:
        assert cur.execute("SELECT count(*) FROM mine").fetchall() == [(0,)]
    checkpoint = make_checkpoint({"n": 1})  # the saver still works afterwards
    sqlite_saver.put(make_config(), checkpoint, {}, checkpoint["channel_versions"])


def test_other_threads_wait_for_the_cursor_block(sqlite_saver):
    done = threading.Event()

    def read() -> None:
        sqlite_saver.get_tuple(make_config())
        done.set()

    with sqlite_saver.cursor():
        reader = threading.Thread(target=read)
        reader.start()
        assert not done.wait(0.2)
    reader.join(5)
    assert done.is_set()

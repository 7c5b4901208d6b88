"""Retention: delete_thread, copy_thread, prune, and per-thread TTL with sweeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
    save_chain,
)
from tests._support.savers import SaverSpec


def _ids(saver, config) -> list[str]:
    return [t.checkpoint["id"] for t in saver.list(config)]


# -- delete_thread -------------------------------------------------------------------


def test_delete_thread_removes_everything_of_that_thread_only(saver) -> None:
    configs = save_chain(saver, "t1", 3)
    save_chain(saver, "t1", 2, checkpoint_ns="sub:1")
    saver.put_writes(configs[-1], [("n", 1)], "task-a")
    save_chain(saver, "t2", 2)

    saver.delete_thread("t1")

    assert saver.get_tuple(make_config("t1")) is None
    assert list(saver.list({"configurable": {"thread_id": "t1"}})) == []
    assert saver.stored_bytes("t1") == 0
    assert len(_ids(saver, make_config("t2"))) == 2
    saver.delete_thread("never-existed")  # no error


# -- copy_thread ---------------------------------------------------------------------


def test_copy_thread_copies_history_writes_and_namespaces(saver) -> None:
    configs = save_chain(saver, "src", 3)
    save_chain(saver, "src", 2, checkpoint_ns="sub:1")
    saver.put_writes(configs[1], [("n", "w")], "task-a")

    saver.copy_thread("src", "dst")

    source = list(saver.list({"configurable": {"thread_id": "src"}}))
    copied = list(saver.list({"configurable": {"thread_id": "dst"}}))
    assert [t.checkpoint for t in copied] == [t.checkpoint for t in source]
    assert [t.metadata for t in copied] == [t.metadata for t in source]
    assert [t.pending_writes for t in copied] == [t.pending_writes for t in source]
    assert [t.config["configurable"]["thread_id"] for t in copied] == ["dst"] * 5
    parents = [t.parent_config for t in copied if t.parent_config]
    assert all(p["configurable"]["thread_id"] == "dst" for p in parents)
    assert saver.stored_bytes("dst") == saver.stored_bytes("src")


def test_copied_thread_is_independent(saver) -> None:
    configs = save_chain(saver, "src", 2)
    saver.copy_thread("src", "dst")
    head = saver.get_tuple(make_config("dst"))
    nxt, changed = next_checkpoint(head.checkpoint, {"n": "only in dst"})

    saver.put(make_config("dst", head.checkpoint["id"]), nxt, make_metadata(1), changed)
    saver.delete_thread("src")

    assert saver.get_tuple(make_config("dst")).checkpoint["channel_values"] == {
        "n": "only in dst"
    }
    assert len(_ids(saver, make_config("dst"))) == 3
    assert saver.get_tuple(configs[0]) is None


def test_copy_thread_refuses_existing_target_and_missing_source(saver) -> None:
    save_chain(saver, "a", 1)
    save_chain(saver, "b", 1)

    with pytest.raises(ValueError, match="already exists"):
        saver.copy_thread("a", "b")
    with pytest.raises(ValueError, match="does not exist"):
        saver.copy_thread("missing", "c")


# -- prune ---------------------------------------------------------------------------


def _tree(saver: BaseCheckpointSaver, ns: str = ""):
    """c0 -> c1 -> c2 -> c3 -> c4 (head) and c1 -> f1 (a fork, also a head).

    c2 has an answered interrupt, c3 an open one; ``log`` grows by one item per
    step (stored as deltas), ``n`` is replaced.
    """
    cps = {}
    c0 = make_checkpoint({"log": ["c0"], "n": 0})
    cfg = {
        "c0": saver.put(
            make_config("t1", checkpoint_ns=ns),
            c0,
            make_metadata(),
            c0["channel_versions"],
        )
    }
    cps["c0"] = c0
    for i, name in enumerate(["c1", "c2", "c3", "c4"], start=1):
        parent = f"c{i - 1}"
        cp, changed = next_checkpoint(
            cps[parent], {"n": i}, append={"log": [name]}, step=i
        )
        cfg[name] = saver.put(cfg[parent], cp, make_metadata(i, "loop"), changed)
        cps[name] = cp
    f1, changed = next_checkpoint(cps["c1"], {"n": "f"}, append={"log": ["f1"]})
    cfg["f1"] = saver.put(cfg["c1"], f1, make_metadata(2, "fork"), changed)
    cps["f1"] = f1
    saver.put_writes(cfg["c2"], [("__interrupt__", ["asked"])], "task-x")
    saver.put_writes(cfg["c2"], [("n", "answered")], "task-x")
    saver.put_writes(cfg["c3"], [("__interrupt__", ["waiting"])], "task-y")
    return cps, cfg


def test_prune_keep_latest_keeps_heads_fork_points_and_open_interrupts(saver) -> None:
    cps, cfg = _tree(saver)
    _tree(saver, ns="sub:1")
    before = saver.stored_bytes("t1")

    saver.prune(["t1"])

    kept = {t.checkpoint["id"]: t for t in saver.list(make_config("t1"))}
    expected = {cps[name]["id"]: name for name in ("c1", "c3", "c4", "f1")}
    assert set(kept) == set(expected)
    parent = {
        expected[cid]: expected.get(t.parent_config["configurable"]["checkpoint_id"])
        if t.parent_config
        else None
        for cid, t in kept.items()
    }
    assert parent == {"c1": None, "c3": "c1", "c4": "c3", "f1": "c1"}
    logs = {
        expected[cid]: t.checkpoint["channel_values"]["log"] for cid, t in kept.items()
    }
    assert logs == {
        "c1": ["c0", "c1"],
        "c3": ["c0", "c1", "c2", "c3"],
        "c4": ["c0", "c1", "c2", "c3", "c4"],
        "f1": ["c0", "c1", "f1"],
    }
    assert kept[cps["c3"]["id"]].pending_writes == [
        ("task-y", "__interrupt__", ["waiting"])
    ]
    assert len(list(saver.list(make_config("t1", checkpoint_ns="sub:1")))) == 4
    assert saver.stored_bytes("t1") < before


def test_prune_is_idempotent_and_leaves_other_threads(saver) -> None:
    _tree(saver)
    save_chain(saver, "other", 4)

    saver.prune(["t1"])
    once = _ids(saver, make_config("t1"))
    saver.prune(["t1", "missing"])

    assert _ids(saver, make_config("t1")) == once
    assert len(_ids(saver, make_config("other"))) == 4


def test_prune_delete_removes_threads(saver) -> None:
    save_chain(saver, "t1", 3)
    save_chain(saver, "t2", 3)
    save_chain(saver, "t3", 3)

    saver.prune(["t1", "t2"], strategy="delete")

    assert saver.get_tuple(make_config("t1")) is None
    assert saver.get_tuple(make_config("t2")) is None
    assert saver.get_tuple(make_config("t3")) is not None


def test_prune_rejects_unknown_strategy(saver) -> None:
    with pytest.raises(ValueError, match="Unknown prune strategy"):
        saver.prune(["t1"], strategy="everything")  # type: ignore[arg-type]


# -- TTL -----------------------------------------------------------------------------


def test_expired_thread_is_invisible_then_swept(saver) -> None:
    save_chain(saver, "short", 2)
    save_chain(saver, "forever", 2)

    saver.set_thread_ttl("short", 0.2)
    assert saver.get_tuple(make_config("short")) is not None
    time.sleep(0.3)

    assert saver.get_tuple(make_config("short")) is None
    assert list(saver.list(make_config("short"))) == []
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {
        "forever"
    }
    assert saver.sweep_expired() == ["short"]
    assert saver.stored_bytes("short") == 0
    assert saver.sweep_expired() == []
    assert saver.get_tuple(make_config("forever")) is not None


def test_sweep_expired_with_explicit_now_and_cleared_ttl(saver) -> None:
    for name in ("a", "b", "c"):
        save_chain(saver, name, 1)
    saver.set_thread_ttl("a", timedelta(hours=1))
    saver.set_thread_ttl("b", 3600)
    saver.set_thread_ttl("b", None)

    assert saver.sweep_expired() == []
    assert saver.sweep_expired(datetime.now(UTC) + timedelta(hours=2)) == ["a"]
    assert saver.get_tuple(make_config("a")) is None
    assert saver.get_tuple(make_config("b")) is not None


def test_ttl_must_be_positive(saver) -> None:
    with pytest.raises(ValueError, match="ttl must be positive"):
        saver.set_thread_ttl("t1", 0)


def test_default_ttl_expires_threads_after_their_last_write(
    saver_spec: SaverSpec,
) -> None:
    with saver_spec.open(default_ttl=0.3) as saver:
        save_chain(saver, "t1", 2)
        assert saver.get_tuple(make_config("t1")) is not None
        time.sleep(0.4)

        assert saver.get_tuple(make_config("t1")) is None
        assert saver.sweep_expired() == ["t1"]

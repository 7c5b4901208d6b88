"""Stored data never executes code: pickle and unknown classes are refused by name,
corrupt payloads give a clear error, and other threads stay readable."""

from __future__ import annotations

import pickle
from contextlib import ExitStack

import pytest

from engine.checkpoint._pending_writes import pack_task_writes, pack_writes
from engine.errors import SerializationError
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    save_steps,
)
from tests._support.tamper import tamper_blob, tamper_checkpoint, tamper_write


@pytest.fixture
def stored(saver):
    for thread_id in ("t1", "ok"):
        checkpoint = make_checkpoint({"state": {"a": 1}, "n": 1})
        config = saver.put(
            make_config(thread_id),
            checkpoint,
            make_metadata(),
            checkpoint["channel_versions"],
        )
        saver.put_writes(config, [("n", 2)], "task-a")
    return saver


def test_pickle_payload_is_refused(stored, saver_spec) -> None:
    tamper_blob(stored, saver_spec, "t1", "state", "pickle", pickle.dumps({"a": 1}))

    with pytest.raises(SerializationError, match="'pickle'") as caught:
        stored.get_tuple(make_config("t1"))

    assert "never loaded" in str(caught.value)
    assert stored.get_tuple(make_config("ok")) is not None


def test_not_allowed_class_is_refused_by_name(stored, saver_spec) -> None:
    payload = b'{"__t":"dataclass","c":"evil.module:Payload","v":{"cmd":"rm -rf /"}}'
    tamper_blob(stored, saver_spec, "t1", "state", "json", payload)

    with pytest.raises(SerializationError, match="evil.module:Payload"):
        stored.get_tuple(make_config("t1"))
    with pytest.raises(SerializationError, match="evil.module:Payload"):
        list(stored.list(make_config("t1")))


def test_corrupt_json_value_names_the_channel(stored, saver_spec) -> None:
    tamper_blob(stored, saver_spec, "t1", "state", "json", b'{"a": 1')

    with pytest.raises(SerializationError, match="channel 'state'") as caught:
        stored.get_tuple(make_config("t1"))

    assert "corrupt" in str(caught.value)


def test_corrupt_checkpoint_row_names_the_checkpoint(stored, saver_spec) -> None:
    tamper_checkpoint(stored, saver_spec, "t1", "json", b"\xff\xfe not json")

    with pytest.raises(SerializationError, match="corrupt") as caught:
        stored.get_tuple(make_config("t1"))

    assert "thread 't1'" in str(caught.value)


def test_pickled_pending_write_is_refused(stored, saver_spec) -> None:
    tamper_write(stored, saver_spec, "t1", "pickle", pickle.dumps(2))

    with pytest.raises(SerializationError, match="'pickle'"):
        stored.get_tuple(make_config("t1"))


@pytest.fixture
def stepped(saver, saver_spec):
    if not saver_spec.shared:
        pytest.skip("only the SQL savers keep a step's writes in the next row")
    for thread_id in ("t1", "ok"):
        save_steps(saver, thread_id, 2)
    return saver


def _first_id(saver, thread_id: str) -> str:
    return list(saver.list(make_config(thread_id)))[-1].checkpoint["id"]


def test_corrupt_writes_kept_in_the_next_row_name_the_checkpoint(
    stepped, saver_spec
) -> None:
    first = make_config("t1", _first_id(stepped, "t1"))
    saver_spec.execute(
        "UPDATE engine_checkpoints SET parent_writes = %s "
        "WHERE thread_id = 't1' AND parent_writes IS NOT NULL",
        (b'[["task-0", "", 99]]\nshort',),
    )

    with pytest.raises(SerializationError, match="corrupt") as caught:
        stepped.get_tuple(first)

    assert "thread 't1'" in str(caught.value)
    assert stepped.get_tuple(make_config("t1")) is not None  # the head has no child
    assert stepped.get_tuple(make_config("ok", _first_id(stepped, "ok"))) is not None


def test_pickled_write_kept_in_the_next_row_is_refused(stepped, saver_spec) -> None:
    first = make_config("t1", _first_id(stepped, "t1"))
    entry = pack_writes([("n", "pickle", pickle.dumps(2))])
    saver_spec.execute(
        "UPDATE engine_checkpoints SET parent_writes = %s "
        "WHERE thread_id = 't1' AND parent_writes IS NOT NULL",
        (pack_task_writes([("task-0", "~pull, a", entry)]),),
    )

    with pytest.raises(SerializationError, match="'pickle'"):
        stepped.get_tuple(first)


def test_a_lease_taken_with_a_refused_head_is_not_kept(stored, saver_spec) -> None:
    tamper_blob(stored, saver_spec, "t1", "state", "pickle", pickle.dumps({"a": 1}))

    with ExitStack() as stack:
        # Taken by a saver that did not store the head, which reads the altered
        # row (a SQL saver serves the small values it stored itself from its
        # guess of the head: tests/conformance/test_head_guess.py).
        taker = stored
        if saver_spec.kind != "memory":
            taker = stack.enter_context(saver_spec.open())
        with pytest.raises(SerializationError, match="'pickle'"):
            taker.acquire_lease_and_get_tuple(make_config("t1"), "run", 30)

        # the run never started: the thread is free for the next one at once
        assert taker.get_lease("t1", "") is None
        assert taker.acquire_lease("t1", "", "next", 30).holder == "next"

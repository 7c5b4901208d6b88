"""Encrypted checkpoints: everything round-trips, nothing is stored in clear,
and a wrong key is an error, never a wrong value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.memory import InMemorySaver
from engine.checkpoint.serde.encrypted import DecryptionError, EncryptedSerializer
from tests._support.builders import (
    make_config,
    make_metadata,
    next_checkpoint,
    save_steps,
)
from tests._support.savers import SaverSpec

KEY = b"k" * 32
SECRET = "card 4111-1111-1111-1111"
TABLES = ("engine_checkpoints", "engine_checkpoint_blobs", "engine_checkpoint_writes")


def _serde(key: bytes = KEY) -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=key)


@pytest.fixture
def encrypted(saver_spec: SaverSpec) -> Iterator[BaseCheckpointSaver]:
    with saver_spec.open(serde=_serde()) as opened:
        yield opened


def _save_secret_thread(saver: BaseCheckpointSaver) -> None:
    ids = save_steps(saver, "t1", 3)
    latest = saver.get_tuple(make_config("t1"))
    assert latest is not None
    secret, changed = next_checkpoint(latest.checkpoint, {"n": SECRET}, step=9)
    saver.put(
        make_config("t1", ids[-1]),
        secret,
        make_metadata(9, "update", note=SECRET, run_id="run-secret"),
        changed,
    )
    saver.put_writes(make_config("t1", secret["id"]), [("n", SECRET)], "task-x")


def _stored_payloads(saver: BaseCheckpointSaver, spec: SaverSpec) -> Iterator[Any]:
    if isinstance(saver, InMemorySaver):
        yield from _leaves((saver.storage, saver.blobs, saver.writes))
        return
    for table in TABLES:
        yield from _leaves(spec.execute(f"SELECT * FROM {table}"))


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(key)
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, memoryview):
        yield bytes(value)
    else:
        yield value


def test_checkpoints_values_and_writes_round_trip(encrypted) -> None:
    ids = save_steps(encrypted, "t1", 4)

    history = list(encrypted.list(make_config("t1")))

    assert [t.checkpoint["id"] for t in history] == ids[::-1]
    latest = history[0]
    assert latest.checkpoint["channel_values"] == {"n": 4, "log": [0, 1, 2, 3]}
    assert latest.metadata["step"] == 3
    parent = encrypted.get_tuple(make_config("t1", ids[-2]))
    assert parent is not None
    assert parent.pending_writes == [("task-3", "n", 4), ("task-3", "log", [3])]


def test_nothing_is_stored_in_clear(encrypted, saver_spec) -> None:
    _save_secret_thread(encrypted)

    leaves = list(_stored_payloads(encrypted, saver_spec))

    assert any(isinstance(leaf, bytes) and len(leaf) > 32 for leaf in leaves)
    for leaf in leaves:
        if isinstance(leaf, bytes):
            assert SECRET.encode() not in leaf
        elif isinstance(leaf, str):
            assert SECRET not in leaf
    loaded = encrypted.get_tuple(make_config("t1"))
    assert loaded is not None
    assert loaded.checkpoint["channel_values"]["n"] == SECRET
    assert loaded.metadata["note"] == SECRET
    assert loaded.pending_writes == [("task-x", "n", SECRET)]


def test_metadata_filters_and_delete_for_runs_read_encrypted_metadata(
    encrypted,
) -> None:
    _save_secret_thread(encrypted)

    found = list(encrypted.list(None, filter={"run_id": "run-secret"}))
    assert [t.metadata["note"] for t in found] == [SECRET]

    encrypted.delete_for_runs(["run-secret"])

    assert list(encrypted.list(None, filter={"run_id": "run-secret"})) == []
    assert len(list(encrypted.list(make_config("t1")))) == 4


def test_a_wrong_key_raises(encrypted, saver_spec) -> None:
    save_steps(encrypted, "t1", 2)

    if isinstance(encrypted, InMemorySaver):
        encrypted.serde = _serde(b"w" * 32)
        wrong: BaseCheckpointSaver = encrypted
        with pytest.raises(DecryptionError, match="key is wrong"):
            wrong.get_tuple(make_config("t1"))
        return
    with saver_spec.open(serde=_serde(b"w" * 32)) as wrong:
        with pytest.raises(DecryptionError, match="key is wrong"):
            wrong.get_tuple(make_config("t1"))
        with pytest.raises(DecryptionError):
            list(wrong.list(make_config("t1")))


def test_plain_checkpoints_stay_readable_once_encryption_is_on(saver_spec) -> None:
    if not saver_spec.shared:
        pytest.skip("an in-memory saver's data cannot be reopened")
    with saver_spec.open() as plain:
        save_steps(plain, "old", 2)
    with saver_spec.open(serde=_serde()) as encrypted:
        save_steps(encrypted, "new", 2)
        old = encrypted.get_tuple(make_config("old"))
        new = encrypted.get_tuple(make_config("new"))

    assert old is not None and new is not None
    assert old.checkpoint["channel_values"] == new.checkpoint["channel_values"]

"""One writer per thread: a fenced put fails when another writer moved the head.

Deliberate forks (no ``EXPECTED_HEAD`` in the config) always succeed; writers of
different threads never get in each other's way, from threads or processes.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.errors import CheckpointConflictError
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
    save_chain,
)
from tests._support.savers import SaverSpec
from tests._support.workers import append_racing, append_with_retries, write_chain


def _root(saver: BaseCheckpointSaver, thread_id: str = "t1"):
    checkpoint = make_checkpoint({"n": 0})
    config = saver.put(
        fenced(make_config(thread_id), None),
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )
    return checkpoint, config


def test_stale_writer_gets_conflict_and_writes_nothing(
    saver: BaseCheckpointSaver,
) -> None:
    root, config = _root(saver)
    first, changed = next_checkpoint(root, {"n": 1})
    saver.put(fenced(config, root["id"]), first, make_metadata(0, "loop"), changed)
    before = saver.stored_bytes("t1")
    stale, stale_changed = next_checkpoint(root, {"n": "stale"}, append={"extra": [1]})

    with pytest.raises(CheckpointConflictError) as caught:
        saver.put(
            fenced(config, root["id"]), stale, make_metadata(0, "loop"), stale_changed
        )

    message = str(caught.value)
    assert "'t1'" in message and root["id"] in message and first["id"] in message
    assert "CHECKPOINT_CONFLICT" in message
    assert saver.stored_bytes("t1") == before
    assert saver.get_tuple(make_config("t1", stale["id"])) is None
    assert saver.get_tuple(make_config("t1")).checkpoint["id"] == first["id"]


def test_first_write_expecting_empty_thread_conflicts_when_it_exists(saver) -> None:
    _root(saver)
    other = make_checkpoint({"n": 9})

    with pytest.raises(CheckpointConflictError):
        saver.put(
            fenced(make_config("t1"), None),
            other,
            make_metadata(),
            other["channel_versions"],
        )


def test_fork_without_expected_head_succeeds(saver: BaseCheckpointSaver) -> None:
    root, config = _root(saver)
    first, changed = next_checkpoint(root, {"n": 1})
    saver.put(fenced(config, root["id"]), first, make_metadata(0, "loop"), changed)
    fork, fork_changed = next_checkpoint(root, {"n": "fork"})

    stored = saver.put(config, fork, make_metadata(0, "fork"), fork_changed)

    loaded = saver.get_tuple(stored)
    assert loaded is not None
    assert loaded.parent_config == config
    assert loaded.checkpoint["channel_values"] == {"n": "fork"}
    # the fork is now the head: a writer continuing from it is fenced on it
    after, after_changed = next_checkpoint(fork, {"n": 2})
    saver.put(
        fenced(stored, fork["id"]), after, make_metadata(1, "loop"), after_changed
    )


def test_fencing_is_per_namespace(saver: BaseCheckpointSaver) -> None:
    _root(saver)
    child = make_checkpoint({"n": 0})

    saver.put(
        fenced(make_config("t1", checkpoint_ns="sub:1"), None),
        child,
        make_metadata(),
        child["channel_versions"],
    )

    assert saver.get_tuple(make_config("t1", checkpoint_ns="sub:1")) is not None


def test_writers_of_different_threads_from_threads_all_succeed(saver) -> None:
    with ThreadPoolExecutor(8) as pool:
        counts = list(
            pool.map(
                lambda i: len(save_chain(saver, f"t{i}", 15, fence=True)), range(8)
            )
        )

    assert counts == [15] * 8
    for i in range(8):
        listed = list(saver.list(make_config(f"t{i}")))
        assert len(listed) == 15
        assert [t.metadata["step"] for t in listed] == list(range(13, -2, -1))


def test_racing_writers_of_one_thread_never_fork_it(saver: BaseCheckpointSaver) -> None:
    _root(saver)

    with ThreadPoolExecutor(4) as pool:
        list(
            pool.map(lambda w: append_with_retries(saver, "t1", f"w{w}", 10), range(4))
        )

    _assert_linear(saver, "t1", expected=1 + 4 * 10)


def _assert_linear(saver: BaseCheckpointSaver, thread_id: str, expected: int) -> None:
    listed = list(saver.list(make_config(thread_id)))
    assert len(listed) == expected
    for newer, older in zip(listed, listed[1:], strict=False):
        assert newer.parent_config is not None
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == older.checkpoint["id"]
        )


def _processes():
    return multiprocessing.get_context("spawn").Pool(4)


@pytest.mark.slow
def test_writers_of_different_threads_from_processes_all_succeed(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    if not saver_spec.shared:
        pytest.skip("the memory saver is not shared between processes")

    with _processes() as pool:
        counts = pool.starmap(
            write_chain, [(saver_spec, f"p{i}", 20) for i in range(4)]
        )

    assert counts == [20] * 4
    for i in range(4):
        _assert_linear(saver, f"p{i}", expected=20)


@pytest.mark.slow
def test_racing_writers_of_one_thread_from_processes_never_fork_it(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    if not saver_spec.shared:
        pytest.skip("the memory saver is not shared between processes")
    _root(saver)

    with _processes() as pool:
        pool.starmap(append_racing, [(saver_spec, "t1", f"p{i}", 8) for i in range(4)])

    _assert_linear(saver, "t1", expected=1 + 4 * 8)


def test_conflicts_do_not_disturb_later_writes(saver: BaseCheckpointSaver) -> None:
    # Postgres prepares statements after a few uses; a conflict aborts the
    # pipelined transaction and must not leave the connection confused.
    root, config = _root(saver)
    head = root
    for step in range(12):
        for append in ({}, {"log": [step]}):  # found out at commit / at a fetch
            stale, stale_changed = next_checkpoint(root, {"n": "stale"}, append=append)
            if step:
                with pytest.raises(CheckpointConflictError):
                    saver.put_step(
                        fenced(config, root["id"]),
                        [("task", "~t", [("n", step)])],
                        stale,
                        make_metadata(step, "loop"),
                        stale_changed,
                    )
        nxt, changed = next_checkpoint(head, {"n": step}, append={"log": [step]})
        config = saver.put_step(
            fenced(config, head["id"]),
            [("task", "~t", [("n", step)])],
            nxt,
            make_metadata(step, "loop"),
            changed,
        )
        head = nxt

    latest = saver.get_tuple(make_config("t1"))
    assert latest is not None
    assert latest.checkpoint["channel_values"]["log"] == list(range(12))

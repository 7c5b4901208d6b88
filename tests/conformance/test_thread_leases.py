"""Thread leases: one holder at a time, taken over only after expiry, and saves
fenced by a lease refused once their holder lost it (nothing of them stored)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from engine.checkpoint._lease import HELD_LEASE
from engine.checkpoint.base import EXPECTED_HEAD, BaseCheckpointSaver
from engine.errors import CheckpointConflictError, ThreadLeaseLostError
from tests._support.builders import make_checkpoint, make_config, make_metadata


def _with_lease(config, holder: str, ns: str = ""):
    return {
        **config,
        "configurable": {**config["configurable"], HELD_LEASE: (ns, holder)},
    }


def _root(saver: BaseCheckpointSaver, thread_id: str = "t1"):
    checkpoint = make_checkpoint({"n": 0})
    return saver.put(
        make_config(thread_id),
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )


def test_lease_free_thread_is_taken_and_others_are_refused(
    saver: BaseCheckpointSaver,
) -> None:
    assert saver.supports_leases
    taken = saver.acquire_lease("t1", "", "a", 30)
    refused = saver.acquire_lease("t1", "", "b", 30)

    assert taken.holder == "a" and refused.holder == "a"
    assert refused.expires_at == taken.expires_at
    assert taken.expires_at > datetime.now(UTC)
    assert saver.get_lease("t1", "") == taken


def test_lease_is_per_thread_and_namespace(saver: BaseCheckpointSaver) -> None:
    saver.acquire_lease("t1", "", "a", 30)

    assert saver.acquire_lease("t2", "", "b", 30).holder == "b"
    assert saver.acquire_lease("t1", "sub", "c", 30).holder == "c"


def test_lease_taken_again_by_its_holder_is_extended(
    saver: BaseCheckpointSaver,
) -> None:
    first = saver.acquire_lease("t1", "", "a", 1)
    again = saver.acquire_lease("t1", "", "a", 60)

    assert again.holder == "a" and again.expires_at > first.expires_at


def test_lease_is_taken_over_only_after_it_expired(saver: BaseCheckpointSaver) -> None:
    saver.acquire_lease("t1", "", "a", 0.3)
    assert saver.acquire_lease("t1", "", "b", 30).holder == "a"

    time.sleep(0.4)

    assert saver.acquire_lease("t1", "", "b", 30).holder == "b"
    assert saver.renew_lease("t1", "", "a", 30) is False


def test_lease_renewal_keeps_it_from_expiring(saver: BaseCheckpointSaver) -> None:
    saver.acquire_lease("t1", "", "a", 0.4)
    time.sleep(0.25)
    assert saver.renew_lease("t1", "", "a", 0.4) is True
    time.sleep(0.25)

    assert saver.acquire_lease("t1", "", "b", 30).holder == "a"


def test_lease_release_frees_it_for_the_next_run(saver: BaseCheckpointSaver) -> None:
    saver.acquire_lease("t1", "", "a", 30)
    saver.release_lease("t1", "", "b")  # not b's: nothing happens
    assert saver.get_lease("t1", "").holder == "a"

    saver.release_lease("t1", "", "a")

    assert saver.get_lease("t1", "") is None
    assert saver.acquire_lease("t1", "", "b", 30).holder == "b"
    assert saver.renew_lease("t1", "", "a", 30) is False


def test_lease_needs_a_positive_duration(saver: BaseCheckpointSaver) -> None:
    with pytest.raises(ValueError, match="positive"):
        saver.acquire_lease("t1", "", "a", 0)


def test_save_of_the_holder_is_stored(saver: BaseCheckpointSaver) -> None:
    saver.acquire_lease("t1", "", "a", 30)
    config = _root(saver)
    checkpoint = make_checkpoint({"n": 1})

    stored = saver.put(
        _with_lease(config, "a"),
        checkpoint,
        make_metadata(0),
        checkpoint["channel_versions"],
    )
    saver.put_writes(_with_lease(stored, "a"), [("n", 2)], "task-1")

    assert saver.get_tuple(stored).pending_writes == [("task-1", "n", 2)]


def test_save_of_an_expired_holder_nobody_replaced_is_stored(
    saver: BaseCheckpointSaver,
) -> None:
    saver.acquire_lease("t1", "", "a", 0.2)
    config = _root(saver)
    time.sleep(0.3)

    saver.put_writes(_with_lease(config, "a"), [("n", 2)], "task-1")

    assert saver.get_tuple(config).pending_writes == [("task-1", "n", 2)]


def test_saves_of_a_holder_that_lost_the_lease_store_nothing(
    saver: BaseCheckpointSaver,
) -> None:
    saver.acquire_lease("t1", "", "zombie", 0.2)
    config = _root(saver)
    time.sleep(0.3)
    saver.acquire_lease("t1", "", "new", 30)
    before = saver.stored_bytes("t1")
    checkpoint = make_checkpoint({"n": "late"})
    zombie = _with_lease(config, "zombie")

    with pytest.raises(ThreadLeaseLostError) as caught:
        saver.put(zombie, checkpoint, make_metadata(0), checkpoint["channel_versions"])
    with pytest.raises(ThreadLeaseLostError):
        saver.put_writes(zombie, [("n", "late")], "task-1")
    with pytest.raises(ThreadLeaseLostError):
        saver.put_steps(
            [
                (config, [("task-2", "", [("n", 3)])], None, None, {}),
                (
                    zombie,
                    [],
                    checkpoint,
                    make_metadata(0),
                    checkpoint["channel_versions"],
                ),
            ]
        )

    assert isinstance(caught.value, CheckpointConflictError)
    assert "'t1'" in str(caught.value) and "THREAD_LEASE_LOST" in str(caught.value)
    assert saver.stored_bytes("t1") == before
    assert saver.get_tuple(make_config("t1")).config == config
    assert saver.get_tuple(config).pending_writes == []


def test_released_lease_refuses_its_old_holders_saves(
    saver: BaseCheckpointSaver,
) -> None:
    saver.acquire_lease("t1", "", "a", 30)
    config = _root(saver)
    saver.release_lease("t1", "", "a")

    with pytest.raises(ThreadLeaseLostError):
        saver.put_writes(_with_lease(config, "a"), [("n", 2)], "task-1")


def test_subgraph_saves_are_fenced_by_the_root_namespace_lease(
    saver: BaseCheckpointSaver,
) -> None:
    saver.acquire_lease("t1", "", "root-run", 30)
    checkpoint = make_checkpoint({"n": 0})
    child = make_config("t1", checkpoint_ns="child:1")

    stored = saver.put(
        _with_lease(child, "root-run"),
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )
    with pytest.raises(ThreadLeaseLostError):
        saver.put_writes(_with_lease(stored, "other-run"), [("n", 1)], "task-1")

    assert stored["configurable"]["checkpoint_ns"] == "child:1"


async def test_async_lease_api_matches_the_sync_one(
    asaver: BaseCheckpointSaver,
) -> None:
    taken = await asaver.aacquire_lease("t1", "", "a", 30)
    refused = await asaver.aacquire_lease("t1", "", "b", 30)
    renewed = await asaver.arenew_lease("t1", "", "a", 30)
    not_renewed = await asaver.arenew_lease("t1", "", "b", 30)
    seen = await asaver.aget_lease("t1", "")
    await asaver.arelease_lease("t1", "", "a")

    assert (taken.holder, refused.holder, renewed, not_renewed) == (
        "a",
        "a",
        True,
        False,
    )
    assert seen is not None and seen.holder == "a"
    assert await asaver.aget_lease("t1", "") is None
    checkpoint = make_checkpoint({"n": 0})
    with pytest.raises(ThreadLeaseLostError):
        await asaver.aput(
            _with_lease(make_config("t1"), "a"),
            checkpoint,
            make_metadata(),
            checkpoint["channel_versions"],
        )


def test_lease_taken_with_the_head_reads_it_and_a_refused_one_reads_nothing(
    saver: BaseCheckpointSaver,
) -> None:
    stored = _root(saver)
    head_id = stored["configurable"]["checkpoint_id"]

    taken, saved = saver.acquire_lease_and_get_tuple(make_config("t1"), "a", 30)
    refused, unread = saver.acquire_lease_and_get_tuple(make_config("t1"), "b", 30)
    empty, none = saver.acquire_lease_and_get_tuple(make_config("t9"), "c", 30)
    by_id, same = saver.acquire_lease_and_get_tuple(
        make_config("t1", checkpoint_id=head_id), "a", 30
    )

    assert taken.holder == "a" and saved is not None
    assert saved.checkpoint["id"] == head_id
    assert saved.checkpoint["channel_values"] == {"n": 0}
    assert (refused.holder, unread) == ("a", None)
    assert (empty.holder, none) == ("c", None)
    assert saver.get_lease("t9", "") == empty
    assert by_id.holder == "a" and same is not None
    assert same.checkpoint["id"] == head_id


async def test_async_lease_taken_with_the_head_matches_the_sync_one(
    asaver: BaseCheckpointSaver,
) -> None:
    checkpoint = make_checkpoint({"n": 0})
    await asaver.aput(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )

    taken, saved = await asaver.aacquire_lease_and_get_tuple(make_config("t1"), "a", 30)
    refused, unread = await asaver.aacquire_lease_and_get_tuple(
        make_config("t1"), "b", 30
    )

    assert taken.holder == "a" and saved is not None
    assert saved.checkpoint["id"] == checkpoint["id"]
    assert (refused.holder, unread) == ("a", None)


def _releases_with_saves(saver: BaseCheckpointSaver) -> None:
    if not getattr(type(saver), "releases_with_saves", False):
        pytest.skip("only the SQL savers give a lease back with a batch of saves")


def _next_step(config, holder: str):
    """A run's step after the checkpoint ``config`` addresses, fenced by its
    lease and by that head, as the runtime saves it."""
    checkpoint = make_checkpoint({"n": 1}, step=0)
    fenced = {
        "configurable": {
            **_with_lease(config, holder)["configurable"],
            EXPECTED_HEAD: config["configurable"]["checkpoint_id"],
        }
    }
    return (fenced, [], checkpoint, make_metadata(0), checkpoint["channel_versions"])


def test_a_batch_that_gives_its_lease_back_stores_and_releases(
    saver: BaseCheckpointSaver,
) -> None:
    _releases_with_saves(saver)
    saver.acquire_lease("t1", "", "run", 30)
    config = _root(saver)

    stored = saver.put_steps([_next_step(config, "run")], release=("t1", "", "run"))

    assert saver.get_lease("t1", "") is None
    assert saver.get_tuple(make_config("t1")).config == stored[0]


@pytest.mark.parametrize("head_moved", [False, True])
def test_a_batch_giving_back_a_lost_lease_stores_nothing_and_keeps_the_takers(
    saver: BaseCheckpointSaver, head_moved: bool
) -> None:
    """The batch is refused as a lost lease (before its head is compared, even
    when that moved too); the lease row of the process that took the thread
    over stays."""
    _releases_with_saves(saver)
    saver.acquire_lease("t1", "", "zombie", 0.2)
    config = _root(saver)
    time.sleep(0.3)
    saver.acquire_lease("t1", "", "new", 30)
    if head_moved:
        newer = make_checkpoint({"n": 5}, step=0)
        moved = {
            "configurable": {
                **_with_lease(config, "new")["configurable"],
                EXPECTED_HEAD: config["configurable"]["checkpoint_id"],
            }
        }
        saver.put(moved, newer, make_metadata(0), newer["channel_versions"])
    head = saver.get_tuple(make_config("t1")).config
    before = saver.stored_bytes("t1")

    with pytest.raises(ThreadLeaseLostError):
        saver.put_steps([_next_step(config, "zombie")], release=("t1", "", "zombie"))

    assert saver.get_lease("t1", "").holder == "new"
    assert saver.stored_bytes("t1") == before
    assert saver.get_tuple(make_config("t1")).config == head

"""Taking a thread's lease with a guess of its head (``guesses_heads``).

A SQL saver remembers the head it last saved on each thread; taking that
thread's lease then sends the reads of that head's values and writes with the
take, so a resumed run gets its lease and state in one transaction (on Postgres
one round trip instead of two). The guess is only a guess: the head row read in
the same transaction decides. What comes back must be what ``get_tuple`` reads,
whether the guess was right or not. The guess also keeps the small values the
saver stored, which a take then does not read. Both SQL savers guess (the
tests set it explicitly, so they hold for any saver made to).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.checkpoint._sqlcore import reads
from engine.checkpoint._sqlcore import saver as saver_module
from engine.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from engine.errors import CheckpointConflictError
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
    put_first,
)
from tests._support.savers import SaverSpec

THREAD = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def guessing(saver: BaseCheckpointSaver) -> Any:
    saver.guesses_heads = True  # type: ignore[attr-defined]
    return saver


def sql_only(spec: SaverSpec) -> None:
    if spec.kind == "memory":
        pytest.skip("the in-memory saver reads its head without a round trip")


@pytest.fixture
def outcomes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What each use of a guess came to: "hit", "missed" or "none" (no row)."""
    seen: list[str] = []
    real = reads.tuple_of_guess

    def recorded(*args: Any) -> Any:
        result = real(*args)
        seen.append(
            "missed"
            if isinstance(result, reads.Missed)
            else "none"
            if result is None
            else "hit"
        )
        return result

    monkeypatch.setattr(reads, "tuple_of_guess", recorded)
    return seen


def counting(saver: Any) -> list[int]:
    """Count the saver's transactions (``_run`` calls)."""
    calls: list[int] = []
    run = saver._run

    def counted(op: Any, *, write: bool) -> Any:
        calls.append(1)
        return run(op, write=write)

    saver._run = counted
    return calls


def two_steps(saver: BaseCheckpointSaver) -> tuple[dict[str, Any], Any]:
    """An input checkpoint, then a step with a list value and the step's writes."""
    first, config = put_first(saver, "t1", {"n": 0, "items": [1, 2, 3]})
    second, changed = next_checkpoint(first, {"n": 1, "note": "x" * 3000})
    stored = saver.put_step(
        fenced(config, first["id"]),
        [("task-a", "~pull, a", [("n", 1)])],
        second,
        make_metadata(0, "loop"),
        changed,
    )
    return second, stored


def same(got: CheckpointTuple | None, want: CheckpointTuple | None) -> None:
    assert got is not None and want is not None
    assert got.config == want.config
    assert got.checkpoint == want.checkpoint
    assert got.metadata == want.metadata
    assert got.parent_config == want.parent_config
    assert got.pending_writes == want.pending_writes


def test_a_right_guess_reads_what_get_tuple_reads_in_one_transaction(
    saver_spec: SaverSpec, outcomes: list[str]
) -> None:
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        head, stored = two_steps(saver)
        saver.put_writes(stored, [("n", 5), ("note", "y")], "task-b", "~pull, b")
        calls = counting(saver)
        lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert lease.holder == "run"
        assert len(calls) == 1  # lease, head, values and writes together
        assert outcomes == ["hit"]
        assert saved is not None and saved.checkpoint["id"] == head["id"]
        assert saved.checkpoint["channel_values"]["note"] == "x" * 3000
        assert ("task-b", "n", 5) in saved.pending_writes  # written after the save
        same(saved, saver.get_tuple(THREAD))


def test_a_stale_guess_reads_the_newer_head(
    saver_spec: SaverSpec, outcomes: list[str]
) -> None:
    """Another process saves a newer head that needs no new value (the guess's
    values would do) but has writes of its own: the head row's id decides."""
    sql_only(saver_spec)
    with saver_spec.open() as first_opened, saver_spec.open() as second:
        saver = guessing(first_opened)
        head, stored = two_steps(saver)
        newer, changed = next_checkpoint(head)
        assert changed == {}
        newer_config = second.put_step(
            fenced(stored, head["id"]), [], newer, make_metadata(1, "loop"), changed
        )
        second.put_writes(newer_config, [("n", 7)], "task-c", "~pull, c")
        calls = counting(saver)
        lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert lease.holder == "run"
        assert len(calls) == 2  # the guess missed: the head read again
        assert outcomes == ["missed"]
        assert saved is not None and saved.checkpoint["id"] == newer["id"]
        assert saved.pending_writes == [("task-c", "n", 7)]
        same(saved, saver.get_tuple(THREAD))


def test_a_guess_is_not_used_for_a_named_checkpoint(
    saver_spec: SaverSpec, outcomes: list[str]
) -> None:
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        _head, stored = two_steps(saver)
        parent_id = saver.get_tuple(stored).parent_config["configurable"][  # type: ignore[union-attr]
            "checkpoint_id"
        ]
        named = {"configurable": {**THREAD["configurable"], "checkpoint_id": parent_id}}
        _lease, saved = saver.acquire_lease_and_get_tuple(named, "run", 30)
        assert saved is not None and saved.checkpoint["id"] == parent_id
        assert outcomes == []
        same(saved, saver.get_tuple(named))


def test_another_holders_lease_is_reported_with_a_guess(saver_spec: SaverSpec) -> None:
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        two_steps(saver)
        saver.acquire_lease("t1", "", "someone else", 30)
        lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert lease.holder == "someone else" and saved is None


def test_a_guess_missing_a_needed_value_is_not_used(
    saver_spec: SaverSpec, outcomes: list[str]
) -> None:
    """The head row decides which values are needed: a guess that lacks one
    (here, made without any) falls back to reading the head anew."""
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        head, _stored = two_steps(saver)
        saver._heads[("t1", "")] = ("t1", "", head["id"], frozenset(), {})
        calls = counting(saver)
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert len(calls) == 2 and outcomes == ["missed"]
        same(saved, saver.get_tuple(THREAD))


def test_tuple_of_guess_without_a_row_is_none() -> None:
    assert reads.tuple_of_guess(None, [], ("t", "", "x", frozenset(), {}), [[]]) is None  # type: ignore[arg-type]


def test_async_twin_reads_what_get_tuple_reads(
    saver_spec: SaverSpec, outcomes: list[str]
) -> None:
    sql_only(saver_spec)

    async def main() -> None:
        async with saver_spec.aopen() as opened:
            saver = guessing(opened)
            first = make_checkpoint({"n": 0})
            config = await saver.aput(
                fenced(make_config("t1"), None),
                first,
                make_metadata(),
                first["channel_versions"],
            )
            second, changed = next_checkpoint(first, {"n": 1})
            await saver.aput_step(
                fenced(config, first["id"]),
                [("task-a", "~pull, a", [("n", 1)])],
                second,
                make_metadata(0, "loop"),
                changed,
            )
            lease, saved = await saver.aacquire_lease_and_get_tuple(THREAD, "run", 30)
            assert lease.holder == "run"
            assert saved is not None and saved.checkpoint["id"] == second["id"]
            same(saved, await saver.aget_tuple(THREAD))
            await saver.arelease_lease("t1", "", "run")
            # stale: another save the guess does not know of
            third, changed = next_checkpoint(second, {"n": 2})
            saver._heads.clear()
            await saver.aput_step(
                fenced(
                    {
                        **config,
                        "configurable": {
                            **config["configurable"],
                            "checkpoint_id": second["id"],
                        },
                    },
                    second["id"],
                ),
                [],
                third,
                make_metadata(1, "loop"),
                changed,
            )
            saver._heads[("t1", "")] = ("t1", "", second["id"], frozenset(), {})
            _lease, saved = await saver.aacquire_lease_and_get_tuple(THREAD, "run", 30)
            assert saved is not None and saved.checkpoint["id"] == third["id"]
            same(saved, await saver.aget_tuple(THREAD))
            assert outcomes == ["hit", "missed"]

    asyncio.run(main())


def test_a_batch_of_steps_leaves_its_newest_as_the_guess(
    saver_spec: SaverSpec, outcomes: list[str]
) -> None:
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        first, config = put_first(saver, "t1", {"n": 0})
        second, changed = next_checkpoint(first, {"n": 1})
        third, changed_again = next_checkpoint(second, {"n": 2})
        at_second = {
            "configurable": {**config["configurable"], "checkpoint_id": second["id"]}
        }
        saver.put_steps(
            [
                (
                    fenced(config, first["id"]),
                    [],
                    second,
                    make_metadata(0, "loop"),
                    changed,
                ),
                (
                    fenced(at_second, second["id"]),
                    [],
                    third,
                    make_metadata(1, "loop"),
                    changed_again,
                ),
            ]
        )
        assert saver._heads[("t1", "")][2] == third["id"]
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert outcomes == ["hit"]
        assert saved is not None and saved.checkpoint["channel_values"]["n"] == 2
        same(saved, saver.get_tuple(THREAD))


# -- the values a guess keeps ------------------------------------------------------


@pytest.fixture
def values_read(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The channels whose values each statement batch of reads asks the values
    table for (an empty set: the batch reads no value)."""
    seen: list[set[str]] = []
    real = reads.value_and_write_reads

    def recorded(d: Any, checkpoint_keys: Any, blob_keys: Any, **kw: Any) -> Any:
        blob_keys = list(blob_keys)
        seen.append({key[2] for key in blob_keys})
        return real(d, checkpoint_keys, blob_keys, **kw)

    monkeypatch.setattr(reads, "value_and_write_reads", recorded)
    return seen


def test_a_guess_serves_the_small_values_its_saver_stored(
    saver_spec: SaverSpec, outcomes: list[str], values_read: list[set[str]]
) -> None:
    """A stored version never changes: the small values the saver stored for
    the head (and those of earlier steps the head still names) come from the
    guess; a large one is read."""
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        head, _stored = two_steps(saver)  # items: step -1; n, note: step 0
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert outcomes == ["hit"]
        assert values_read == [{"note"}]  # 3,000 bytes: past GUESS_VALUE_BYTES
        assert saved is not None
        assert saved.checkpoint["channel_values"] == head["channel_values"]
        same(saved, saver.get_tuple(THREAD))


def test_a_guess_of_small_values_reads_none(
    saver_spec: SaverSpec, outcomes: list[str], values_read: list[set[str]]
) -> None:
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        first, config = put_first(saver, "t1", {"n": 0, "limit": 3, "tag": "a"})
        for step in range(3):  # "limit" and "tag" stay at their first versions
            head, changed = next_checkpoint(first, {"n": step + 1}, step=step)
            config = saver.put_step(
                fenced(config, first["id"]),
                [],
                head,
                make_metadata(step, "loop"),
                changed,
            )
            first = head
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert outcomes == ["hit"] and values_read == [set()]
        assert saved is not None
        assert saved.checkpoint["channel_values"] == {"n": 3, "limit": 3, "tag": "a"}
        same(saved, saver.get_tuple(THREAD))


def test_a_value_stored_as_a_delta_is_read(
    saver_spec: SaverSpec, outcomes: list[str], values_read: list[set[str]]
) -> None:
    """A delta's value is its base's with items added: the guess keeps whole
    values only, so the head's list is read (with its chain)."""
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        first, config = put_first(saver, "t1", {"n": 0, "log": [1]})
        second, changed = next_checkpoint(first, {"n": 1}, append={"log": [2, 3]})
        saver.put_step(
            fenced(config, first["id"]), [], second, make_metadata(0, "loop"), changed
        )
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert outcomes == ["hit"] and values_read == [{"log"}]
        assert saved is not None
        assert saved.checkpoint["channel_values"]["log"] == [1, 2, 3]
        same(saved, saver.get_tuple(THREAD))


def test_a_guess_keeps_values_up_to_its_bytes(
    saver_spec: SaverSpec,
    outcomes: list[str],
    values_read: list[set[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sql_only(saver_spec)
    monkeypatch.setattr(saver_module, "_GUESSED_HEAD_BYTES", 250)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        values = {f"c{i}": "v" * 100 for i in range(4)}  # ~102 bytes each as JSON
        put_first(saver, "t1", values)
        kept = saver._heads[("t1", "")][4]
        assert len(kept) == 2
        assert sum(len(record.payload) for record in kept.values()) <= 250
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert outcomes == ["hit"]
        assert values_read == [set(values) - {key[2] for key in kept}]
        assert saved is not None and saved.checkpoint["channel_values"] == values
        same(saved, saver.get_tuple(THREAD))


def test_a_refused_save_leaves_the_guess_and_its_values(
    saver_spec: SaverSpec, outcomes: list[str], values_read: list[set[str]]
) -> None:
    """Only a committed save changes the guess: a fenced save that conflicts
    stores nothing, and the values it would have stored are not kept."""
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        first, config = put_first(saver, "t1", {"n": 0})
        guess = saver._heads[("t1", "")]
        refused, changed = next_checkpoint(first, {"n": 99})
        with pytest.raises(CheckpointConflictError):
            saver.put_step(
                fenced(config, "not-the-head"), [], refused, make_metadata(0), changed
            )
        assert saver._heads[("t1", "")] == guess
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert outcomes == ["hit"] and values_read == [set()]
        assert saved is not None and saved.checkpoint["channel_values"] == {"n": 0}


def test_a_guess_never_contradicts_the_row_a_version_keeps(
    saver_spec: SaverSpec, outcomes: list[str]
) -> None:
    """A value row is written once: a caller that saves a version again with
    another value (an unfenced put naming a stored version) leaves the first
    row, and the guess serves that one too."""
    sql_only(saver_spec)
    with saver_spec.open() as opened:
        saver = guessing(opened)
        first, config = put_first(saver, "t1", {"n": 0, "tag": "a"})
        again, changed = next_checkpoint(first, {"n": 1})
        again["channel_values"]["tag"] = "b"  # stored again under "a"'s version
        changed["tag"] = first["channel_versions"]["tag"]
        saver.put(config, again, make_metadata(0, "update"), changed)
        _lease, saved = saver.acquire_lease_and_get_tuple(THREAD, "run", 30)
        assert outcomes == ["hit"]
        assert saved is not None and saved.checkpoint["channel_values"]["tag"] == "a"
        same(saved, saver.get_tuple(THREAD))

"""The async twins behave like the sync methods, on every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.postgres.aio import AsyncPostgresSaver
from engine.errors import CheckpointConflictError
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)

pytestmark = pytest.mark.asyncio


async def _chain(
    saver: BaseCheckpointSaver, thread_id: str, steps: int, ns: str = ""
) -> list:
    checkpoint = make_checkpoint({"n": -1, "log": []})
    config = await saver.aput(
        fenced(make_config(thread_id, checkpoint_ns=ns), None),
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )
    configs = [config]
    for step in range(steps - 1):
        parent = checkpoint["id"]
        checkpoint, changed = next_checkpoint(
            checkpoint, {"n": step}, append={"log": [step]}, step=step
        )
        config = await saver.aput(
            fenced(config, parent), checkpoint, make_metadata(step, "loop"), changed
        )
        configs.append(config)
    return configs


async def _collect(iterator) -> list:
    return [item async for item in iterator]


async def test_aput_aget_tuple_and_alist(asaver) -> None:
    configs = await _chain(asaver, "t1", 5)

    latest = await asaver.aget_tuple(make_config("t1"))
    first = await asaver.aget(configs[0])
    listed = await _collect(asaver.alist(make_config("t1")))
    loops = await _collect(
        asaver.alist(make_config("t1"), filter={"source": "loop"}, limit=2)
    )
    before = await _collect(asaver.alist(make_config("t1"), before=configs[2]))

    assert latest.checkpoint["channel_values"] == {"n": 3, "log": [0, 1, 2, 3]}
    assert first["channel_values"] == {"n": -1, "log": []}
    assert [t.config for t in listed] == list(reversed(configs))
    assert [t.metadata["step"] for t in loops] == [3, 2]
    assert [t.config for t in before] == [configs[1], configs[0]]


async def test_aput_writes_idempotent_and_special_replace(asaver) -> None:
    (config,) = await _chain(asaver, "t1", 1)

    await asaver.aput_writes(config, [("n", 1)], "task-a", "~a")
    await asaver.aput_writes(config, [("n", 2)], "task-a", "~a")
    await asaver.aput_writes(config, [("__error__", "one")], "task-b", "~b")
    await asaver.aput_writes(config, [("__error__", "two")], "task-b", "~b")

    loaded = await asaver.aget_tuple(config)
    assert loaded.pending_writes == [("task-a", "n", 1), ("task-b", "__error__", "two")]


async def test_aput_stale_head_conflicts(asaver) -> None:
    configs = await _chain(asaver, "t1", 2)
    head = await asaver.aget_tuple(configs[0])
    stale, changed = next_checkpoint(head.checkpoint, {"n": "stale"})

    with pytest.raises(CheckpointConflictError):
        await asaver.aput(
            fenced(configs[0], configs[0]["configurable"]["checkpoint_id"]),
            stale,
            make_metadata(0),
            changed,
        )

    assert len(await _collect(asaver.alist(make_config("t1")))) == 2


async def test_concurrent_async_writers_of_different_threads(asaver) -> None:
    results = await asyncio.gather(*(_chain(asaver, f"t{i}", 10) for i in range(6)))

    assert [len(r) for r in results] == [10] * 6
    for i in range(6):
        latest = await asaver.aget_tuple(make_config(f"t{i}"))
        assert latest.checkpoint["channel_values"]["log"] == list(range(9))


async def test_async_retention(asaver) -> None:
    await _chain(asaver, "src", 3)
    await _chain(asaver, "src", 2, ns="sub:1")

    await asaver.acopy_thread("src", "dst")
    assert await asaver.astored_bytes("dst") == await asaver.astored_bytes("src")
    await asaver.aprune(["dst"])
    assert len(await _collect(asaver.alist(make_config("dst")))) == 1
    await asaver.aprune(["dst"], strategy="delete")
    assert await asaver.aget_tuple(make_config("dst")) is None
    await asaver.adelete_thread("src")
    assert await asaver.astored_bytes("src") == 0


async def test_async_ttl_and_sweep(asaver) -> None:
    await _chain(asaver, "a", 1)
    await _chain(asaver, "b", 1)

    await asaver.aset_thread_ttl("a", 60)
    await asaver.aset_thread_ttl("b", 60)
    await asaver.aset_thread_ttl("b", None)

    assert await asaver.asweep_expired() == []
    assert await asaver.asweep_expired(datetime.now(UTC) + timedelta(minutes=5)) == [
        "a"
    ]
    assert await asaver.aget_tuple(make_config("a")) is None
    assert await asaver.aget_tuple(make_config("b")) is not None


async def test_sync_methods_of_async_postgres_saver(asaver) -> None:
    if not isinstance(asaver, AsyncPostgresSaver):
        pytest.skip("only AsyncPostgresSaver restricts its sync methods")
    await _chain(asaver, "t1", 2)

    with pytest.raises(RuntimeError, match="other than its event loop"):
        asaver.get_tuple(make_config("t1"))
    from_thread = await asyncio.to_thread(asaver.get_tuple, make_config("t1"))
    listed = await asyncio.to_thread(lambda: list(asaver.list(make_config("t1"))))

    assert from_thread.checkpoint["channel_values"]["n"] == 0
    assert len(listed) == 2

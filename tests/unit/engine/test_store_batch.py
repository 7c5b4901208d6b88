"""AsyncBatchedBaseStore (concurrent async calls share a batch) and validate_op_namespace."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from engine.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchOp,
    validate_op_namespace,
)
from engine.store.base.batch import AsyncBatchedBaseStore, SyncCallOnEventLoopError
from engine.store.memory import InMemoryStore


class RecordingStore(AsyncBatchedBaseStore):
    """Batches over an InMemoryStore, recording every batch it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = InMemoryStore()
        self.batches: list[list[Op]] = []

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        self.batches.append(ops)
        return self.inner.batch(ops)


@pytest.mark.asyncio
async def test_concurrent_calls_share_one_batch() -> None:
    store = RecordingStore()
    await store.aput(("d",), "a", {"v": 1})
    store.batches.clear()

    got, listed, _ = await asyncio.gather(
        store.aget(("d",), "a"),
        store.alist_namespaces(),
        store.aput(("d",), "b", {"v": 2}),
    )

    assert got is not None and got.value == {"v": 1}
    assert listed == [("d",)]
    assert len(store.batches) == 1 and len(store.batches[0]) == 3


@pytest.mark.asyncio
async def test_equal_reads_run_once_unless_a_put_comes_between() -> None:
    store = RecordingStore()
    await store.aput(("d",), "a", {"v": 1})
    store.batches.clear()

    first, second, _, third = await asyncio.gather(
        store.aget(("d",), "a"),
        store.aget(("d",), "a"),
        store.aput(("d",), "a", {"v": 2}),
        store.aget(("d",), "a"),
    )

    assert [op.__class__.__name__ for op in store.batches[0]] == [
        "GetOp",
        "PutOp",
        "GetOp",
    ]
    assert first == second and first is not None and first.value == {"v": 1}
    assert third is not None and third.value == {"v": 2}


@pytest.mark.asyncio
async def test_a_bad_op_fails_only_its_own_caller() -> None:
    store = RecordingStore()

    good, bad = await asyncio.gather(
        store.aput(("d",), "ok", {"v": 1}),
        store.aput(("d.x",), "bad", {"v": 1}),
        return_exceptions=True,
    )

    assert good is None
    assert isinstance(bad, InvalidNamespaceError)
    assert await store.aget(("d",), "ok") is not None


@pytest.mark.asyncio
async def test_a_cancelled_call_or_task_does_not_break_the_store() -> None:
    store = RecordingStore()
    call = asyncio.create_task(store.aget(("d",), "a"))
    await asyncio.sleep(0)
    call.cancel()
    assert store._task is not None
    store._task.cancel()
    await asyncio.sleep(0)

    await store.aput(("d",), "a", {"v": 1})

    assert await store.aget(("d",), "a") is not None


@pytest.mark.asyncio
async def test_sync_calls_work_from_threads_and_refuse_on_the_loop() -> None:
    store = RecordingStore()

    await asyncio.to_thread(store.put, ("d",), "a", {"v": 1})
    item = await asyncio.to_thread(store.get, ("d",), "a")

    assert item is not None and item.value == {"v": 1}
    with pytest.raises(SyncCallOnEventLoopError, match="would deadlock"):
        store.get(("d",), "a")
    assert issubclass(SyncCallOnEventLoopError, asyncio.InvalidStateError)
    assert issubclass(SyncCallOnEventLoopError, RuntimeError)


@pytest.mark.parametrize(
    "op",
    [
        GetOp(("a.b",), "k"),
        PutOp(("a", ""), "k", {}),
        SearchOp(("a", 1)),  # type: ignore[arg-type]
        ListNamespacesOp((MatchCondition("prefix", ("a\x00",)),)),
    ],
)
def test_validate_op_namespace_rejects_bad_labels(op: Op) -> None:
    with pytest.raises(InvalidNamespaceError):
        validate_op_namespace(op)


def test_validate_op_namespace_accepts_good_ones() -> None:
    validate_op_namespace(GetOp(("a", "b"), "k"))
    validate_op_namespace(SearchOp(()))
    validate_op_namespace(ListNamespacesOp((MatchCondition("suffix", ("*", "b")),)))

"""AsyncBatchedBaseStore: async calls made in the same event-loop tick share one batch.

A store whose ``abatch`` costs a round trip (a database, a remote service) gains from
running concurrent ``aget``/``aput``/``asearch``... calls together: each call queues
its op, and a background task hands everything queued so far to ``abatch`` at once.
Identical reads with no put between them run once. When the combined batch fails
with an input error (an invalid namespace, filter, value...), which by contract has
applied nothing, each op is retried alone so only the caller at fault gets the
error. Any other error fails every call of that batch.

The sync methods call :meth:`batch`, which runs ``abatch`` on the store's loop and
waits: use them from other threads (a sync node in a worker thread), never on the
loop itself, which raises instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable

from engine.errors import SerializationError
from engine.store.base import (
    BaseStore,
    InvalidStoreInputError,
    Op,
    PutOp,
    Result,
)

__all__ = ("AsyncBatchedBaseStore", "SyncCallOnEventLoopError")

_Queue = asyncio.Queue[tuple["asyncio.Future[Result]", Op]]


class SyncCallOnEventLoopError(asyncio.InvalidStateError, RuntimeError):
    """A sync store method was called on the event loop the store's calls run on.

    It would wait for that very loop, forever. Use the async method there.
    """


class AsyncBatchedBaseStore(BaseStore):
    """A store whose async calls are batched by a background task (module docstring).

    Create it inside a running event loop; subclasses implement :meth:`abatch`.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._aqueue: _Queue = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._ensure_task()

    def __del__(self) -> None:
        task = getattr(self, "_task", None)
        if task is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(task.cancel)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the store's calls run on."""
        return self._loop

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(_run(self._aqueue, weakref.ref(self)))

    async def _arun_one(self, op: Op) -> Result:
        """Queue ``op``: the store's async methods (``aget``, ``aput``...) all come
        here, and the queue's task runs what is waiting as one batch."""
        self._ensure_task()
        future: asyncio.Future[Result] = self._loop.create_future()
        self._aqueue.put_nowait((future, op))
        return await future

    # -- the sync API runs on the loop ------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``abatch`` on the store's loop from another thread and wait for it.

        Raises:
            SyncCallOnEventLoopError: called on the store's own event loop.
        """
        self._refuse_on_loop()
        call = self.abatch(list(ops))
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    def _refuse_on_loop(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is self._loop:
            raise SyncCallOnEventLoopError(
                f"Synchronous {type(self).__name__} methods were called on its own "
                "event loop, which would deadlock. Use the async methods (aget, aput, "
                "asearch...) there, or call the sync ones from another thread."
            )


def _dedupe(ops: list[Op]) -> tuple[list[Op], list[int]]:
    """Distinct ops to run and, for each given op, the index of its result.

    Equal reads share one run unless a put comes between them.
    """
    unique: list[Op] = []
    where: list[int] = []
    seen: dict[Op, int] = {}
    for op in ops:
        if isinstance(op, PutOp):
            seen.clear()
            where.append(len(unique))
            unique.append(op)
            continue
        try:
            index = seen.setdefault(op, len(unique))
        except TypeError:  # an op holding a dict (a filter) is unhashable
            index = len(unique)
        if index == len(unique):
            unique.append(op)
        where.append(index)
    return unique, where


async def _run(
    queue: _Queue, ref: weakref.ReferenceType[AsyncBatchedBaseStore]
) -> None:
    while True:
        entries = [await queue.get()]
        while not queue.empty():
            entries.append(queue.get_nowait())
        entries = [(future, op) for future, op in entries if not future.done()]
        store = ref()
        if store is None:
            return
        if entries:
            await _serve(store, entries)
        del store


async def _serve(
    store: AsyncBatchedBaseStore,
    entries: list[tuple[asyncio.Future[Result], Op]],
) -> None:
    unique, where = _dedupe([op for _, op in entries])
    try:
        results = await store.abatch(unique)
    except (InvalidStoreInputError, SerializationError) as exc:
        if len(unique) == 1:
            _settle([future for future, _ in entries], exc)
            return
        for entry in entries:  # find whose op was at fault; nothing was applied
            await _serve(store, [entry])
        return
    except Exception as exc:
        _settle([future for future, _ in entries], exc)
        return
    for (future, _), index in zip(entries, where, strict=True):
        if not future.done():
            future.set_result(results[index])


def _settle(futures: list[asyncio.Future[Result]], exc: Exception) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(exc)

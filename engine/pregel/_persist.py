"""How the loop's checkpoint saves reach the saver: inline, in order in the background, or not at all.

``durability="sync"`` saves inline (the loop waits), ``"async"`` queues saves on a
serial background lane (one per run, in order, with back-pressure), ``"exit"``
saves only what the loop hands over when the run returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from engine._internal._typing import RunnableConfig
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)

__all__ = ("AsyncPersistence", "SyncPersistence", "TaskWrites")

TaskWrites = tuple[str, str, Sequence[tuple[str, Any]]]
"""(task_id, task_path, writes) saved against one checkpoint."""

MAX_QUEUED_SAVES = 8
"""Back-pressure: a run never has more saves than this waiting in the background."""

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def background_pool() -> ThreadPoolExecutor:
    """The process-wide pool shared by every run's background saves and parallel tasks."""
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                # Nodes are often I/O bound (HTTP, databases): allow many threads.
                _POOL = ThreadPoolExecutor(max_workers=64, thread_name_prefix="engine")
    return _POOL


def put_step(
    saver: BaseCheckpointSaver,
    config: RunnableConfig,
    task_writes: Sequence[TaskWrites],
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> RunnableConfig:
    """Save the last task writes of a step and the checkpoint that follows them.

    Savers that can do both in one transaction implement ``put_step``; others
    get the writes first, then the checkpoint (the same guarantee, two commits).
    """
    method = getattr(saver, "put_step", None)
    if method is not None:
        result: RunnableConfig = method(
            config, task_writes, checkpoint, metadata, new_versions
        )
        return result
    for task_id, task_path, writes in task_writes:
        saver.put_writes(config, writes, task_id, task_path)
    return saver.put(config, checkpoint, metadata, new_versions)


async def aput_step(
    saver: BaseCheckpointSaver,
    config: RunnableConfig,
    task_writes: Sequence[TaskWrites],
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> RunnableConfig:
    method = getattr(saver, "aput_step", None)
    if method is not None:
        result: RunnableConfig = await method(
            config, task_writes, checkpoint, metadata, new_versions
        )
        return result
    for task_id, task_path, writes in task_writes:
        await saver.aput_writes(config, writes, task_id, task_path)
    return await saver.aput(config, checkpoint, metadata, new_versions)


class SyncPersistence:
    """Saves for a synchronous run."""

    __slots__ = ("_cond", "_error", "_queue", "_running", "background", "saver")

    def __init__(self, saver: BaseCheckpointSaver, background: bool) -> None:
        self.saver = saver
        self.background = background
        self._queue: deque[Callable[[], Any]] = deque()
        self._running = False
        self._error: BaseException | None = None
        self._cond = threading.Condition()

    def _submit(self, job: Callable[[], Any]) -> None:
        with self._cond:
            self._raise_pending()
            while len(self._queue) >= MAX_QUEUED_SAVES:
                self._cond.wait()
                self._raise_pending()
            self._queue.append(job)
            if not self._running:
                self._running = True
                background_pool().submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._cond:
                if self._error is not None:
                    self._queue.clear()  # later saves depend on the failed one
                if not self._queue:
                    self._running = False
                    self._cond.notify_all()
                    return
                job = self._queue[0]
            try:
                job()
            except BaseException as exc:
                with self._cond:
                    self._error = exc
            with self._cond:
                if self._queue:
                    self._queue.popleft()
                self._cond.notify_all()

    def _raise_pending(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        path: str,
    ) -> None:
        if self.background:
            self._submit(lambda: self.saver.put_writes(config, writes, task_id, path))
        else:
            self.saver.put_writes(config, writes, task_id, path)

    def put_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[TaskWrites],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        on_saved: Callable[[float], None] | None = None,
    ) -> None:
        def job() -> None:
            started = time.perf_counter()
            put_step(
                self.saver, config, task_writes, checkpoint, metadata, new_versions
            )
            if on_saved is not None:
                on_saved(time.perf_counter() - started)

        if self.background:
            self._submit(job)
        else:
            job()

    def flush(self) -> None:
        """Wait for every queued save; raise the first save error, if any."""
        with self._cond:
            while self._running or self._queue:
                self._cond.wait()
            self._raise_pending()


class AsyncPersistence:
    """Saves for an asyncio run: chained tasks on the event loop, in order."""

    __slots__ = ("_error", "_pending", "_tail", "background", "saver")

    def __init__(self, saver: BaseCheckpointSaver, background: bool) -> None:
        self.saver = saver
        self.background = background
        self._tail: asyncio.Future[Any] | None = None
        self._pending: int = 0
        self._error: BaseException | None = None

    def _chain(self, make: Callable[[], Any]) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        previous = self._tail

        async def job() -> None:
            if previous is not None:
                try:
                    await previous
                except BaseException:
                    return
            try:
                await make()
            except BaseException as exc:
                self._error = exc
                raise
            finally:
                self._pending -= 1

        self._pending += 1
        task = asyncio.ensure_future(job())
        task.add_done_callback(_silence)
        self._tail = task

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        path: str,
    ) -> None:
        self._chain(lambda: self.saver.aput_writes(config, writes, task_id, path))

    def put_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[TaskWrites],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        on_saved: Callable[[float], None] | None = None,
    ) -> None:
        async def job() -> None:
            started = time.perf_counter()
            await aput_step(
                self.saver, config, task_writes, checkpoint, metadata, new_versions
            )
            if on_saved is not None:
                on_saved(time.perf_counter() - started)

        self._chain(job)

    def flush(self) -> None:
        """Nothing to do synchronously; the driver awaits :meth:`aflush`."""

    @property
    def needs_backpressure(self) -> bool:
        return self._pending >= MAX_QUEUED_SAVES

    async def aflush(self) -> None:
        tail = self._tail
        if tail is not None:
            with contextlib.suppress(BaseException):
                await tail
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def _silence(future: Future[Any] | asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()

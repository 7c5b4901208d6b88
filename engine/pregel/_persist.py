"""How the loop's checkpoint saves reach the saver: inline, in order in the background, or not at all.

``durability="sync"`` saves inline (the loop waits), ``"async"`` queues saves on a
serial background lane (one per run, in order, with back-pressure), ``"exit"``
saves only what the loop hands over when the run returns.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from engine._internal._constants import CONF
from engine._internal._typing import RunnableConfig
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    StepSave,
)

if TYPE_CHECKING:
    from engine.pregel._algo import PregelExecutableTask

__all__ = ("AsyncPersistence", "SyncPersistence", "TaskWrites")

TaskWrites = tuple[str, str, Sequence[tuple[str, Any]]]
"""(task_id, task_path, writes) saved against one checkpoint."""

MAX_QUEUED_SAVES = 64
"""Back-pressure: a run never has more saves than this waiting in the background.

A queued save holds references to the step's values, not copies, so the bound
is on lag more than memory; the lane saves all that waits in one transaction,
so a deeper queue means fewer, larger commits when steps outpace the database
(a 200-step loop on Postgres: 8 -> 64 took it from 61 to 38 ms). LangGraph's
``async`` durability sets no bound at all."""

SAVES_KEPT_FOR_THE_END = 8
"""At most this many saves wait for a run's end (see ``SyncPersistence.lane_delay``):
a resume that pauses again has three; a queued save holds ~3.4 KiB of dicts."""

LANE_DELAY = 0.002
"""``SyncPersistence.lane_delay`` of an ``invoke`` run: longer than a run of a
few quick steps (a resume that pauses again: ~1 ms on SQLite), short against
any step worth overlapping saves with."""

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


Saved = tuple[StepSave, "Callable[[float], None] | None"]


def delay_quick_saves(persistence: object) -> None:
    """Let a run's saves wait for quick steps (:attr:`SyncPersistence.lane_delay`),
    when it has a background lane: for a run no other code reads the thread of
    between its steps (``invoke``), or whose readers are told of each save
    (``stream_events``: its ``CheckpointSaved`` events)."""
    if isinstance(persistence, (SyncPersistence, AsyncPersistence)):
        persistence.lane_delay = LANE_DELAY


def saves_inline(saver: BaseCheckpointSaver) -> bool:
    """Whether the saver's class says a save is quick and does no I/O (the in-memory
    saver): then the loop saves inline, as ``sync`` durability does, because a
    background lane would only add thread hand-offs. Read from the class, so a
    wrapper that forwards attributes to such a saver still gets a lane."""
    return getattr(type(saver), "saves_inline", False) is True


def loop_step_of(saver: BaseCheckpointSaver) -> Callable[..., None] | None:
    """The saver's ``put_loop_step``: its ``put_step`` for a caller that keeps
    the loop's promises (see ``InMemorySaver.put_loop_step``); None when it has
    none, or when its class or the saver itself overrides ``put_step`` (the
    override is what runs)."""
    method = getattr(saver, "put_loop_step", None)
    if method is None or "put_step" in getattr(saver, "__dict__", ()):
        return None
    owner = next((k for k in type(saver).__mro__ if "put_loop_step" in vars(k)), None)
    if owner is None or getattr(type(saver), "put_step", None) is not getattr(
        owner, "put_step", None
    ):
        return None
    return method  # type: ignore[no-any-return]


LeaseKey = tuple[str, str, str]
"""(thread_id, checkpoint_ns, holder) of a lease to give back."""


def _quick(
    tasks: Iterable[PregelExecutableTask], resuming: bool, delay: float, since: float
) -> bool:
    """Whether saves waiting since ``since`` may wait on through a step of
    ``tasks``: each of their nodes took less than ``delay`` the last time it ran
    (resumed, for ``resuming``), and they have not waited ``delay`` yet."""
    return time.monotonic() - since < delay and all(
        (took := task.node.last_resumed_seconds if resuming else task.node.last_seconds)
        is not None
        and took < delay
        for task in tasks
    )


def _queue_may_wait(
    persistence: SyncPersistence | AsyncPersistence, item: Saved
) -> bool:
    """Queue ``item`` on a lane that is not running; whether the saves queued
    may wait on for it (``lane_delay``): not once the oldest has waited that
    long, nor once :data:`SAVES_KEPT_FOR_THE_END` wait."""
    now = time.monotonic() if persistence.lane_delay else 0.0
    if not persistence._queue:
        persistence._since = now
    persistence._queue.append(item)
    return (
        now - persistence._since < persistence.lane_delay
        and len(persistence._queue) < SAVES_KEPT_FOR_THE_END
    )


def releases_with_saves(saver: BaseCheckpointSaver) -> bool:
    """Whether ``saver.put_steps`` takes ``release=``: a lease given back in the
    batch's transaction (the SQL savers). Read from the class, as above."""
    return getattr(type(saver), "releases_with_saves", False) is True


def _steps_of(saver: BaseCheckpointSaver) -> Callable[[Sequence[StepSave]], Any]:
    put_steps = getattr(saver, "put_steps", None)
    if put_steps is not None:
        return put_steps  # type: ignore[no-any-return]

    def one_by_one(steps: Sequence[StepSave]) -> None:
        for config, task_writes, checkpoint, metadata, new_versions in steps:
            if checkpoint is None:
                for task_id, path, writes in task_writes:
                    saver.put_writes(config, writes, task_id, path)
            else:
                put_step(
                    saver, config, task_writes, checkpoint, metadata or {}, new_versions
                )

    return one_by_one


class SyncPersistence:
    """Saves for a synchronous run.

    Inline (``sync`` durability) or on a background lane (``async``): the lane
    takes every save waiting in the queue and hands them to the saver as one
    ``put_steps`` batch, so a run whose steps outpace the database commits once
    per batch instead of once per step (group commit), in order.

    The lane starts at the first queued save, or, with :attr:`lane_delay`, once
    saves have waited that long, 8 wait, or a step begins that is not known to be
    quick. Saves the lane has not
    taken when the run waits for them (:meth:`flush`, :meth:`release_with_saves`:
    the run's end) are made by the waiting thread itself: nothing is left to
    overlap them with, and a hand-off to another thread would only add latency
    (waking the lane costs a short run a fifth of its time on SQLite).
    """

    __slots__ = (
        "_cond",
        "_error",
        "_queue",
        "_release",
        "_running",
        "_since",
        "_taken",
        "background",
        "fence",
        "kept_by_copy",
        "lease_released",
        "lane_delay",
        "loop_step",
        "saver",
    )

    def __init__(self, saver: BaseCheckpointSaver, background: bool) -> None:
        self.saver = saver
        self.lane_delay = 0.0
        """Seconds saves may wait for the lane (0: none). For a run no other code
        reads between steps (``invoke``, whose chunks go to no consumer), the
        lane starts when a step begins that is not known to be quick
        (:meth:`step_begins`), so the saves before it are made while it runs;
        or when a save is queued after the oldest waiting one has waited this
        long, or when :data:`SAVES_KEPT_FOR_THE_END` wait. A run of a few quick
        steps (a resume that pauses again) so makes its saves at its end, in its
        own thread and one transaction. Once the lane started, the run's saves
        go to it as they come. A task's writes saved while its siblings still
        run never wait (a crash then re-runs only the others)."""
        self._since = 0.0
        """When the oldest waiting save was queued (``time.monotonic``)."""
        self.background = background and not saves_inline(saver)
        self.kept_by_copy = not self.background and saves_inline(saver)
        """The saver has copied (encoded) all it keeps of a save when ``put_step``
        returns, so the loop may hand it dicts it goes on changing."""
        self.loop_step = loop_step_of(saver) if self.kept_by_copy else None
        """The saver's ``put_loop_step`` (see ``InMemorySaver``), for the loop's
        saves, when it has one its ``put_step`` does not override."""
        self.fence: dict[str, Any] | None = None
        """Config keys every save carries: the run's thread lease (``_lease``)."""
        self._queue: deque[Saved] = deque()
        self._running = False
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._taken = 0
        """Queued saves the lane already took into the batch it is saving."""
        self._release: LeaseKey | None = None
        self.lease_released = False
        """The run's lease went back in the transaction of its last saves
        (:meth:`release_with_saves`)."""

    def _submit(self, item: Saved, eager: bool = False) -> None:
        with self._cond:
            self._raise_pending()
            while len(self._queue) >= MAX_QUEUED_SAVES:
                self._start_lane()
                self._cond.wait()
                self._raise_pending()
            if self._running:
                self._queue.append(item)
                return
            if not _queue_may_wait(self, item) or eager:
                self._start_lane()

    def step_begins(
        self, tasks: Iterable[PregelExecutableTask], resuming: bool = False
    ) -> None:
        """A step's ``tasks`` are about to run (``resuming``: the first step of a
        resumed run): unless each of their nodes took less than
        :attr:`lane_delay` the last time it ran in this process (in such a step,
        for a resuming one: a node that pauses at once may work slowly once
        answered), the lane starts for the saves waiting, so they are made
        while the step runs. A node that never ran is not known to be quick."""
        if not self._queue or self._running or not self.lane_delay:
            return
        if not _quick(tasks, resuming, self.lane_delay, self._since):
            with self._cond:
                self._start_lane()

    def _start_lane(self) -> None:
        """The lane, for the saves waiting, unless it runs already (lock held).
        A run whose saves went to the lane once is not a short one: its later
        saves go at once, as they come (no :attr:`lane_delay` any more)."""
        if not self._running and self._queue:
            self._running = True
            self.lane_delay = 0.0
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
                batch = list(self._queue)
                self._taken = len(batch)
                release, self._release = self._release, None
            try:
                seconds = self._save(batch, release)
            except BaseException as exc:
                with self._cond:
                    self._error = exc
            else:
                _report(batch, seconds)
            with self._cond:
                for _ in batch:
                    if self._queue:
                        self._queue.popleft()
                self._taken = 0
                self._cond.notify_all()

    def release_with_saves(self, lease: LeaseKey) -> None:
        """Give the run's lease back in the transaction of the saves still
        waiting for the lane, when there are some and the saver can: a run's end
        then costs no transaction of its own. When the lane has not started on
        them, this thread saves them at once (a run's last step then waits for no
        thread hand-off); else they go after the batch in flight. Called once the
        run saves nothing more; :attr:`lease_released` says (after :meth:`flush`)
        whether it happened. When it did not, the caller releases the lease."""
        if not releases_with_saves(self.saver):
            return
        with self._cond:
            if len(self._queue) <= self._taken:
                return
            if self._taken or self._error is not None:
                self._release = lease  # after the batch in flight, on the lane
                return
            # Nothing in flight: the lane has not started on these yet, so this
            # thread saves them itself (no hand-off to wait for), lease included.
            batch = self._steal()
        _report(batch, self._save(batch, lease))

    def _save(self, batch: Sequence[Saved], release: LeaseKey | None) -> float:
        """One batch in one ``put_steps`` call (with the lease's release, when
        given); the seconds it took."""
        started = time.perf_counter()
        steps = [step for step, _ in batch]
        if release is None:
            _steps_of(self.saver)(steps)
        else:
            self.saver.put_steps(steps, release=release)  # type: ignore[call-arg]
            self.lease_released = True
        return time.perf_counter() - started

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
        *,
        siblings_running: bool = False,
    ) -> None:
        """Save a task's writes. ``siblings_running``: other tasks of the step
        still run; the lane then takes the writes at once, whatever
        :attr:`lane_delay` says, so they are kept while the others run (a crash
        then re-runs only those)."""
        if self.fence is not None:
            config = _fenced(config, self.fence)
        if self.background:
            self._submit(
                ((config, [(task_id, path, writes)], None, None, {}), None),
                eager=siblings_running,
            )
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
        loop_step = self.loop_step
        if loop_step is not None and on_saved is None:
            # the loop's save, whose config carries the fence already
            loop_step(config, task_writes, checkpoint, metadata, new_versions)
            return
        if self.fence is not None:
            config = _fenced(config, self.fence)
        if self.background:
            self._submit(
                ((config, task_writes, checkpoint, metadata, new_versions), on_saved)
            )
            return
        started = time.perf_counter()
        if loop_step is not None:
            loop_step(config, task_writes, checkpoint, metadata, new_versions)
        else:
            put_step(
                self.saver, config, task_writes, checkpoint, metadata, new_versions
            )
        if on_saved is not None:
            on_saved(time.perf_counter() - started)

    def _save_here(self, batch: list[Saved]) -> None:
        """Make ``batch`` (saves taken off the queue) in this thread."""
        if batch:
            _report(batch, self._save(batch, None))

    def flush(self) -> None:
        """Wait for every queued save; raise the first save error, if any. Saves
        no lane has taken are made in this thread (see the class docstring)."""
        with self._cond:
            batch = self._steal()
        self._save_here(batch)
        with self._cond:
            while self._taken or self._queue:
                self._cond.wait()
            self._raise_pending()

    def _steal(self) -> list[Saved]:
        """The queued saves, taken from the lane when it has none in flight and
        no error: the calling thread saves them (lock held)."""
        if self._taken or self._error is not None or not self._queue:
            return []
        batch = list(self._queue)
        self._queue.clear()
        self._cond.notify_all()
        return batch


class AsyncPersistence:
    """Saves for an asyncio run: one lane task on the event loop, in order, batched
    like :class:`SyncPersistence`'s background lane, and started as late as it
    is (:attr:`lane_delay`): a run of a few quick steps makes its saves at its
    end, in one transaction with its lease's release."""

    __slots__ = (
        "_error",
        "_idle",
        "_lane",
        "_queue",
        "_release",
        "_since",
        "_taken",
        "background",
        "fence",
        "kept_by_copy",
        "lane_delay",
        "lease_released",
        "saver",
    )

    def __init__(self, saver: BaseCheckpointSaver, background: bool) -> None:
        self.saver = saver
        self.lane_delay = 0.0
        """As :attr:`SyncPersistence.lane_delay`."""
        self._since = 0.0
        self.background = background
        self.kept_by_copy = False  # saves run later, on the lane
        self.fence: dict[str, Any] | None = None
        """Config keys every save carries: the run's thread lease (``_lease``)."""
        self._queue: deque[Saved] = deque()
        self._lane: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._idle: asyncio.Event | None = None
        self._taken = 0
        self._release: LeaseKey | None = None
        self.lease_released = False
        """As :attr:`SyncPersistence.lease_released`."""

    def _submit(self, item: Saved, eager: bool = False) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._lane_running():
            self._queue.append(item)  # the lane takes it after its batch
            return
        if not _queue_may_wait(self, item) or eager:
            self._start_lane()

    def _lane_running(self) -> bool:
        return self._lane is not None and not self._lane.done()

    def _start_lane(self) -> None:
        """The lane task for the saves waiting, unless it runs already; as in
        :meth:`SyncPersistence._start_lane`, the run's later saves go at once,
        but for an in-memory saver (``saves_inline``): it does no I/O, so its
        saves keep waiting for quick steps, a task per batch instead of per save."""
        if self._lane_running() or not self._queue:
            return
        if not saves_inline(self.saver):
            self.lane_delay = 0.0
        if self._idle is None:
            self._idle = asyncio.Event()
        self._idle.clear()
        self._lane = asyncio.ensure_future(self._drain())
        self._lane.add_done_callback(_silence)

    async def _drain(self) -> None:
        try:
            while self._queue and self._error is None:
                batch = list(self._queue)
                self._taken = len(batch)
                release, self._release = self._release, None
                started = time.perf_counter()
                try:
                    await self._put_steps([step for step, _ in batch], release)
                except BaseException as exc:
                    self._error = exc
                    self._queue.clear()
                    return
                finally:
                    self._taken = 0
                seconds = time.perf_counter() - started
                for _ in batch:
                    self._queue.popleft()
                _report(batch, seconds)
        finally:
            if self._idle is not None:
                self._idle.set()

    def release_with_saves(self, lease: LeaseKey) -> None:
        """As :meth:`SyncPersistence.release_with_saves`."""
        if releases_with_saves(self.saver) and len(self._queue) > self._taken:
            self._release = lease

    async def _put_steps(
        self, steps: Sequence[StepSave], release: LeaseKey | None = None
    ) -> None:
        if release is not None:  # only for savers that take it (release_with_saves)
            await self.saver.aput_steps(steps, release=release)  # type: ignore[call-arg]
            self.lease_released = True
            return
        aput_steps = getattr(self.saver, "aput_steps", None)
        if aput_steps is not None:
            await aput_steps(steps)
            return
        for config, task_writes, checkpoint, metadata, new_versions in steps:
            if checkpoint is None:
                for task_id, path, writes in task_writes:
                    await self.saver.aput_writes(config, writes, task_id, path)
            else:
                await aput_step(
                    self.saver,
                    config,
                    task_writes,
                    checkpoint,
                    metadata or {},
                    new_versions,
                )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        path: str,
        *,
        siblings_running: bool = False,
    ) -> None:
        if self.fence is not None:
            config = _fenced(config, self.fence)
        self._submit(
            ((config, [(task_id, path, writes)], None, None, {}), None),
            eager=siblings_running,
        )

    def put_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[TaskWrites],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        on_saved: Callable[[float], None] | None = None,
    ) -> None:
        if self.fence is not None:
            config = _fenced(config, self.fence)
        self._submit(
            ((config, task_writes, checkpoint, metadata, new_versions), on_saved)
        )

    def step_begins(
        self, tasks: Iterable[PregelExecutableTask], resuming: bool = False
    ) -> None:
        """As :meth:`SyncPersistence.step_begins`: the lane starts for the saves
        waiting unless the step's nodes are known to be quick."""
        if not self._queue or self._lane_running() or not self.lane_delay:
            return
        if not _quick(tasks, resuming, self.lane_delay, self._since):
            self._start_lane()

    def flush(self) -> None:
        """Nothing to do synchronously; the driver awaits :meth:`aflush`."""

    @property
    def needs_backpressure(self) -> bool:
        return len(self._queue) >= MAX_QUEUED_SAVES

    async def aflush(self) -> None:
        """Wait for every queued save (those kept for the run's end go now, in
        one batch); raise the first save error, if any."""
        self._start_lane()
        lane = self._lane
        if lane is not None and not lane.done():
            await asyncio.wait({lane})
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def _report(batch: Sequence[Saved], seconds: float) -> None:
    """Tell each save of a stored batch how long the batch took."""
    for _, on_saved in batch:
        if on_saved is not None:
            on_saved(seconds)


def _fenced(config: RunnableConfig, fence: dict[str, Any]) -> RunnableConfig:
    """``config`` whose ``configurable`` also carries ``fence`` (a lease's key):
    itself when it already does (the loop builds each save's config with it, so a
    queued save holds one config, not two)."""
    conf = config.get(CONF, {})
    for key, value in fence.items():
        if conf.get(key) != value:
            return {**config, CONF: {**conf, **fence}}
    return config


def _silence(future: Future[Any] | asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()

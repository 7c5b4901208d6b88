"""``ainvoke`` on one worker thread, for a run whose code is all synchronous.

Under ``ainvoke`` each sync node runs on a worker thread, so a step of a sync
graph costs two thread hand-offs (~90 µs on a 2-core VM, most of a loop step).
When nothing in the run needs the event loop, the whole run is the sync
``invoke`` on one worker thread instead: two hand-offs a run. A run qualifies
(:func:`runs_on_one_thread`) when

- every node, route and error handler is a plain function (or a runnable with
  no ``ainvoke``), and no node is a graph;
- the graph has no store, no cache, no step timeout, and no saver or exactly
  :class:`~engine.checkpoint.memory.InMemorySaver` or
  :class:`~engine.checkpoint.sqlite.aio.AsyncSqliteSaver` (whose sync methods
  work from any thread: the run uses them, as ``invoke`` with a ``SqliteSaver``
  would, its saves all made in its thread: :class:`GuardedPersistence`);
- its config carries no callbacks, tracer or engine-private keys, and the run
  is not inside another run's task;
- fewer than :data:`RUN_SLOTS` such runs are on their threads (each holds one
  for its whole run, from threads of their own: :class:`_RunThreads`; more go
  step by step). The tasks of a parallel step run on the shared pool
  (:func:`~engine.pregel._persist.background_pool`), as in any sync run.

What the caller sees does not change. The thread runs in a copy of the caller's
context, as each sync node did. A node's (or a ``Send``'s) timeout is kept as
in an async run: the thread waits for the node on an event loop of its own and
stops waiting at the deadline. Cancelling ``ainvoke`` raises ``CancelledError``
at once, as before: :class:`CancelFlag` gives the run's thread lease back from
the cancelling side (after a save under way: :class:`GuardedPersistence`), and
the thread starts no further step, task or attempt and saves nothing more (a
node's writes are dropped when it returns); every step finished before the
cancel is saved. The node running when the run was cancelled runs to its end on
its thread, as a sync node under ``ainvoke`` always did.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from engine._internal._in_thread import in_thread
from engine._internal._scope import current_scope
from engine.checkpoint.base import BaseCheckpointSaver
from engine.pregel._persist import (
    LeaseKey,
    SyncPersistence,
    saves_inline,
)

if TYPE_CHECKING:
    from engine.pregel._lease import ThreadHold
    from engine.pregel._loop import PregelLoop
    from engine.pregel._read import PregelNode
    from engine.pregel.main import Pregel

__all__ = (
    "RUN_SLOTS",
    "CancelFlag",
    "GuardedPersistence",
    "ainvoke_on_one_thread",
    "on_one_thread",
    "runs_on_one_thread",
)

log = logging.getLogger(__name__)

RUN_SLOTS = 32
"""Runs on threads of their own at once, at most (more go step by step)."""

_SAVERS = (
    ("engine.checkpoint.memory", "InMemorySaver"),
    ("engine.checkpoint.sqlite.aio", "AsyncSqliteSaver"),
)
"""The saver classes (exactly: a subclass may do other I/O) a run may have, by
module and name: looked up among the modules already imported (a saver's
class is), so that importing the engine does not import them (SQLite's,
aiosqlite)."""

_PLAIN_CONFIG_KEYS = frozenset(
    {
        "configurable",
        "max_concurrency",
        "metadata",
        "recursion_limit",
        "run_id",
        "run_name",
        "tags",
    }
)
"""Config keys the sync and async runs treat alike (callbacks and tracers do not)."""

_running = 0
"""Runs on their threads now (read without the lock: a soft limit)."""
_running_lock = threading.Lock()


def _allowed_saver(cls: type[Any]) -> bool:
    for module, name in _SAVERS:
        found = sys.modules.get(module)
        if found is not None and getattr(found, name, None) is cls:
            return True
    return False


class CancelFlag:
    """Set when the caller of an ``ainvoke`` on one thread cancelled it; the
    run's loop checks it before each step, task and attempt, and after each
    node call (``loop.cancel_flag``)."""

    __slots__ = ("_hold", "cancelled", "lock", "persistence")

    def __init__(self) -> None:
        self.cancelled = False
        self._hold: ThreadHold | None = None
        self.persistence: GuardedPersistence | None = None
        """The run's saves, once it has a saver (:func:`on_one_thread`)."""
        self.lock = threading.Lock()
        """Held by the run around each save (:class:`GuardedPersistence`) and
        by the cancel: a save is made whole before a cancel or not at all."""

    def check(self) -> None:
        """Raise ``CancelledError`` once the run was cancelled."""
        if self.cancelled:
            raise asyncio.CancelledError("ainvoke was cancelled")

    def held(self, hold: ThreadHold) -> None:
        """The run took its thread lease (``_lease``): a cancel gives it back;
        after one (the run waited for the thread), it goes back at once."""
        with self.lock:
            if not self.cancelled:
                self._hold = hold
                return
        hold.give_back()
        self.check()

    def cancel(self) -> ThreadHold | None:
        """From the cancelled caller: stop the run, once a save under way is
        made and the saves still waiting are (``GuardedPersistence``); the lease
        it holds, which the caller gives back (``ThreadHold.give_back``)."""
        with self.lock:
            self.cancelled = True
            hold, self._hold = self._hold, None
            if self.persistence is not None:
                self.persistence.save_before_cancel(hold)
        return hold


def runs_on_one_thread(graph: Pregel, config: Mapping[str, Any] | None) -> bool:
    """Whether ``graph.ainvoke(..., config)`` may run on one worker thread (see
    the module); a few attribute reads, the nodes' part kept on the graph."""
    if _running >= RUN_SLOTS or current_scope() is not None:
        return False
    if (
        graph.store is not None
        or graph.cache is not None
        or graph.step_timeout is not None
    ):
        return False
    saver = graph.checkpointer
    if saver is not None and saver is not False and not _allowed_saver(type(saver)):
        return False
    if not (_plain_config(config) and _plain_config(graph.config)):
        return False
    known = graph.__dict__.get("_sync_code_only")
    nodes = graph.nodes
    if known is None or known[0] is not nodes or known[1] != len(nodes):
        known = (nodes, len(nodes), all(map(_sync_code_only, nodes.values())))
        graph.__dict__["_sync_code_only"] = known
    return known[2]


def _plain_config(config: Mapping[str, Any] | None) -> bool:
    if not config:
        return True
    if not _PLAIN_CONFIG_KEYS.issuperset(config):
        return False
    configurable = config.get("configurable")
    return not configurable or not any(
        type(key) is not str or key.startswith("__") for key in configurable
    )


def _sync_code_only(node: PregelNode) -> bool:
    """Whether the node's code (function, routes, error handler) is all sync."""
    bound = node.bound
    if not bound.runs_in_thread or bound.is_graph or node.subgraphs:
        return False
    handler = node.error_handler
    if handler is not None and not handler.runs_in_thread:
        return False
    for writer in node.writers:
        if getattr(writer, "awrite", None) is None:
            continue
        branches = getattr(writer, "branches", None)
        if branches is None or not all(b.path.runs_in_thread for b in branches):
            return False
    return True


class GuardedPersistence(SyncPersistence):
    """The saves of an ``ainvoke`` on one thread, under its cancel flag's lock.

    As ``invoke``'s, the saves of quick steps wait (``lane_delay``) and go in one
    batch, with the lease's release at the run's end; but they are made in the
    run's thread, never on a lane of their own: whatever makes or queues a save
    holds the flag's lock and first checks the flag. A cancel, under the same
    lock, marks the run cancelled and makes the saves still waiting, with the
    lease's release: a save is made whole before a cancel or not at all (never
    refused halfway by the lease's fence), and every step finished before the
    cancel is kept.
    """

    __slots__ = ("flag",)

    def __init__(self, saver: BaseCheckpointSaver, flag: CancelFlag) -> None:
        super().__init__(saver, background=True)
        self.flag = flag

    def _start_lane(self) -> None:
        """The waiting saves, made now in this thread (the lock is held)."""
        self._save_here(self._steal())

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        with self.flag.lock:
            self.flag.check()
            super().put_writes(*args, **kwargs)

    def put_step(self, *args: Any, **kwargs: Any) -> None:
        with self.flag.lock:
            self.flag.check()
            super().put_step(*args, **kwargs)

    def step_begins(self, *args: Any, **kwargs: Any) -> None:
        with self.flag.lock:
            self.flag.check()
            super().step_begins(*args, **kwargs)

    def flush(self) -> None:
        with self.flag.lock:
            self.flag.check()
            super().flush()

    def release_with_saves(self, lease: LeaseKey) -> None:
        with self.flag.lock:
            self.flag.check()
            super().release_with_saves(lease)

    def save_before_cancel(self, hold: ThreadHold | None) -> None:
        """The saves still waiting, with ``hold``'s release when the saver can
        (the flag's lock is held by the cancel: the unguarded methods); a
        failure is logged, the lease then goes back on its own
        (``ThreadHold.give_back``)."""
        try:
            if hold is not None:
                super().release_with_saves(
                    (hold.thread_id, hold.checkpoint_ns, hold.holder)
                )
            super().flush()
        except Exception:
            log.exception("a cancelled run's last saves failed")


def on_one_thread(loop: PregelLoop, flag: CancelFlag) -> None:
    """Make ``loop`` (a sync run's, on the worker thread, before it starts) the
    run of ``flag``: it stops when the flag says, its saves guarded by it."""
    loop.cancel_flag = flag
    made = loop.persistence
    if isinstance(made, SyncPersistence):
        guarded = GuardedPersistence(made.saver, flag)
        guarded.lane_delay = made.lane_delay
        loop.persistence = flag.persistence = guarded


async def ainvoke_on_one_thread(invoke: Callable[[CancelFlag], Any], saver: Any) -> Any:
    """``invoke(flag)`` (a sync run of a graph whose checkpointer is ``saver``)
    on a worker thread, in a copy of this context; cancelling the awaiting task
    cancels the run through the flag."""
    flag = CancelFlag()

    def run() -> Any:
        global _running
        with _running_lock:
            _running += 1
        try:
            return invoke(flag)
        finally:
            flag.persistence = None  # (which refers to the flag: no cycle left)
            with _running_lock:
                _running -= 1

    threads = _THREADS
    done = in_thread(
        threads, contextvars.copy_context().run, run, finished=threads.finished
    )
    try:
        return await done
    except asyncio.CancelledError:
        if not saver or saves_inline(saver):  # no I/O: at once
            _give_back(flag)
        else:  # not on the event loop: a save under way may take a while
            await asyncio.shield(asyncio.to_thread(_give_back, flag))
        raise


class _RunThreads:
    """The threads runs on one thread run on: as many as ran at once, kept.

    The shared pool would do, but for one thing: its worker hands a run's
    result over before it is idle again, so the caller's next run, started at
    once, finds no idle worker and the pool starts another thread (back-to-back
    runs grew it by ~30 threads in 200). Here a run's thread counts itself idle
    before it hands the result over, and the next run waits for it instead."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, job: Callable[[], None], /) -> None:
        self._jobs.put(job)
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
        threading.Thread(target=self._serve, name="engine-run", daemon=True).start()

    def finished(self) -> None:
        """A run's thread is done with its run (it takes the next job now)."""
        with self._lock:
            self._idle += 1

    def _serve(self) -> None:
        while True:
            self._jobs.get()()


_THREADS = _RunThreads()


def _new_threads() -> None:
    global _THREADS
    _THREADS = _RunThreads()


os.register_at_fork(after_in_child=_new_threads)


def _give_back(flag: CancelFlag) -> None:
    hold = flag.cancel()
    if hold is not None:
        hold.give_back()

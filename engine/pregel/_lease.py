"""A run holds its thread: the lease taken before any task runs, renewed, given back.

A root run on a saver that keeps leases (``supports_leases``) with a
``thread_id`` takes the lease on ``(thread_id, checkpoint_ns)`` before it reads
the thread, so two processes resuming one interrupted thread at once never
both run the node after the interrupt: the second is refused with
:class:`~engine.errors.ThreadBusyError` before it executes anything, or, with
``on_busy="wait"``, waits for the first to finish and then runs on the head
the first left. Subgraphs run under their root run's lease (same saver: their
saves carry it too; no second lease, so no self-deadlock). Without a saver,
without leases or without a thread id there is no lease (nothing to protect).

Cost: none of its own on the SQL savers, usually. The take goes with the read of
the thread's head (``acquire_lease_and_get_tuple``: one transaction, the take in
the head read's round trip), and the release with the run's last saves when the
background lane still holds some at the run's end (``release_with_saves``);
otherwise it is a transaction of its own. Renewal is off the step path: one
daemon thread per process wakes when a held lease is a third of the way to its
end and renews it from the shared pool; the step path only compares the clock
with the last renewal (:meth:`ThreadHold.check`). Every save of the run carries
the lease (``HELD_LEASE``), so a paused or stalled process that lost it writes
nothing: the saver refuses in the save's own transaction, and the run stops
before starting another step.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from engine._internal._constants import CONF
from engine._internal._typing import RunnableConfig
from engine.checkpoint._lease import HELD_LEASE, ThreadLease, lease_lost
from engine.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from engine.errors import ErrorCode, ThreadBusyError, error_message
from engine.pregel._persist import AsyncPersistence, SyncPersistence, background_pool

if TYPE_CHECKING:
    from engine.pregel._loop import PregelLoop

__all__ = (
    "CONFIG_KEY_LEASE",
    "CONFIG_KEY_ON_BUSY",
    "OnBusy",
    "ThreadHold",
    "aheld_steps",
    "ahold_for_update",
    "ahold_thread",
    "held_steps",
    "hold_for_update",
    "hold_thread",
    "with_on_busy",
)

log = logging.getLogger(__name__)

T = TypeVar("T")

OnBusy = Literal["raise", "wait"]
"""What a run does when another run holds its thread: raise ``ThreadBusyError``
(the default) or wait until the thread is free (released, or its lease expired
because its process died)."""

CONFIG_KEY_ON_BUSY = "on_busy"
"""``config["configurable"]["on_busy"]``: the ``on_busy`` of runs given that
config (the ``on_busy=`` argument of invoke/stream wins)."""

CONFIG_KEY_LEASE = "__engine_lease"
"""Configurable key carrying the root run's :class:`ThreadHold` to its subgraphs."""

_NOTHING_DONE = {
    "run": "Nothing of this run was executed.",
    "update": "Nothing of this update was written.",
}

_FIRST_POLL = 0.05
_LONGEST_POLL = 1.0


def with_on_busy(config: RunnableConfig | None, on_busy: OnBusy | None) -> Any:
    """``config`` with ``on_busy`` set (unchanged when ``on_busy`` is None)."""
    if on_busy is None:
        return config
    config = dict(config or {})
    config[CONF] = {**config.get(CONF, {}), CONFIG_KEY_ON_BUSY: on_busy}
    return config


_holders: tuple[str, Iterator[int]] | None = None
"""This process's holder prefix (host, pid and 48 random bits) and its counter;
made on first use and again in a forked child."""


def _new_holder() -> str:
    """A lease holder no other hold has: ``host:pid:`` twelve random hex digits
    drawn once a process, then this hold's number in it (hex). A uuid each hold
    cost a system call for the host name and one for the randomness every run;
    the random part still tells this process from an earlier one that had its
    pid on this host."""
    global _holders
    if _holders is None:
        prefix = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(6).hex()}"
        _holders = (prefix, itertools.count())
    prefix, numbers = _holders
    return f"{prefix}{next(numbers):x}"


def _forget_holders() -> None:
    global _holders
    _holders = None


os.register_at_fork(after_in_child=_forget_holders)


class ThreadHold:
    """One run's lease on one thread and namespace, while it is held."""

    __slots__ = (
        "checkpoint_ns",
        "fence",
        "holder",
        "is_async",
        "lost",
        "renew_at",
        "saver",
        "seconds",
        "thread_id",
        "valid_until",
    )

    def __init__(
        self,
        saver: BaseCheckpointSaver,
        thread_id: str,
        checkpoint_ns: str,
        seconds: float,
        *,
        is_async: bool,
    ) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.seconds = seconds
        self.is_async = is_async
        self.holder = _new_holder()
        self.fence = (checkpoint_ns, self.holder)
        """What the run's saves carry under ``HELD_LEASE``."""
        self.lost = False
        self.valid_until = 0.0
        """``time.monotonic()`` before which the lease surely still runs (the
        last successful take or renewal was sent at least ``seconds`` earlier)."""
        self.renew_at = 0.0

    def _held(self, sent: float) -> None:
        self.valid_until = sent + self.seconds
        self.renew_at = sent + self.seconds / 3

    def check(self) -> None:
        """Before a step: raise ``ThreadLeaseLostError`` if the lease was lost.

        Costs a clock read while renewals keep up. When they did not (the
        process was paused or starved for two thirds of the lease), a sync run
        renews at once and goes on if nobody took the thread meanwhile; an async
        run stops (its saver's sync calls may need the event loop it runs on).
        """
        if not self.lost and time.monotonic() < self.valid_until:
            return
        if not self.lost and not self.is_async:
            self.renew()
        if self.lost or time.monotonic() >= self.valid_until:
            self.lost = True
            raise lease_lost(self.thread_id, self.checkpoint_ns, self.holder)

    def renew(self) -> None:
        """Extend the lease (the renewer calls this from the shared pool)."""
        if self.lost:
            return
        sent = time.monotonic()
        try:
            held = self.saver.renew_lease(
                self.thread_id, self.checkpoint_ns, self.holder, self.seconds
            )
        except Exception:  # the database may be back before the lease ends
            log.warning("could not renew the lease on thread %r", self.thread_id)
            self.renew_at = time.monotonic() + min(1.0, self.seconds / 10)
            _RENEWER.wake()
            return
        if held:
            self._held(sent)
            _RENEWER.wake()  # it sleeps until the next renewal it knows of
        else:
            self.lost = True

    def give_back(self) -> None:
        """Release the lease now, from another thread than the run's (a cancelled
        ``ainvoke`` on one thread, ``_one_thread``): the run's saves from here on
        are refused, and its own release at its end finds nothing to do."""
        self.lost = True
        _RENEWER.remove(self)
        self.release()

    def release(self) -> None:
        """Give the lease back (a failure is logged: the lease expires on its own)."""
        try:
            self.saver.release_lease(self.thread_id, self.checkpoint_ns, self.holder)
        except Exception:
            log.warning("could not release the lease on thread %r", self.thread_id)

    def attach(self, loop: PregelLoop) -> None:
        """Make ``loop``'s saves carry this lease and its steps check it."""
        loop.lease = self
        persistence = loop.persistence
        if isinstance(persistence, (SyncPersistence, AsyncPersistence)):
            persistence.fence = {HELD_LEASE: self.fence}


class _Renewer:
    """The process's lease renewer: one daemon thread, started on first use."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.holds: dict[int, ThreadHold] = {}
        self.thread: threading.Thread | None = None
        self.wake_at = math.inf
        """When the thread wakes next on its own (infinity: it waits to be woken)."""

    def add(self, hold: ThreadHold) -> None:
        with self.cond:
            self.holds[id(hold)] = hold
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="engine-lease-renewer", daemon=True
                )
                self.thread.start()
            # Woken only when this lease is due before its next wake: back-to-back
            # short runs then cost the thread nothing (it wakes when the oldest
            # lease was due, finds it gone, and sleeps until the next one).
            if hold.renew_at < self.wake_at:
                self.cond.notify()

    def remove(self, hold: ThreadHold) -> None:
        with self.cond:
            self.holds.pop(id(hold), None)

    def wake(self) -> None:
        with self.cond:
            self.cond.notify()

    def _run(self) -> None:
        while True:
            with self.cond:
                now = time.monotonic()
                due = [h for h in self.holds.values() if h.renew_at <= now]
                if not due:
                    upcoming = min(
                        (h.renew_at for h in self.holds.values()), default=None
                    )
                    self.wake_at = math.inf if upcoming is None else upcoming
                    self.cond.wait(None if upcoming is None else upcoming - now)
                    self.wake_at = -math.inf  # awake: anything added is seen
                    continue
                for hold in due:  # not due again until this renewal is done
                    hold.renew_at = now + hold.seconds
            for hold in due:
                background_pool().submit(hold.renew)

    def after_fork(self) -> None:
        self.cond = threading.Condition()
        self.holds = {}
        self.thread = None
        self.wake_at = math.inf


_RENEWER = _Renewer()
os.register_at_fork(after_in_child=_RENEWER.after_fork)


def _plan(loop: PregelLoop, *, is_async: bool) -> tuple[ThreadHold | None, OnBusy]:
    """The lease ``loop`` must take (None: it takes none) and what to do when busy."""
    conf = loop.configurable
    on_busy: OnBusy = conf.get(CONFIG_KEY_ON_BUSY) or "raise"
    if on_busy not in ("raise", "wait"):
        raise ValueError(f"on_busy must be 'raise' or 'wait', got {on_busy!r}")
    saver = loop.checkpointer
    if saver is None or not getattr(saver, "supports_leases", False):
        return None, on_busy
    if loop.is_nested:  # a subgraph: under its root run's lease, if on the same saver
        parent = conf.get(CONFIG_KEY_LEASE)
        if isinstance(parent, ThreadHold) and parent.saver is saver:
            parent.attach(loop)
        return None, on_busy
    if not loop.thread_id:
        return None, on_busy
    hold = ThreadHold(
        saver,
        str(loop.thread_id),
        loop.checkpoint_ns,
        float(getattr(saver, "lease_seconds", 30.0)),
        is_async=is_async,
    )
    return hold, on_busy


def _busy(lease: ThreadLease, nothing_done: str) -> ThreadBusyError:
    return ThreadBusyError(
        error_message(
            f"Thread {lease.thread_id!r} (namespace {lease.checkpoint_ns!r}) is busy: "
            f"another run ({lease.holder}) holds it, its lease running until "
            f"{lease.expires_at.isoformat()} unless renewed. {nothing_done} "
            'Retry when that run ends, or pass on_busy="wait" to wait '
            "for it.",
            ErrorCode.THREAD_BUSY,
        ),
        thread_id=lease.thread_id,
        checkpoint_ns=lease.checkpoint_ns,
        holder=lease.holder,
        expires_at=lease.expires_at,
    )


def _acquire(hold: ThreadHold, on_busy: OnBusy, what: str = "run") -> float:
    """Take ``hold``'s lease (polling while busy, when asked to wait); when it was sent."""
    pause = _FIRST_POLL
    while True:
        sent = time.monotonic()
        lease = hold.saver.acquire_lease(
            hold.thread_id, hold.checkpoint_ns, hold.holder, hold.seconds
        )
        if lease.holder == hold.holder:
            return sent
        if on_busy == "raise":
            raise _busy(lease, _NOTHING_DONE[what])
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_POLL)


async def _aacquire(hold: ThreadHold, on_busy: OnBusy, what: str = "run") -> float:
    """Async twin of :func:`_acquire`."""
    pause = _FIRST_POLL
    while True:
        sent = time.monotonic()
        lease = await hold.saver.aacquire_lease(
            hold.thread_id, hold.checkpoint_ns, hold.holder, hold.seconds
        )
        if lease.holder == hold.holder:
            return sent
        if on_busy == "raise":
            raise _busy(lease, _NOTHING_DONE[what])
        await asyncio.sleep(pause)
        pause = min(pause * 2, _LONGEST_POLL)


def _start(hold: ThreadHold, loop: PregelLoop, sent: float) -> None:
    hold._held(sent)
    hold.attach(loop)
    loop.configurable[CONFIG_KEY_LEASE] = hold
    _RENEWER.add(hold)
    if loop.cancel_flag is not None:
        loop.cancel_flag.held(hold)


def _took(
    hold: ThreadHold,
    loop: PregelLoop,
    taken: tuple[ThreadLease, CheckpointTuple | None],
    on_busy: OnBusy,
) -> bool:
    """After a run's first take (its lease and the thread's head in one go): True
    when the lease is the run's (the head is kept for ``load``); False when the
    run waits for it (``on_busy="wait"``); ``ThreadBusyError`` otherwise."""
    lease, saved = taken
    if lease.holder == hold.holder:
        loop.preloaded = (saved,)
        return True
    if on_busy == "raise":
        raise _busy(lease, _NOTHING_DONE["run"])
    return False


@contextmanager
def hold_thread(loop: PregelLoop) -> Iterator[ThreadHold | None]:
    """Hold ``loop``'s thread for the block (a sync run); see the module."""
    hold, on_busy = _plan(loop, is_async=False)
    if hold is None:
        yield None
        return
    saver = hold.saver
    sent = time.monotonic()
    taken = saver.acquire_lease_and_get_tuple(loop.config, hold.holder, hold.seconds)
    if not _took(hold, loop, taken, on_busy):
        sent = _acquire(hold, on_busy)
    _start(hold, loop, sent)
    try:
        yield hold
    finally:
        loop.preloaded = None
        _RENEWER.remove(hold)
        if not _released_with_saves(loop):
            hold.release()


@asynccontextmanager
async def ahold_thread(loop: PregelLoop) -> AsyncIterator[ThreadHold | None]:
    """Async twin of :func:`hold_thread`."""
    hold, on_busy = _plan(loop, is_async=True)
    if hold is None:
        yield None
        return
    saver = hold.saver
    sent = time.monotonic()
    taken = await saver.aacquire_lease_and_get_tuple(
        loop.config, hold.holder, hold.seconds
    )
    if not _took(hold, loop, taken, on_busy):
        sent = await _aacquire(hold, on_busy)
    _start(hold, loop, sent)
    try:
        yield hold
    finally:
        loop.preloaded = None
        _RENEWER.remove(hold)
        try:
            if not _released_with_saves(loop):
                await saver.arelease_lease(
                    hold.thread_id, hold.checkpoint_ns, hold.holder
                )
        except Exception:  # it expires on its own
            log.warning("could not release the lease on thread %r", hold.thread_id)


def _released_with_saves(loop: PregelLoop) -> bool:
    """Whether the run's lease already went back with its last saves
    (``PregelLoop.finish``)."""
    return getattr(loop.persistence, "lease_released", False) is True


def held_steps(loop: PregelLoop, steps: Iterator[T]) -> Iterator[T]:
    """``steps`` (a run's driver, not started yet) run while holding the thread."""
    with hold_thread(loop):
        yield from steps


async def aheld_steps(loop: PregelLoop, steps: AsyncIterator[T]) -> AsyncIterator[T]:
    """Async twin of :func:`held_steps`; the driver is closed before the release."""
    async with ahold_thread(loop):
        try:
            async for item in steps:
                yield item
        finally:
            aclose = getattr(steps, "aclose", None)
            if aclose is not None:
                await aclose()


def _update_plan(
    saver: BaseCheckpointSaver, config: RunnableConfig
) -> tuple[ThreadHold | None, dict[str, Any] | None, OnBusy]:
    """The lease an ``update_state`` takes, or the fence of the run it is part of.

    An update writes a checkpoint, so it is a writer like a run: it holds the
    thread for the few statements it takes. The lease is the root namespace's
    (where runs take theirs; a subgraph namespace's update is a write to the
    same thread). Called from inside a run on the same saver (a node updating
    its own thread), it writes under that run's lease instead of taking one.
    """
    conf = config.get(CONF, {})
    on_busy: OnBusy = conf.get(CONFIG_KEY_ON_BUSY) or "raise"
    if on_busy not in ("raise", "wait"):
        raise ValueError(f"on_busy must be 'raise' or 'wait', got {on_busy!r}")
    thread_id = conf.get("thread_id")
    if not getattr(saver, "supports_leases", False) or not thread_id:
        return None, None, on_busy
    running = conf.get(CONFIG_KEY_LEASE)
    if (
        isinstance(running, ThreadHold)
        and running.saver is saver
        and running.thread_id == str(thread_id)
    ):
        return None, {HELD_LEASE: running.fence}, on_busy
    ns = str(conf.get("checkpoint_ns") or "")
    root_ns = "" if ":" in ns else ns  # "node:task_id|..." is a subgraph's
    hold = ThreadHold(
        saver,
        str(thread_id),
        root_ns,
        float(getattr(saver, "lease_seconds", 30.0)),
        is_async=False,
    )
    return hold, {HELD_LEASE: hold.fence}, on_busy


@contextmanager
def hold_for_update(
    saver: BaseCheckpointSaver, config: RunnableConfig
) -> Iterator[dict[str, Any] | None]:
    """Hold the thread while ``update_state`` writes; yields the saves' fence.

    Refused with ``ThreadBusyError`` while a run (or another update) holds the
    thread, before anything is written; ``on_busy="wait"`` in the config's
    ``configurable`` waits instead.
    """
    hold, fence, on_busy = _update_plan(saver, config)
    if hold is None:
        yield fence
        return
    _acquire(hold, on_busy, "update")
    try:
        yield fence
    finally:
        hold.release()


@asynccontextmanager
async def ahold_for_update(
    saver: BaseCheckpointSaver, config: RunnableConfig
) -> AsyncIterator[dict[str, Any] | None]:
    """Async twin of :func:`hold_for_update`."""
    hold, fence, on_busy = _update_plan(saver, config)
    if hold is None:
        yield fence
        return
    await _aacquire(hold, on_busy, "update")
    try:
        yield fence
    finally:
        try:
            await saver.arelease_lease(hold.thread_id, hold.checkpoint_ns, hold.holder)
        except Exception:  # it expires on its own
            log.warning("could not release the lease on thread %r", hold.thread_id)

"""Named fault points: places where a test can make a process die, stop or fail.

Armed only through the ``ENGINE_FAULTS`` environment variable, read once when
this module is imported; when it is unset (always, outside tests) every point
costs one attribute read: call sites are written as

    if _faults.ARMED: _faults.hit("after_task_before_writes", task.name)

Syntax: comma-separated ``point[/key]=action[:argument][@n]`` items, e.g.
``ENGINE_FAULTS="after_task_before_writes/c=kill,after_claim=pause:5@2"``.

* ``point``: one of :data:`POINTS`. ``/key`` narrows it to the calls that pass
  that key (the node name for ``after_task_before_writes``, the graph name for
  ``after_claim``); an item without a key matches every call.
* ``action``: ``kill`` (SIGKILL this process: no ``finally``, no ``atexit``),
  ``pause:S`` (SIGSTOP the whole process, every thread, lease renewals too; a
  separate ``sleep`` process sends SIGCONT after S seconds), ``sleep:S`` (only
  the calling thread sleeps S seconds), ``error`` (raise
  :class:`InjectedConnectionError`, a :class:`ConnectionError`, as a dropped
  database or network connection would).
* ``@n``: act only on the n-th matching call in this process (counted from 1);
  ``@n+``: on the n-th and every later one. Without it: on every call.

With ``ENGINE_FAULTS_LOG`` set to a file path, every action taken is first
appended to that file as ``<pid> <point> <key> <action>`` (flushed and synced),
so a test can wait until a process reached a point before it looks.

Points (see ``RELIABILITY.md``):

* ``after_task_before_writes``: a task returned; its writes are not saved yet
  (``engine.pregel._loop``).
* ``between_values_and_checkpoint``: a SQL saver's transaction has inserted the
  channel values (blobs) and pending writes, not yet the checkpoint row
  (``engine.checkpoint._sqlcore.saves``).
* ``after_claim``: a studio worker claimed a run (its lease is taken), before
  running it.
* ``after_decision_before_resume``: a reviewer's decision is recorded, the run
  that resumes the thread with it is not queued yet.
* ``after_outbox_before_end``: the purchase's outbox row is written, the run has
  not finished.

No Django, no engine import here: the studio reaches these through
``engine.testing``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

__all__ = (
    "ARMED",
    "ENV",
    "LOG_ENV",
    "POINTS",
    "FaultSpecError",
    "InjectedConnectionError",
    "arm",
    "hit",
)

ENV = "ENGINE_FAULTS"
LOG_ENV = "ENGINE_FAULTS_LOG"

POINTS = frozenset(
    {
        "after_task_before_writes",
        "between_values_and_checkpoint",
        "after_claim",
        "after_decision_before_resume",
        "after_outbox_before_end",
    }
)

_ACTIONS = frozenset({"kill", "pause", "sleep", "error"})


class FaultSpecError(ValueError):
    """``ENGINE_FAULTS`` does not parse (raised at import: a typo fails loudly)."""


class InjectedConnectionError(ConnectionError):
    """Raised by the ``error`` action: the connection went away at that point."""


@dataclass(slots=True)
class _Fault:
    action: str
    seconds: float
    nth: int
    onward: bool
    calls: int = 0

    def due(self) -> bool:
        self.calls += 1
        if self.nth == 0:
            return True
        return self.calls >= self.nth if self.onward else self.calls == self.nth


ARMED = False
"""Whether any fault is armed in this process (read by every call site first)."""

_plan: dict[str, _Fault] = {}


def _parse(spec: str) -> dict[str, _Fault]:
    plan: dict[str, _Fault] = {}
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        where, sep, what = item.partition("=")
        point = where.partition("/")[0].strip()
        if not sep or point not in POINTS:
            raise FaultSpecError(
                f"{ENV}: {item!r} is not point=action; points: {sorted(POINTS)}"
            )
        what, _, count = what.partition("@")
        action, _, argument = what.partition(":")
        action = action.strip()
        if action not in _ACTIONS:
            raise FaultSpecError(
                f"{ENV}: unknown action {action!r} in {item!r}; "
                f"actions: {sorted(_ACTIONS)}"
            )
        try:
            seconds = float(argument) if argument else 0.0
            onward = count.endswith("+")
            nth = int(count.rstrip("+")) if count else 0
        except ValueError:
            raise FaultSpecError(f"{ENV}: bad number in {item!r}") from None
        if action in ("pause", "sleep") and seconds <= 0:
            raise FaultSpecError(f"{ENV}: {action} needs seconds, e.g. {action}:5")
        plan[where.strip()] = _Fault(action, seconds, nth, onward)
    return plan


def arm(spec: str | None) -> None:
    """Replace the plan (``None`` or ``""``: disarm). Tests in one process use
    this; processes a test starts read ``ENGINE_FAULTS`` at import instead."""
    global ARMED
    _plan.clear()
    _plan.update(_parse(spec or ""))
    ARMED = bool(_plan)


def hit(point: str, key: str = "") -> None:
    """A fault point was reached: act if a fault is armed for it (and ``key``)."""
    fault = _plan.get(f"{point}/{key}") if key else None
    if fault is None:
        fault = _plan.get(point)
    if fault is None or not fault.due():
        return
    _log(point, key, fault.action)
    if fault.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # the signal is on its way; never go on
    elif fault.action == "sleep":
        time.sleep(fault.seconds)
    elif fault.action == "pause":
        subprocess.Popen(
            ["sh", "-c", f"sleep {fault.seconds}; kill -CONT {os.getpid()}"],
            start_new_session=True,
        )
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        raise InjectedConnectionError(
            f"injected fault at {point}: the connection was lost"
        )


def _log(point: str, key: str, action: str) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{os.getpid()} {point} {key or '-'} {action}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:  # the log is a convenience; the fault still happens
        print(f"{LOG_ENV}: {exc}", file=sys.stderr)


arm(os.environ.get(ENV))

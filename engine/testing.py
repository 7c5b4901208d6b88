"""Test support that applications built on the engine may use too: fault points.

A fault point is a named place where a test makes the process die (SIGKILL),
stop (SIGSTOP for some seconds), sleep or lose its connection, to prove that
what was saved before it is enough to go on. Points are armed only by the
``ENGINE_FAULTS`` environment variable (read once, at import); unarmed, a
point does nothing. The syntax and the point names are documented in
``RELIABILITY.md``; in short ``ENGINE_FAULTS="point[/key]=action[:seconds][@n],..."``
with actions ``kill``, ``pause:S``, ``sleep:S`` and ``error``.

The engine's own points are ``after_task_before_writes`` and
``between_values_and_checkpoint``; an application reaches its own
(``after_claim``, ``after_decision_before_resume``, ``after_outbox_before_end``
in the studio) with :func:`fault_point`.
"""

from __future__ import annotations

from engine._internal import _faults
from engine._internal._faults import (
    ENV as FAULTS_ENV,
)
from engine._internal._faults import (
    LOG_ENV as FAULTS_LOG_ENV,
)
from engine._internal._faults import (
    POINTS as FAULT_POINTS,
)
from engine._internal._faults import (
    FaultSpecError,
    InjectedConnectionError,
)

__all__ = (
    "FAULTS_ENV",
    "FAULTS_LOG_ENV",
    "FAULT_POINTS",
    "FaultSpecError",
    "InjectedConnectionError",
    "arm_faults",
    "fault_point",
    "faults_armed",
)


def fault_point(point: str, key: str = "") -> None:
    """Reach the fault point ``point`` (with an optional ``key`` a spec may name)."""
    if _faults.ARMED:
        _faults.hit(point, key)


def faults_armed() -> bool:
    """Whether this process has any fault armed."""
    return _faults.ARMED


def arm_faults(spec: str | None) -> None:
    """Arm faults in this process as ``ENGINE_FAULTS`` would (``None``: disarm)."""
    _faults.arm(spec)

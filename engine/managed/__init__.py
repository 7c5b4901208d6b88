"""Managed state values, as in ``langgraph.managed``: ``IsLastStep``, ``RemainingSteps``.

See :mod:`engine.managed.base` for how they work and how to write one.
"""

from __future__ import annotations

from engine.managed.is_last_step import IsLastStep, RemainingSteps

__all__ = ("IsLastStep", "RemainingSteps")

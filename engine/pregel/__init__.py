"""Pregel: the super-step runtime behind every compiled graph."""

from __future__ import annotations

from engine.pregel._read import PregelNode
from engine.pregel.main import Pregel

__all__ = ("Pregel", "PregelNode")

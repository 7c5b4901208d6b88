"""The purchase graph without its governance declaration (this module defines no
``GOVERNANCE``), for tests of time travel and comparison that edit what the real
one protects."""

from __future__ import annotations

from studio.demo_graphs.purchase import build as purchase

__all__ = ("purchase",)

"""Integration fixtures: the conformance suite's per-backend savers.

``saver``/``asaver`` run a test once per backend (memory, SQLite, Postgres);
they live in ``tests/_support/savers.py``.
"""

from __future__ import annotations

from tests._support.savers import asaver, saver, saver_spec

__all__ = ("asaver", "saver", "saver_spec")

"""Conformance fixtures: every test here runs against memory, SQLite and Postgres.

The fixtures live in ``tests/_support/savers.py`` (shared with the integration
tests); importing them here is what makes them visible to this directory.
"""

from __future__ import annotations

from tests._support.savers import asaver, saver, saver_spec

__all__ = ("asaver", "saver", "saver_spec")

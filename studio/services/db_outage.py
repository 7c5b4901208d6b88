"""Telling a lost database from a failed graph.

A run whose worker loses its Postgres connection (a restart, a failover, a
network cut) did nothing wrong: the worker gives it back (it stays ``running``
until its lease ends, then any worker continues it from its last checkpoint)
instead of ending it as an error. :func:`lost_database` says which errors are
such a loss: psycopg's connection-level errors (no SQLSTATE, class ``08``
"connection exception", or the server shutting down, ``57P01``-``57P03``), a
pool that could not lend a connection in time, and Django's wrappers of those.
A deadlock, a constraint or a cancelled query is not one.
"""

from __future__ import annotations

import psycopg

__all__ = ("lost_database",)

_SHUTDOWN = frozenset({"57P01", "57P02", "57P03"})


def lost_database(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) is a lost connection."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg.InterfaceError):
            return True
        if isinstance(current, psycopg.OperationalError):
            state = current.sqlstate
            if state is None or state.startswith("08") or state in _SHUTDOWN:
                return True
        current = current.__cause__ or current.__context__
    return False

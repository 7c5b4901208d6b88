"""PostgresStore: long-term memory in Postgres (psycopg 3 + psycopg_pool).

Items live in ``engine_store`` as JSONB (see ``_sql.py`` for the schema, indexes and
how filters and queries become SQL). Call :meth:`PostgresStore.setup` once per
database before use; it applies numbered migrations under an advisory lock, so
concurrent workers can all call it. :class:`AsyncPostgresStore` is the asyncio twin.

Differences from the in-memory store a caller can notice: JSONB does not keep the
key order of dicts inside values (equality is unaffected), and ``query`` matching
lower-cases non-ASCII letters per the database's locale. ``query`` scans the rows
under the namespace prefix (there is no full-text index).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import Connection, Cursor
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from engine._internal._postgres import open_pool, transaction_cursor
from engine.store._ops import GetPlan, ListPlan, Plan, PutPlan, SearchPlan, prepare_ops
from engine.store.base import BaseStore, Item, Op, Result, SearchItem, TTLConfig
from engine.store.postgres import _sql
from engine.store.postgres.aio import AsyncPostgresStore

__all__ = ("AsyncPostgresStore", "PostgresStore")


class PostgresStore(BaseStore):
    """A store on a psycopg connection or connection pool.

    Args:
        conn: a ``ConnectionPool`` (recommended; each batch borrows a connection) or a
            single ``Connection`` (batches are serialized by a lock), in autocommit
            mode: every batch runs in its own transaction, which the store begins
            and commits.
        ttl: store-wide TTL behaviour (``default_ttl`` minutes, ``refresh_on_read``).

    Example::

        with PostgresStore.from_conn_string("postgresql://localhost/app") as store:
            store.setup()
            store.put(("users", "alice"), "prefs", {"food": "ramen"})
    """

    supports_ttl = True

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
        *,
        ttl: TTLConfig | None = None,
    ) -> None:
        self.conn = conn
        self.ttl_config = ttl
        self.lock = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        ttl: TTLConfig | None = None,
        max_size: int = 10,
    ) -> Iterator[PostgresStore]:
        """A store on a new connection pool, closed when the block exits.

        Args:
            conn_string: a libpq DSN (``postgresql://...`` or ``host=... dbname=...``).
            ttl: store-wide TTL behaviour.
            max_size: the pool's maximum number of connections.
        """
        with open_pool(conn_string, max_size=max_size, name="engine-store") as pool:
            yield cls(pool, ttl=ttl)

    @contextmanager
    def _cursor(self) -> Iterator[Cursor[TupleRow]]:
        """A cursor inside a transaction: committed on success, rolled back on error."""
        with transaction_cursor(self.conn, self.lock, _sql.STORE_USERS) as cur:
            yield cur

    def setup(self) -> None:
        """Create or upgrade the tables (idempotent; safe to run concurrently)."""
        with self._cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_sql.LOCK_KEY,))
            cur.execute(_sql.CREATE_MIGRATIONS_TABLE)
            row = cur.execute(_sql.SELECT_VERSION).fetchone()
            current = row[0] if row is not None else -1
            for version in range(current + 1, len(_sql.MIGRATIONS)):
                cur.execute(_sql.MIGRATIONS[version])
                cur.execute(_sql.INSERT_MIGRATION, (version,))

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        if not plans:
            return []
        with self._cursor() as cur:
            return [_execute(cur, plan) for plan in plans]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def sweep_ttl(self) -> int:
        """Delete expired items now; returns how many were deleted."""
        with self._cursor() as cur:
            cur.execute(_sql.SWEEP)
            return max(cur.rowcount, 0)

    async def asweep_ttl(self) -> int:
        return await asyncio.to_thread(self.sweep_ttl)


def _execute(cur: Cursor[TupleRow], plan: Plan) -> Result:
    if isinstance(plan, GetPlan):
        return _get(cur, plan)
    if isinstance(plan, PutPlan):
        if plan.value is None:
            cur.execute(*_sql.delete_query(plan))
        else:
            cur.execute(*_sql.put_query(plan))
        return None
    if isinstance(plan, SearchPlan):
        return _search(cur, plan)
    return _list(cur, plan)


def _get(cur: Cursor[TupleRow], plan: GetPlan) -> Item | None:
    row = cur.execute(*_sql.get_query(plan)).fetchone()
    if row is None:
        return None
    if plan.refresh_ttl and row[5] is not None:
        cur.execute(_sql.REFRESH_ONE, (_sql.namespace_text(plan.namespace), plan.key))
    return _sql.item_from_row(plan.namespace, plan.key, row)


def _search(cur: Cursor[TupleRow], plan: SearchPlan) -> list[SearchItem]:
    if plan.terms == ():
        return []
    rows = cur.execute(*_sql.search_query(plan)).fetchall()
    expiring = [row for row in rows if row[5] is not None]
    if plan.refresh_ttl and expiring:
        cur.execute(*_sql.refresh_many(expiring))
    return [_sql.search_item_from_row(row) for row in rows]


def _list(cur: Cursor[TupleRow], plan: ListPlan) -> list[tuple[str, ...]]:
    rows = cur.execute(*_sql.list_query(plan)).fetchall()
    return [_sql.namespace_from_text(row[0]) for row in rows]

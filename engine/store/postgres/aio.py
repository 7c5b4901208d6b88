"""AsyncPostgresStore: the asyncio twin of ``PostgresStore`` (psycopg async + pool).

Same schema, migrations and SQL (``_sql.py``). The sync methods also work, from
*other* threads (a sync node running in a worker thread of an async run): they submit
the call to the store's event loop and wait. Calling them on the loop itself would
deadlock, so that raises instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from engine._internal._postgres import aopen_pool, atransaction_cursor
from engine.store._ops import GetPlan, ListPlan, Plan, PutPlan, SearchPlan, prepare_ops
from engine.store.base import BaseStore, Item, Op, Result, SearchItem, TTLConfig
from engine.store.postgres import _sql

__all__ = ("AsyncPostgresStore",)

T = TypeVar("T")


class AsyncPostgresStore(BaseStore):
    """A store on a psycopg async connection or async connection pool.

    Create it inside a running event loop (the loop is remembered for the sync
    methods). Call :meth:`setup` once per database.

    Args:
        conn: an ``AsyncConnectionPool`` (recommended) or one ``AsyncConnection``
            (batches are serialized by a lock), in autocommit mode: every batch runs
            in its own transaction, which the store begins and commits.
        ttl: store-wide TTL behaviour (``default_ttl`` minutes, ``refresh_on_read``).

    Example::

        async with AsyncPostgresStore.from_conn_string(dsn) as store:
            await store.setup()
            await store.aput(("users", "alice"), "prefs", {"food": "ramen"})
    """

    supports_ttl = True

    def __init__(
        self,
        conn: AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        ttl: TTLConfig | None = None,
    ) -> None:
        self.conn = conn
        self.ttl_config = ttl
        self.lock = asyncio.Lock()
        self.loop = asyncio.get_running_loop()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        ttl: TTLConfig | None = None,
        max_size: int = 10,
    ) -> AsyncIterator[AsyncPostgresStore]:
        """A store on a new async connection pool, closed when the block exits."""
        async with aopen_pool(
            conn_string, max_size=max_size, name="engine-store-async"
        ) as pool:
            yield cls(pool, ttl=ttl)

    @asynccontextmanager
    async def _cursor(self) -> AsyncIterator[AsyncCursor[TupleRow]]:
        async with atransaction_cursor(self.conn, self.lock, _sql.STORE_USERS) as cur:
            yield cur

    async def setup(self) -> None:
        """Create or upgrade the tables (idempotent; safe to run concurrently)."""
        async with self._cursor() as cur:
            await cur.execute("SELECT pg_advisory_xact_lock(%s)", (_sql.LOCK_KEY,))
            await cur.execute(_sql.CREATE_MIGRATIONS_TABLE)
            row = await (await cur.execute(_sql.SELECT_VERSION)).fetchone()
            current = row[0] if row is not None else -1
            for version in range(current + 1, len(_sql.MIGRATIONS)):
                await cur.execute(_sql.MIGRATIONS[version])
                await cur.execute(_sql.INSERT_MIGRATION, (version,))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        if not plans:
            return []
        async with self._cursor() as cur:
            return [await _execute(cur, plan) for plan in plans]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._from_thread(self.abatch(list(ops)))

    async def asweep_ttl(self) -> int:
        """Delete expired items now; returns how many were deleted."""
        async with self._cursor() as cur:
            await cur.execute(_sql.SWEEP)
            return max(cur.rowcount, 0)

    def sweep_ttl(self) -> int:
        return self._from_thread(self.asweep_ttl())

    def _from_thread(self, call: Coroutine[Any, Any, T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            call.close()
            raise RuntimeError(
                "Synchronous AsyncPostgresStore methods were called on its own event "
                "loop, which would deadlock. Use the async methods (aget, aput, "
                "asearch...) there, or call the sync ones from another thread."
            )
        return asyncio.run_coroutine_threadsafe(call, self.loop).result()


async def _execute(cur: AsyncCursor[TupleRow], plan: Plan) -> Result:
    if isinstance(plan, GetPlan):
        return await _get(cur, plan)
    if isinstance(plan, PutPlan):
        if plan.value is None:
            await cur.execute(*_sql.delete_query(plan))
        else:
            await cur.execute(*_sql.put_query(plan))
        return None
    if isinstance(plan, SearchPlan):
        return await _search(cur, plan)
    return await _list(cur, plan)


async def _get(cur: AsyncCursor[TupleRow], plan: GetPlan) -> Item | None:
    row = await (await cur.execute(*_sql.get_query(plan))).fetchone()
    if row is None:
        return None
    if plan.refresh_ttl and row[5] is not None:
        await cur.execute(
            _sql.REFRESH_ONE, (_sql.namespace_text(plan.namespace), plan.key)
        )
    return _sql.item_from_row(plan.namespace, plan.key, row)


async def _search(cur: AsyncCursor[TupleRow], plan: SearchPlan) -> list[SearchItem]:
    if plan.terms == ():
        return []
    rows = await (await cur.execute(*_sql.search_query(plan))).fetchall()
    expiring = [row for row in rows if row[5] is not None]
    if plan.refresh_ttl and expiring:
        await cur.execute(*_sql.refresh_many(expiring))
    return [_sql.search_item_from_row(row) for row in rows]


async def _list(cur: AsyncCursor[TupleRow], plan: ListPlan) -> list[tuple[str, ...]]:
    rows = await (await cur.execute(*_sql.list_query(plan))).fetchall()
    return [_sql.namespace_from_text(row[0]) for row in rows]

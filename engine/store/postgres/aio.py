"""AsyncPostgresStore: the asyncio twin of ``PostgresStore`` (psycopg async + pool).

Same schema, migrations and SQL (``_sql.py``). Concurrent async calls share one
batch (see ``engine.store.base.batch``). The sync methods also work, from *other*
threads (a sync node running in a worker thread of an async run): they submit the
call to the store's event loop and wait. Calling them on the loop itself would
deadlock, so that raises instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection, AsyncCursor, AsyncPipeline, capabilities
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from engine._internal._postgres import atransaction_cursor
from engine.store._index import BatchVectors, VectorIndex, aembed_batch
from engine.store._ops import (
    GetPlan,
    ListPlan,
    Plan,
    PutPlan,
    SearchPlan,
    prepare_ops,
)
from engine.store._sweeper import AsyncTTLSweeper, sweep_interval
from engine.store.base import IndexConfig, Item, Op, Result, SearchItem, TTLConfig
from engine.store.base.batch import AsyncBatchedBaseStore
from engine.store.postgres import _sql
from engine.store.postgres._connect import PoolConfig, aconnect

__all__ = ("AsyncPostgresStore",)


class AsyncPostgresStore(AsyncBatchedBaseStore):
    """A store on a psycopg async connection or async connection pool.

    Create it inside a running event loop (the loop is remembered for the sync
    methods). Call :meth:`setup` once per database.

    Args:
        conn: an ``AsyncConnectionPool`` (recommended) or one ``AsyncConnection``
            (batches are serialized by :attr:`lock`), in autocommit mode: every batch
            runs in its own transaction, which the store begins and commits.
        pipe: the ``AsyncPipeline`` of ``conn`` when it is in pipeline mode.
        deserializer: turns a stored value's JSON text (bytes) into the item's value
            (default: the tagged-JSON decoder).
        index: semantic search settings (see :class:`~engine.store.base.IndexConfig`).
        ttl: store-wide TTL behaviour (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes``).

    Example::

        async with AsyncPostgresStore.from_conn_string(dsn) as store:
            await store.setup()
            await store.aput(("users", "alice"), "prefs", {"food": "ramen"})
    """

    supports_ttl = True
    conn: AsyncConnection[Any] | AsyncConnectionPool[Any]
    pipe: AsyncPipeline | None
    lock: asyncio.Lock
    supports_pipeline: bool
    """Whether the installed libpq can run pipelines."""

    def __init__(
        self,
        conn: AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        pipe: AsyncPipeline | None = None,
        deserializer: Callable[[bytes], dict[str, Any]] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        if pipe is not None and isinstance(conn, AsyncConnectionPool):
            raise ValueError(
                "pipe= needs the single AsyncConnection the pipeline belongs to, "
                "not a pool."
            )
        super().__init__()
        self.conn = conn
        self.pipe = pipe
        self.supports_pipeline = capabilities.has_pipeline()
        self.lock = asyncio.Lock()
        self._load = _sql.make_loader(deserializer)
        self._index = VectorIndex(index) if index else None
        self.index_config = self._index.config if self._index else None
        self.embeddings = self._index.embeddings if self._index else None
        self.ttl_config = ttl
        self._sweeper = AsyncTTLSweeper(self.asweep_ttl)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: PoolConfig | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        max_size: int = 10,
    ) -> AsyncIterator[AsyncPostgresStore]:
        """A store on a new async connection pool, closed when the block exits.

        Arguments as for ``PostgresStore.from_conn_string``.
        """
        async with aconnect(
            conn_string,
            pipeline=pipeline,
            pool_config=pool_config,
            max_size=max_size,
            name="engine-store-async",
        ) as (conn, pipe):
            store = cls(conn, pipe=pipe, index=index, ttl=ttl)
            try:
                yield store
            finally:
                await store.stop_ttl_sweeper()

    @asynccontextmanager
    async def _cursor(self) -> AsyncIterator[AsyncCursor[TupleRow]]:
        async with atransaction_cursor(self.conn, self.lock, _sql.STORE_USERS) as cur:
            yield cur
        if self.pipe is not None:
            await self.pipe.sync()

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
        vectors = await aembed_batch(self._index, plans)
        async with self._cursor() as cur:
            return [
                await self._execute(cur, position, plan, vectors)
                for position, plan in enumerate(plans)
            ]

    async def _execute(
        self,
        cur: AsyncCursor[TupleRow],
        position: int,
        plan: Plan,
        vectors: BatchVectors,
    ) -> Result:
        if isinstance(plan, GetPlan):
            return await self._get(cur, plan)
        if isinstance(plan, PutPlan):
            if plan.value is None:
                await cur.execute(*_sql.delete_query(plan))
                return None
            await cur.execute(*_sql.put_query(plan))
            if fields := vectors.fields.get(position):
                await cur.execute(*_sql.put_vectors_query(plan, fields))
            return None
        if isinstance(plan, SearchPlan):
            return await self._search(cur, plan, vectors.queries.get(position))
        return await _list(cur, plan)

    async def _get(self, cur: AsyncCursor[TupleRow], plan: GetPlan) -> Item | None:
        row = await (await cur.execute(*_sql.get_query(plan))).fetchone()
        if row is None:
            return None
        if plan.refresh_ttl and row[5] is not None:
            namespace = _sql.namespace_text(plan.namespace)
            await cur.execute(_sql.REFRESH_ONE, (namespace, plan.key))
        return _sql.item_from_row(plan.namespace, plan.key, row, self._load)

    async def _search(
        self, cur: AsyncCursor[TupleRow], plan: SearchPlan, query: list[float] | None
    ) -> list[SearchItem]:
        if query is None and plan.terms == ():
            return []
        distance = self._index.distance_type if self._index else "cosine"
        sql = _sql.search_query(plan, query, distance)
        rows = await (await cur.execute(*sql)).fetchall()
        expiring = [row for row in rows if row[5] is not None]
        if plan.refresh_ttl and expiring:
            await cur.execute(*_sql.refresh_many(expiring))
        return [_sql.search_item_from_row(row, self._load) for row in rows]

    # -- TTL -----------------------------------------------------------------------------

    async def asweep_ttl(self) -> int:
        """Delete expired items now; returns how many were deleted."""
        async with self._cursor() as cur:
            await cur.execute(_sql.SWEEP)
            return max(cur.rowcount, 0)

    def sweep_ttl(self) -> int:
        self._refuse_on_loop()
        return asyncio.run_coroutine_threadsafe(self.asweep_ttl(), self.loop).result()

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items in a background task every few minutes.

        Args:
            sweep_interval_minutes: minutes between sweeps (default: the ``ttl``
                config's ``sweep_interval_minutes``, else 5).

        Returns:
            The sweeper's task (cancel it, or call :meth:`stop_ttl_sweeper`, to stop).
        """
        minutes = sweep_interval(sweep_interval_minutes, self.ttl_config)
        return self._sweeper.start(minutes)

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds (None: wait)."""
        return await self._sweeper.stop(timeout)


async def _list(cur: AsyncCursor[TupleRow], plan: ListPlan) -> list[tuple[str, ...]]:
    rows = await (await cur.execute(*_sql.list_query(plan))).fetchall()
    return [_sql.namespace_from_text(row[0]) for row in rows]

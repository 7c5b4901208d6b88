"""PostgresStore: long-term memory in Postgres (psycopg 3 + psycopg_pool).

Items live in ``engine_store`` as JSONB (see ``_sql.py`` for the schema, indexes and
how filters and queries become SQL). Call :meth:`PostgresStore.setup` once per
database before use; it applies numbered migrations under an advisory lock, so
concurrent workers can all call it. :class:`AsyncPostgresStore` is the asyncio twin.

Semantic search (``index=``) needs no extension: field vectors are ``float8[]``
rows ranked with exact arithmetic in SQL. LangGraph's store requires pgvector and
can build approximate (HNSW/IVFFlat) indexes; ``ann_index_config`` is accepted and
ignored here, so a query compares every vector under its namespace prefix.

Differences from the in-memory store a caller can notice: JSONB does not keep the
key order of dicts inside values (equality is unaffected), and ``query`` matching
lower-cases non-ASCII letters per the database's locale. A term ``query`` scans the
rows under the namespace prefix (there is no full-text index).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import Connection, Cursor, Pipeline, capabilities
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from engine._internal._postgres import transaction_cursor
from engine.store._index import (
    BatchVectors,
    VectorIndex,
    aembed_batch,
    embed_batch,
)
from engine.store._ops import (
    GetPlan,
    ListPlan,
    Plan,
    PutPlan,
    SearchPlan,
    prepare_ops,
)
from engine.store._sweeper import TTLSweeper, sweep_interval
from engine.store.base import (
    BaseStore,
    IndexConfig,
    Item,
    Op,
    Result,
    SearchItem,
    TTLConfig,
)
from engine.store.postgres import _sql
from engine.store.postgres._connect import PoolConfig, connect
from engine.store.postgres.aio import AsyncPostgresStore

__all__ = ("AsyncPostgresStore", "PoolConfig", "PostgresStore")

Deserializer = Callable[[bytes], dict[str, Any]]
"""Turns a stored value's JSON text (bytes, tagged JSON) into the item's value."""


class PostgresStore(BaseStore):
    """A store on a psycopg connection or connection pool.

    Args:
        conn: a ``ConnectionPool`` (recommended; each batch borrows a connection) or a
            single ``Connection`` (batches are serialized by :attr:`lock`), in
            autocommit mode: every batch runs in its own transaction, which the
            store begins and commits.
        pipe: the ``Pipeline`` of ``conn`` (a single connection) when it is in
            pipeline mode; the store syncs it after each batch.
        deserializer: turns a stored value's JSON text (bytes, in the tagged-JSON
            form) into the item's value; default: the tagged-JSON decoder, which
            restores datetimes, tuples, models...
        index: semantic search settings (see :class:`~engine.store.base.IndexConfig`).
        ttl: store-wide TTL behaviour (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes``).

    Example::

        with PostgresStore.from_conn_string("postgresql://localhost/app") as store:
            store.setup()
            store.put(("users", "alice"), "prefs", {"food": "ramen"})
    """

    supports_ttl = True
    conn: Connection[Any] | ConnectionPool[Any]
    pipe: Pipeline | None
    lock: threading.Lock
    supports_pipeline: bool
    """Whether the installed libpq can run pipelines."""

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
        *,
        pipe: Pipeline | None = None,
        deserializer: Deserializer | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        if pipe is not None and isinstance(conn, ConnectionPool):
            raise ValueError(
                "pipe= needs the single Connection the pipeline belongs to, not a pool."
            )
        self.conn = conn
        self.pipe = pipe
        self.supports_pipeline = capabilities.has_pipeline()
        self.lock = threading.Lock()
        self._load = _sql.make_loader(deserializer)
        self._index = VectorIndex(index) if index else None
        self.index_config = self._index.config if self._index else None
        self.embeddings = self._index.embeddings if self._index else None
        self.ttl_config = ttl
        self._sweeper = TTLSweeper(self.sweep_ttl, "engine-store-ttl-sweeper")

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: PoolConfig | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        max_size: int = 10,
    ) -> Iterator[PostgresStore]:
        """A store on a new connection pool, closed when the block exits.

        Args:
            conn_string: a libpq DSN (``postgresql://...`` or ``host=... dbname=...``).
            pipeline: use one connection in pipeline mode instead of a pool
                (ignored when ``pool_config`` is given).
            pool_config: the pool's sizes and connection arguments.
            index: semantic search settings.
            ttl: store-wide TTL behaviour.
            max_size: the pool's maximum number of connections, unless
                ``pool_config`` sets one.
        """
        with connect(
            conn_string,
            pipeline=pipeline,
            pool_config=pool_config,
            max_size=max_size,
            name="engine-store",
        ) as (conn, pipe):
            store = cls(conn, pipe=pipe, index=index, ttl=ttl)
            try:
                yield store
            finally:
                store.stop_ttl_sweeper()

    @contextmanager
    def _cursor(self) -> Iterator[Cursor[TupleRow]]:
        """A cursor inside a transaction: committed on success, rolled back on error."""
        with transaction_cursor(self.conn, self.lock, _sql.STORE_USERS) as cur:
            yield cur
        if self.pipe is not None:
            self.pipe.sync()

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
        vectors = embed_batch(self._index, plans)
        return self._apply(plans, vectors)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        if not plans:
            return []
        vectors = await aembed_batch(self._index, plans)
        return await asyncio.to_thread(self._apply, plans, vectors)

    def _apply(self, plans: list[Plan], vectors: BatchVectors) -> list[Result]:
        with self._cursor() as cur:
            return [
                self._execute(cur, position, plan, vectors)
                for position, plan in enumerate(plans)
            ]

    def _execute(
        self, cur: Cursor[TupleRow], position: int, plan: Plan, vectors: BatchVectors
    ) -> Result:
        if isinstance(plan, GetPlan):
            return self._get(cur, plan)
        if isinstance(plan, PutPlan):
            if plan.value is None:
                cur.execute(*_sql.delete_query(plan))
                return None
            cur.execute(*_sql.put_query(plan))
            if fields := vectors.fields.get(position):
                cur.execute(*_sql.put_vectors_query(plan, fields))
            return None
        if isinstance(plan, SearchPlan):
            return self._search(cur, plan, vectors.queries.get(position))
        return _list(cur, plan)

    def _get(self, cur: Cursor[TupleRow], plan: GetPlan) -> Item | None:
        row = cur.execute(*_sql.get_query(plan)).fetchone()
        if row is None:
            return None
        if plan.refresh_ttl and row[5] is not None:
            namespace = _sql.namespace_text(plan.namespace)
            cur.execute(_sql.REFRESH_ONE, (namespace, plan.key))
        return _sql.item_from_row(plan.namespace, plan.key, row, self._load)

    def _search(
        self, cur: Cursor[TupleRow], plan: SearchPlan, query: list[float] | None
    ) -> list[SearchItem]:
        if query is None and plan.terms == ():
            return []
        distance = self._index.distance_type if self._index else "cosine"
        rows = cur.execute(*_sql.search_query(plan, query, distance)).fetchall()
        expiring = [row for row in rows if row[5] is not None]
        if plan.refresh_ttl and expiring:
            cur.execute(*_sql.refresh_many(expiring))
        return [_sql.search_item_from_row(row, self._load) for row in rows]

    # -- TTL -----------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete expired items now; returns how many were deleted."""
        with self._cursor() as cur:
            cur.execute(_sql.SWEEP)
            return max(cur.rowcount, 0)

    async def asweep_ttl(self) -> int:
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items in a background thread every few minutes.

        Args:
            sweep_interval_minutes: minutes between sweeps (default: the ``ttl``
                config's ``sweep_interval_minutes``, else 5).

        Returns:
            A future that completes when the sweeper stops; cancelling it stops it.
            Calling this again while the sweeper runs returns the same future.
        """
        minutes = sweep_interval(sweep_interval_minutes, self.ttl_config)
        return self._sweeper.start(minutes)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds (None: wait)."""
        return self._sweeper.stop(timeout)


def _list(cur: Cursor[TupleRow], plan: ListPlan) -> list[tuple[str, ...]]:
    rows = cur.execute(*_sql.list_query(plan)).fetchall()
    return [_sql.namespace_from_text(row[0]) for row in rows]

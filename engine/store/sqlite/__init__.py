"""SqliteStore: long-term memory in a SQLite file, with no extra dependency.

One ``sqlite3`` connection per store, shared by threads behind a lock, in WAL mode.
Every batch is one transaction (``BEGIN IMMEDIATE``, which also serializes writers
across processes). The tables are created on first use, as LangGraph's SQLite
store does; :meth:`SqliteStore.setup` does it up front. Filters, queries and
ranking run in Python with the in-memory store's rules (see ``_sql.py``), over the
rows under the searched namespace prefix: right for an embedded database, not for
millions of items under one prefix.

Semantic search (``index=``) stores each field vector as a blob and compares a
query with every vector under the prefix; LangGraph's store loads the
``sqlite-vec`` extension for this, ours needs none.

Example:
    >>> with SqliteStore.from_conn_string("memory.db") as store:
    ...     store.put(("users", "alice"), "prefs", {"food": "ramen"})
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from engine.checkpoint.sqlite import connect
from engine.store._index import (
    BatchVectors,
    FieldVector,
    VectorIndex,
    aembed_batch,
    embed_batch,
)
from engine.store._match import namespace_matches
from engine.store._ops import (
    SERDE,
    GetPlan,
    ListPlan,
    Plan,
    PutPlan,
    SearchPlan,
    prepare_ops,
)
from engine.store._rank import Candidate, rank
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
from engine.store.sqlite import _sql
from engine.store.sqlite.aio import AsyncSqliteStore

__all__ = ("AsyncSqliteStore", "SqliteStore")

_TICK = timedelta(microseconds=1)

Deserializer = Callable[[bytes], dict[str, Any]]
"""Turns a stored value's JSON text (bytes, tagged JSON) into the item's value."""

_Row = tuple[str, str, str, str, str, float | None]
"""prefix, key, value, created_at, updated_at, ttl_minutes."""


class SqliteStore(BaseStore):
    """A store in SQLite (``sqlite3``).

    Args:
        conn: an open connection; it must not have ``autocommit=False`` (the store
            issues its own ``BEGIN``/``COMMIT``). ``engine.checkpoint.sqlite.connect``
            makes a suitable one; ``check_same_thread=False`` is needed to share it.
        deserializer: turns a stored value's JSON text (bytes, tagged JSON) into
            the item's value; default: the tagged-JSON decoder.
        index: semantic search settings (see :class:`~engine.store.base.IndexConfig`).
        ttl: store-wide TTL behaviour (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes``).
    """

    supports_ttl = True

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        deserializer: Deserializer | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        if getattr(conn, "autocommit", None) is False:
            raise ValueError(
                "SqliteStore needs a connection without autocommit=False: it manages "
                "its own transactions (use engine.checkpoint.sqlite.connect())."
            )
        self.conn = conn
        self.lock = threading.RLock()
        self.is_setup = False
        self._deserializer = deserializer
        self._index = VectorIndex(index) if index else None
        self.index_config = self._index.config if self._index else None
        self.embeddings = self._index.embeddings if self._index else None
        self.ttl_config = ttl
        self._last_write = datetime.min.replace(tzinfo=UTC)
        self._sweeper = TTLSweeper(self.sweep_ttl, "engine-store-ttl-sweeper")

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        synchronous: str = "NORMAL",
    ) -> Iterator[SqliteStore]:
        """A store on a new connection (a file path or ``":memory:"``), closed on exit;
        ``synchronous`` as for ``SqliteSaver.from_conn_string``."""
        conn = connect(conn_string, synchronous=synchronous)
        store = cls(conn, index=index, ttl=ttl)
        try:
            yield store
        finally:
            store.stop_ttl_sweeper()
            store.close()

    def close(self) -> None:
        """Close the connection once no call of another thread is using it
        (``SqliteSaver.close`` says why); a call made after this raises
        ``sqlite3.ProgrammingError``."""
        with self.lock:
            self.conn.close()

    def setup(self) -> None:
        """Create or upgrade the tables (optional: the first call does it)."""
        with self.lock:
            if self.is_setup:
                return
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(_sql.CREATE_MIGRATIONS_TABLE)
                done = {
                    row[0]
                    for row in self.conn.execute(
                        "SELECT v FROM engine_store_migrations"
                    )
                }
                for version, statements in enumerate(_sql.MIGRATIONS):
                    if version in done:
                        continue
                    for statement in statements:
                        self.conn.execute(statement)
                    self.conn.execute(
                        "INSERT INTO engine_store_migrations (v) VALUES (?)", (version,)
                    )
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            self.is_setup = True

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.setup()
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        if not plans:
            return []
        return self._apply(plans, embed_batch(self._index, plans))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        if not plans:
            return []
        vectors = await aembed_batch(self._index, plans)
        return await asyncio.to_thread(self._apply, plans, vectors)

    def _apply(self, plans: list[Plan], vectors: BatchVectors) -> list[Result]:
        with self._transaction() as conn:
            results: list[Result] = []
            for position, plan in enumerate(plans):
                now = datetime.now(UTC)
                if isinstance(plan, GetPlan):
                    results.append(self._get(conn, plan, now))
                elif isinstance(plan, PutPlan):
                    self._put(conn, plan, now, vectors.fields.get(position, []))
                    results.append(None)
                elif isinstance(plan, SearchPlan):
                    query = vectors.queries.get(position)
                    results.append(self._search(conn, plan, now, query))
                else:
                    results.append(_list(conn, plan, now))
            return results

    # -- operations --------------------------------------------------------------------

    def _load(self, text: str) -> dict[str, Any]:
        if self._deserializer is not None:
            return self._deserializer(text.encode())
        loaded: dict[str, Any] = SERDE.loads(text)
        return loaded

    def _get(
        self, conn: sqlite3.Connection, plan: GetPlan, now: datetime
    ) -> Item | None:
        prefix = ".".join(plan.namespace)
        row = conn.execute(_sql.GET, (prefix, plan.key, now.timestamp())).fetchone()
        if row is None:
            return None
        if plan.refresh_ttl and row[5] is not None:
            conn.execute(_sql.REFRESH, (now.timestamp(), prefix, plan.key))
        return Item(
            value=self._load(row[2]),
            key=plan.key,
            namespace=plan.namespace,
            created_at=row[3],
            updated_at=row[4],
        )

    def _put(
        self,
        conn: sqlite3.Connection,
        plan: PutPlan,
        now: datetime,
        vectors: list[FieldVector],
    ) -> None:
        prefix = ".".join(plan.namespace)
        conn.execute(_sql.DELETE_VECTORS, (prefix, plan.key))
        if plan.value is None:
            conn.execute(_sql.DELETE, (prefix, plan.key))
            return
        # Strictly increasing write times: a later put is always "more recent".
        stamp = max(now, self._last_write + _TICK)
        self._last_write = stamp
        expires = None if plan.ttl is None else stamp.timestamp() + plan.ttl * 60
        conn.execute(
            _sql.UPSERT,
            (
                prefix,
                plan.key,
                plan.text,
                stamp.isoformat(),
                expires,
                plan.ttl,
                now.timestamp(),
            ),
        )
        conn.executemany(
            _sql.INSERT_VECTOR,
            [(prefix, plan.key, field, _sql.pack(vector)) for field, vector in vectors],
        )

    def _search(
        self,
        conn: sqlite3.Connection,
        plan: SearchPlan,
        now: datetime,
        query: list[float] | None,
    ) -> list[SearchItem]:
        prefix = ".".join(plan.namespace_prefix)
        sql, params = _sql.search_sql(prefix)
        rows: list[_Row] = conn.execute(sql, [*params, now.timestamp()]).fetchall()
        vectors: dict[tuple[str, str], list[list[float]]] = {}
        if query is not None:
            sql, params = _sql.vectors_sql(prefix)
            for row_prefix, key, blob in conn.execute(sql, params):
                vectors.setdefault((row_prefix, key), []).append(_sql.unpack(blob))
        candidates = (
            Candidate(
                tuple(row[0].split(".")),
                row[1],
                _encoded(row[2]),
                row[2].lower(),
                datetime.fromisoformat(row[4]),
                vectors.get((row[0], row[1]), []),
                row,
            )
            for row in rows
        )
        items: list[SearchItem] = []
        for score, hit in rank(plan, candidates, self._index, query):
            row = hit.ref
            if plan.refresh_ttl and row[5] is not None:
                conn.execute(_sql.REFRESH, (now.timestamp(), row[0], row[1]))
            items.append(
                SearchItem(
                    hit.namespace, hit.key, self._load(row[2]), row[3], row[4], score
                )
            )
        return items

    # -- TTL -----------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete expired items now; returns how many were deleted."""
        now = datetime.now(UTC).timestamp()
        with self._transaction() as conn:
            conn.execute(_sql.SWEEP_VECTORS, (now,))
            return max(conn.execute(_sql.SWEEP, (now,)).rowcount, 0)

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
        """
        minutes = sweep_interval(sweep_interval_minutes, self.ttl_config)
        return self._sweeper.start(minutes)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds (None: wait)."""
        return self._sweeper.stop(timeout)


def _encoded(text: str) -> dict[str, Any]:
    """The stored (tagged) JSON form of a value, for filters."""
    decoded: dict[str, Any] = orjson.loads(text)
    return decoded


def _list(
    conn: sqlite3.Connection, plan: ListPlan, now: datetime
) -> list[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for (prefix,) in conn.execute(_sql.LIST, (now.timestamp(),)):
        namespace = tuple(prefix.split("."))
        if all(namespace_matches(namespace, c) for c in plan.conditions):
            depth = plan.max_depth
            found.add(namespace[:depth] if depth is not None else namespace)
    ordered = sorted(found)
    return ordered[plan.offset : plan.offset + plan.limit]

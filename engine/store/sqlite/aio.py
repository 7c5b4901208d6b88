"""AsyncSqliteStore: SqliteStore for asyncio code, without extra dependencies.

Each batch runs the sync store's work in a worker thread (``asyncio.to_thread``), so
the event loop never waits on SQLite; concurrent async calls share one batch (see
``engine.store.base.batch``). Unlike LangGraph's, which takes an ``aiosqlite``
connection, it takes a ``sqlite3`` one (``from_conn_string`` is the same), as
``AsyncSqliteSaver`` does.

Example:
    >>> async with AsyncSqliteStore.from_conn_string("memory.db") as store:
    ...     await store.aput(("users", "alice"), "prefs", {"food": "ramen"})
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from engine.store._sweeper import AsyncTTLSweeper, sweep_interval
from engine.store.base import IndexConfig, Op, Result, TTLConfig
from engine.store.base.batch import AsyncBatchedBaseStore

if TYPE_CHECKING:
    from engine.store.sqlite import SqliteStore

__all__ = ("AsyncSqliteStore",)


class AsyncSqliteStore(AsyncBatchedBaseStore):
    """A store in SQLite with an asyncio API (sync methods work from other threads).

    Create it inside a running event loop. Arguments as for ``SqliteStore``.
    """

    supports_ttl = True

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        deserializer: Callable[[bytes], dict[str, Any]] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        from engine.store.sqlite import SqliteStore  # noqa: PLC0415 (cycle)

        super().__init__()
        self.sync: SqliteStore = SqliteStore(
            conn, deserializer=deserializer, index=index, ttl=ttl
        )
        self.conn = conn
        self.index_config = self.sync.index_config
        self.embeddings = self.sync.embeddings
        self.ttl_config = ttl
        self._sweeper = AsyncTTLSweeper(self.asweep_ttl)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        synchronous: str = "NORMAL",
    ) -> AsyncIterator[AsyncSqliteStore]:
        """A store on a new connection (a file path or ``":memory:"``), closed on exit;
        ``synchronous`` as for ``SqliteSaver.from_conn_string``."""
        from engine.checkpoint.sqlite import connect  # noqa: PLC0415

        conn = await asyncio.to_thread(
            partial(connect, conn_string, synchronous=synchronous)
        )
        try:
            store = cls(conn, index=index, ttl=ttl)
        except BaseException:
            await asyncio.to_thread(conn.close)
            raise
        try:
            yield store
        finally:
            try:
                await store.stop_ttl_sweeper()
            finally:
                await asyncio.to_thread(store.sync.close)

    async def setup(self) -> None:
        """Create or upgrade the tables (optional: the first call does it)."""
        await asyncio.to_thread(self.sync.setup)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.sync.abatch(ops)

    def sweep_ttl(self) -> int:
        """Delete expired items now; returns how many were deleted."""
        return self.sync.sweep_ttl()

    async def asweep_ttl(self) -> int:
        return await asyncio.to_thread(self.sync.sweep_ttl)

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items in a background task every few minutes.

        Returns:
            The sweeper's task (cancel it, or call :meth:`stop_ttl_sweeper`, to stop).
        """
        minutes = sweep_interval(sweep_interval_minutes, self.ttl_config)
        return self._sweeper.start(minutes)

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds (None: wait)."""
        return await self._sweeper.stop(timeout)

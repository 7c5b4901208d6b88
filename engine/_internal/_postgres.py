"""Connection handling shared by the Postgres checkpointer, store and cache.

Each of them takes a psycopg ``ConnectionPool`` (recommended) or one
``Connection`` shared by threads behind a lock, always in autocommit mode (they
begin and commit their own transactions), and ``from_conn_string`` opens a pool
of its own. Imported only by the Postgres backends: importing it needs psycopg.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from psycopg import AsyncConnection, AsyncCursor, Connection, Cursor
from psycopg.rows import TupleRow, tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = (
    "POOL_OPEN_TIMEOUT",
    "aborrowed",
    "aopen_pool",
    "atransaction_cursor",
    "borrowed",
    "open_pool",
    "require_autocommit",
    "transaction_cursor",
)

POOL_OPEN_TIMEOUT = 30.0
"""Seconds ``from_conn_string`` waits for its first connection before failing."""


def require_autocommit(autocommit: bool, who: str) -> None:
    """Refuse a connection ``who`` cannot run its own transactions on."""
    if not autocommit:
        raise ValueError(
            f"{who} need connections with autocommit=True: each call runs its own "
            'transaction (e.g. ConnectionPool(dsn, kwargs={"autocommit": True}), or '
            "psycopg.connect(dsn, autocommit=True))."
        )


@contextmanager
def open_pool(
    conn_string: str, *, max_size: int, name: str | None = None
) -> Iterator[ConnectionPool[Connection[TupleRow]]]:
    """A pool of autocommit connections, open (first connection made) until exit."""
    pool: ConnectionPool[Connection[TupleRow]] = ConnectionPool(
        conn_string,
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True},
        open=False,
        name=name,
    )
    pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT)
    try:
        yield pool
    finally:
        pool.close()


@asynccontextmanager
async def aopen_pool(
    conn_string: str, *, max_size: int, name: str | None = None
) -> AsyncIterator[AsyncConnectionPool[AsyncConnection[TupleRow]]]:
    """Async twin of :func:`open_pool`."""
    pool: AsyncConnectionPool[AsyncConnection[TupleRow]] = AsyncConnectionPool(
        conn_string,
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True},
        open=False,
        name=name,
    )
    await pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT)
    try:
        yield pool
    finally:
        await pool.close()


@contextmanager
def borrowed(
    conn: Connection[Any] | ConnectionPool[Any], lock: threading.Lock
) -> Iterator[Connection[Any]]:
    """A connection of the pool, or the one connection while holding ``lock``."""
    if isinstance(conn, ConnectionPool):
        with conn.connection() as pooled:
            yield pooled
    else:
        with lock:
            yield conn


@asynccontextmanager
async def aborrowed(
    conn: AsyncConnection[Any] | AsyncConnectionPool[Any], lock: asyncio.Lock
) -> AsyncIterator[AsyncConnection[Any]]:
    """Async twin of :func:`borrowed`."""
    if isinstance(conn, AsyncConnectionPool):
        async with conn.connection() as pooled:
            yield pooled
    else:
        async with lock:
            yield conn


@contextmanager
def transaction_cursor(
    conn: Connection[Any] | ConnectionPool[Any], lock: threading.Lock, who: str
) -> Iterator[Cursor[TupleRow]]:
    """A cursor inside a transaction: committed on success, rolled back on error."""
    with borrowed(conn, lock) as connection:
        require_autocommit(connection.autocommit, who)
        with connection.transaction(), connection.cursor(row_factory=tuple_row) as cur:
            yield cur


@asynccontextmanager
async def atransaction_cursor(
    conn: AsyncConnection[Any] | AsyncConnectionPool[Any],
    lock: asyncio.Lock,
    who: str,
) -> AsyncIterator[AsyncCursor[TupleRow]]:
    """Async twin of :func:`transaction_cursor`."""
    async with aborrowed(conn, lock) as connection:
        require_autocommit(connection.autocommit, who)
        async with (
            connection.transaction(),
            connection.cursor(row_factory=tuple_row) as cur,
        ):
            yield cur

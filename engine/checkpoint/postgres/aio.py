"""AsyncPostgresSaver: PostgresSaver on psycopg's asyncio connections and pool.

Same schema, statements and semantics as :class:`~engine.checkpoint.postgres.PostgresSaver`
(both run the operations of ``engine.checkpoint._sqlcore``, and send them
through libpq's pipeline directly unless given a caller's pipeline:
``_libpq_pipeline``). The sync methods also work, from threads other than the
event loop's: they submit the call to the saver's loop and wait.

Example:
    >>> async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
    ...     await saver.setup()
    ...     graph = builder.compile(checkpointer=saver)
    ...     await graph.ainvoke(inputs, {"configurable": {"thread_id": "1"}})
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import Any, TypeVar

from psycopg import AsyncConnection, AsyncCursor, AsyncPipeline, Capabilities, Error
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from engine._internal._postgres import aborrowed, aopen_pool
from engine.checkpoint._sqlcore.dialect import Batch, Op, Stmt, is_last
from engine.checkpoint._sqlcore.saver import SqlCheckpointSaver, adrive
from engine.checkpoint.postgres import check_pipe, require_autocommit, translate
from engine.checkpoint.postgres._libpq_pipeline import (
    AsyncLibpqTransaction,
    available_on,
)
from engine.checkpoint.postgres._sql import (
    BEGIN_READ,
    BEGIN_WRITE,
    CREATE_MIGRATIONS_TABLE,
    DIALECT,
    MIGRATION_LOCK,
    MIGRATIONS,
    PLANNING,
    PLANNING_FOR,
)
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("AsyncPostgresSaver", "Conn", "amigrate")

T = TypeVar("T")

type Conn = AsyncConnection[Any] | AsyncConnectionPool[AsyncConnection[Any]]
"""What :class:`AsyncPostgresSaver` takes: one connection, or a pool of them."""


async def amigrate(conn: AsyncConnection[Any]) -> list[int]:
    """The async twin of :func:`engine.checkpoint.postgres.migrate`."""
    require_autocommit(conn.autocommit)
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        await cur.execute(CREATE_MIGRATIONS_TABLE)
        await cur.execute("SELECT v FROM engine_checkpoint_migrations")
        done = {row[0] for row in await cur.fetchall()}
        applied = []
        for version, statements in enumerate(MIGRATIONS):
            if version in done:
                continue
            async with conn.transaction():
                for statement in statements:
                    await cur.execute(statement)
                await cur.execute(
                    "INSERT INTO engine_checkpoint_migrations (v) VALUES (%s)",
                    (version,),
                )
            applied.append(version)
        return applied
    finally:
        await cur.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


class AsyncPostgresSaver(SqlCheckpointSaver):
    """Checkpoints in Postgres with an asyncio API.

    Args:
        conn: a ``psycopg_pool.AsyncConnectionPool`` (recommended) or one
            ``psycopg.AsyncConnection`` (calls take turns on it); either way with
            ``autocommit=True``.
        pipe: a ``psycopg.AsyncPipeline`` open on ``conn`` (a single connection,
            not a pool): the saver's statements go through it, each call synced
            when it ends (see :class:`~engine.checkpoint.postgres.PostgresSaver`).
        serde: serializer (default: tagged JSON).
        default_ttl: seconds after its last checkpoint when a thread expires.
    """

    dialect = DIALECT

    def __init__(
        self,
        conn: Conn,
        pipe: AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        default_ttl: float | None = None,
    ) -> None:
        super().__init__(serde=serde, default_ttl=default_ttl)
        check_pipe(conn, pipe, AsyncConnectionPool)
        self.conn = conn
        self.pipe = pipe
        self.lock = asyncio.Lock()
        self.is_setup = False
        self.supports_pipeline = Capabilities().has_pipeline()
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        max_size: int = 10,
        **kwargs: Any,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """A saver on a new async connection pool, or with ``pipeline`` on one
        new connection in pipeline mode (closed on exit either way).

        Args:
            conn_string: a libpq DSN or URL.
            pipeline: one connection and an ``AsyncPipeline`` on it, instead of
                a pool.
            serde: serializer (default: tagged JSON).
            max_size: most connections the pool opens.
            **kwargs: other constructor arguments (``default_ttl``).
        """
        if pipeline:
            async with (
                await AsyncConnection.connect(conn_string, autocommit=True) as conn,
                conn.pipeline() as pipe,
            ):
                yield cls(conn, pipe, serde, **kwargs)
            return
        async with aopen_pool(conn_string, max_size=max_size) as pool:
            yield cls(pool, serde=serde, **kwargs)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with aborrowed(self.conn, self.lock) as conn:
            yield conn

    async def setup(self) -> None:
        """Create or upgrade the tables (numbered migrations; a no-op when current).

        Safe to call from several processes at once.
        """
        if not self.is_setup:
            async with self._connection() as conn:
                await amigrate(conn)
                if self.pipe is not None:
                    await self.pipe.sync()
            self.is_setup = True

    async def _arun(self, op: Op[T], *, write: bool) -> T:
        held = AsyncExitStack()  # the borrowed connection (and its lock, for libpq)
        txn: AsyncLibpqTransaction | _AsyncCursorTransaction | None = None

        async def begin() -> None:
            nonlocal txn
            try:
                conn = await held.enter_async_context(self._connection())
                require_autocommit(conn.autocommit)
                start = BEGIN_WRITE if write else BEGIN_READ
                if self.pipe is None and available_on(conn):
                    await held.enter_async_context(conn.lock)
                    txn = AsyncLibpqTransaction(conn, start, PLANNING, PLANNING_FOR)
                else:
                    txn = await _AsyncCursorTransaction.open(
                        conn, start, self.supports_pipeline
                    )
            except BaseException:
                await held.aclose()
                raise

        async def execute(stmt: Stmt | Batch) -> Any:
            # See PostgresSaver._run: the last statements commit in their round trip.
            assert txn is not None
            if txn.committed:
                raise RuntimeError("a statement after the operation's last one")
            stmts: Batch = (stmt,) if isinstance(stmt, Stmt) else stmt
            rows = await txn.run(stmts, last=is_last(stmt))
            return rows[0] if isinstance(stmt, Stmt) else rows

        async def end(ok: bool) -> None:
            assert txn is not None
            try:
                if not ok:
                    await txn.abandon()
                elif not txn.committed:
                    await txn.commit()
            except BaseException:
                await txn.abandon()
                raise
            finally:
                await held.aclose()

        try:
            return await adrive(op, execute, begin, end)
        except Error as exc:
            raise translate(exc) from None

    def _run(self, op: Op[T], *, write: bool) -> T:
        """Sync calls: run on the saver's event loop, from another thread."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self.loop is None or running is self.loop:
            raise RuntimeError(
                "AsyncPostgresSaver's sync methods can only be called from a thread "
                "other than its event loop's; in async code use the a-prefixed "
                "methods (aget_tuple, alist, aput...) or ainvoke/astream."
            )
        future = asyncio.run_coroutine_threadsafe(
            self._arun(op, write=write), self.loop
        )
        return future.result()


class _AsyncCursorTransaction:
    """The async twin of ``PostgresSaver``'s cursor path (a caller's pipeline,
    or libpq without pipeline mode)."""

    def __init__(self, conn: AsyncConnection[Any], pipelined: bool) -> None:
        self.conn = conn
        self.pipelined = pipelined
        self.committed = False
        self._pipe = AsyncExitStack()  # pipeline mode on the connection

    @classmethod
    async def open(
        cls, conn: AsyncConnection[Any], begin: str, pipelined: bool
    ) -> _AsyncCursorTransaction:
        txn = cls(conn, pipelined)
        try:
            if pipelined:  # nested in the caller's pipeline when given
                await txn._pipe.enter_async_context(conn.pipeline())
            await conn.execute(begin, prepare=False)
            await conn.execute(PLANNING, prepare=True)  # see PostgresSaver._run
        except BaseException:
            await txn._pipe.aclose()
            raise
        return txn

    async def run(self, stmts: Batch, *, last: bool) -> list[Any]:
        """See ``_CursorTransaction.run``."""
        cursors = [await self._send(stmt) for stmt in stmts]
        if self.pipelined and last:
            await self.commit()
        return [
            await c.fetchall() if s.fetch else None
            for c, s in zip(cursors, stmts, strict=True)
        ]

    async def _send(self, stmt: Stmt) -> AsyncCursor[Any]:
        cursor = self.conn.cursor(row_factory=tuple_row)
        if stmt.many is not None:
            await cursor.executemany(stmt.sql, stmt.many)
        else:
            await cursor.execute(stmt.sql, stmt.params, prepare=True)
        return cursor

    async def commit(self) -> None:
        self.committed = True
        await self.conn.execute("COMMIT", prepare=False)
        await self._pipe.aclose()

    async def abandon(self) -> None:
        """Leave pipeline mode and roll back, whatever state the connection is in."""
        with suppress(Error):
            await self._pipe.aclose()
        with suppress(Error):
            await self.conn.execute("ROLLBACK", prepare=False)

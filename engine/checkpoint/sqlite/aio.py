"""AsyncSqliteSaver: SqliteSaver for asyncio code, without extra dependencies.

Each call runs the sync saver's operation in a worker thread
(``asyncio.to_thread``), so the event loop never waits on SQLite; the
connection is still shared behind one lock and every call is one transaction.

The tables are created on first use, as with :class:`SqliteSaver`;
``await saver.setup()`` does it up front.

Example:
    >>> async with AsyncSqliteSaver.from_conn_string("checkpoints.db") as saver:
    ...     graph = builder.compile(checkpointer=saver)
    ...     await graph.ainvoke(inputs, {"configurable": {"thread_id": "1"}})
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

from engine.checkpoint._sqlcore.dialect import Op
from engine.checkpoint._sqlcore.saver import SqlCheckpointSaver
from engine.checkpoint.serde.base import SerializerProtocol
from engine.checkpoint.sqlite import SqliteSaver, connect
from engine.checkpoint.sqlite._sql import DIALECT

__all__ = ("AsyncSqliteSaver",)

T = TypeVar("T")


class AsyncSqliteSaver(SqlCheckpointSaver):
    """Checkpoints in SQLite with an asyncio API (the sync methods work too).

    Args:
        conn: an open ``sqlite3`` connection (see :class:`SqliteSaver`).
        serde: serializer (default: tagged JSON).
        default_ttl: seconds after its last checkpoint when a thread expires.
    """

    dialect = DIALECT

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        serde: SerializerProtocol | None = None,
        default_ttl: float | None = None,
    ) -> None:
        super().__init__(serde=serde, default_ttl=default_ttl)
        self.sync = SqliteSaver(conn, serde=self.serde, default_ttl=default_ttl)
        self.conn = conn

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, synchronous: str = "NORMAL", **kwargs: Any
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """A saver on a new connection (a file path or ``":memory:"``), closed on exit;
        ``synchronous`` as for :meth:`SqliteSaver.from_conn_string`."""
        conn = await asyncio.to_thread(
            partial(connect, conn_string, synchronous=synchronous)
        )
        saver = cls(conn, **kwargs)
        try:
            yield saver
        finally:
            await asyncio.to_thread(saver.sync.close)

    async def setup(self) -> None:
        """Create or upgrade the tables (numbered migrations; a no-op when current).

        Optional: the saver runs it on first use.
        """
        await asyncio.to_thread(self.sync.setup)

    def _run(self, op: Op[T], *, write: bool) -> T:
        return self.sync._run(op, write=write)

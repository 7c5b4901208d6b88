"""PostgresSaver: checkpoints in Postgres through psycopg 3 and a connection pool.

Each call borrows a connection, runs one transaction and gives it back; no
connection is held between calls (nor between the pages of ``list()``). Writes
are fenced per thread with a transaction-scoped advisory lock (see
``_sqlcore.saves``); the schema is created and upgraded by numbered migrations
in :meth:`PostgresSaver.setup`. See ``_sql.py`` for the tables and why payloads
are BYTEA with a JSONB projection of the metadata.

Connections must be in autocommit mode (the saver issues ``BEGIN``/``COMMIT``
itself); :meth:`PostgresSaver.from_conn_string` makes a suitable pool.

Every call sends its statements in pipeline mode (one round trip for a step's
writes), through libpq directly (``_libpq_pipeline``: psycopg's adapters, none
of its cursor work per statement). A saver may also be given a single
connection together with a psycopg ``Pipeline`` the caller opened on it
(``PostgresSaver(conn, pipe)``, or ``from_conn_string(..., pipeline=True)``), as
in LangGraph: its statements then go through that pipeline with psycopg's
cursors, each call synced (so committed) when it ends.

Example:
    >>> with PostgresSaver.from_conn_string("postgresql://localhost/app") as saver:
    ...     saver.setup()
    ...     graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import Any, TypeVar

from psycopg import Capabilities, Connection, Cursor, Error, Pipeline
from psycopg.errors import UndefinedTable
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from engine._internal import _postgres
from engine.checkpoint._lease import lease_lost
from engine.checkpoint._sqlcore.dialect import Batch, Op, Stmt, is_last
from engine.checkpoint._sqlcore.saver import SETUP_HINT, SqlCheckpointSaver, drive
from engine.checkpoint.base import conflict
from engine.checkpoint.postgres._libpq_pipeline import LibpqTransaction, available_on
from engine.checkpoint.postgres._sql import (
    BEGIN_READ,
    BEGIN_WRITE,
    CONFLICT_SQLSTATE,
    CREATE_MIGRATIONS_TABLE,
    DIALECT,
    LEASE_LOST_SQLSTATE,
    MIGRATION_LOCK,
    MIGRATIONS,
    PLANNING,
    PLANNING_FOR,
)
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = (
    "Conn",
    "PostgresSaver",
    "check_pipe",
    "migrate",
    "require_autocommit",
    "translate",
)

T = TypeVar("T")

type Conn = Connection[Any] | ConnectionPool[Connection[Any]]
"""What :class:`PostgresSaver` takes: one connection, or a pool of them."""

CHECKPOINT_USERS = "Postgres checkpoint savers"


def require_autocommit(autocommit: bool) -> None:
    """Refuse a connection the saver cannot run its own transactions on."""
    _postgres.require_autocommit(autocommit, CHECKPOINT_USERS)


def migrate(conn: Connection[Any]) -> list[int]:
    """Apply the migrations this database lacks; the versions applied.

    Holds a session advisory lock meanwhile, so processes that call it at once
    wait for each other and each version is applied exactly once.
    """
    require_autocommit(conn.autocommit)
    cur = conn.cursor(row_factory=tuple_row)
    cur.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        cur.execute(CREATE_MIGRATIONS_TABLE)
        cur.execute("SELECT v FROM engine_checkpoint_migrations")
        done = {row[0] for row in cur.fetchall()}
        applied = []
        for version, statements in enumerate(MIGRATIONS):
            if version in done:
                continue
            with conn.transaction():
                for statement in statements:
                    cur.execute(statement)
                cur.execute(
                    "INSERT INTO engine_checkpoint_migrations (v) VALUES (%s)",
                    (version,),
                )
            applied.append(version)
        return applied
    finally:
        cur.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


class PostgresSaver(SqlCheckpointSaver):
    """Checkpoints in Postgres (psycopg 3).

    Args:
        conn: a ``psycopg_pool.ConnectionPool`` (recommended) or one
            ``psycopg.Connection`` (shared by threads behind a lock); either way
            with ``autocommit=True``.
        pipe: a ``psycopg.Pipeline`` open on ``conn`` (a single connection, not
            a pool): the saver's statements go through it.
        serde: serializer (default: tagged JSON).
        default_ttl: seconds after its last checkpoint when a thread expires.
    """

    dialect = DIALECT

    def __init__(
        self,
        conn: Conn,
        pipe: Pipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        default_ttl: float | None = None,
    ) -> None:
        super().__init__(serde=serde, default_ttl=default_ttl)
        check_pipe(conn, pipe, ConnectionPool)
        self.conn = conn
        self.pipe = pipe
        self.lock = threading.Lock()
        self.is_setup = False
        self.supports_pipeline = Capabilities().has_pipeline()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        max_size: int = 10,
        **kwargs: Any,
    ) -> Iterator[PostgresSaver]:
        """A saver on a new connection pool, or with ``pipeline`` on one new
        connection in pipeline mode (closed on exit either way).

        Args:
            conn_string: a libpq DSN or URL.
            pipeline: one connection and a ``Pipeline`` on it (see the class),
                instead of a pool.
            max_size: most connections the pool opens.
            **kwargs: constructor arguments (``serde``, ``default_ttl``).
        """
        if pipeline:
            # The saver's lock is taken before the pipeline and the connection
            # close, and given back after: a call of another thread (a lease
            # renewal) ends first.
            locked: threading.Lock | None = None
            try:
                with (
                    Connection.connect(conn_string, autocommit=True) as conn,
                    conn.pipeline() as pipe,
                ):
                    saver = cls(conn, pipe, **kwargs)
                    try:
                        yield saver
                    finally:
                        saver.lock.acquire()
                        locked = saver.lock
            finally:
                if locked is not None:
                    locked.release()
            return
        with _postgres.open_pool(conn_string, max_size=max_size) as pool:
            yield cls(pool, **kwargs)

    @contextmanager
    def _connection(self) -> Iterator[Connection[Any]]:
        with _postgres.borrowed(self.conn, self.lock) as conn:
            yield conn

    def setup(self) -> None:
        """Create or upgrade the tables (numbered migrations; a no-op when current).

        Safe to call from several processes at once.
        """
        if not self.is_setup:
            with self._connection() as conn:
                migrate(conn)
                if self.pipe is not None:
                    self.pipe.sync()
            self.is_setup = True

    def _run(self, op: Op[T], *, write: bool) -> T:
        held = ExitStack()  # the borrowed connection (and its lock, for libpq)
        txn: LibpqTransaction | _CursorTransaction | None = None

        def begin() -> None:
            nonlocal txn
            try:
                conn = held.enter_context(self._connection())
                require_autocommit(conn.autocommit)
                start = BEGIN_WRITE if write else BEGIN_READ
                if self.pipe is None and available_on(conn):
                    held.enter_context(conn.lock)
                    txn = LibpqTransaction(conn, start, PLANNING, PLANNING_FOR)
                else:
                    txn = _CursorTransaction(conn, start, self.supports_pipeline)
            except BaseException:
                held.close()
                raise

        def execute(stmt: Stmt | Batch) -> Any:
            assert txn is not None
            if txn.committed:
                raise RuntimeError("a statement after the operation's last one")
            stmts: Batch = (stmt,) if isinstance(stmt, Stmt) else stmt
            rows = txn.run(stmts, last=is_last(stmt))
            return rows[0] if isinstance(stmt, Stmt) else rows

        def end(ok: bool) -> None:
            assert txn is not None
            try:
                if not ok:
                    txn.abandon()
                elif not txn.committed:
                    txn.commit()
            except BaseException:
                txn.abandon()
                raise
            finally:
                held.close()

        try:
            return drive(op, execute, begin, end)
        except Error as exc:
            raise translate(exc) from None


class _CursorTransaction:
    """A saver transaction through psycopg's cursors: on a connection in a
    pipeline the caller opened (``PostgresSaver(conn, pipe)``), or in one opened
    here, or, where libpq has no pipeline mode, a statement at a time.

    Every statement is prepared on first use (prepare=True), utility ones never:
    psycopg mis-tracks a statement that turns prepared inside a pipeline the
    database then aborts (a fencing conflict does abort it). Each keeps one plan
    per connection (see PLANNING).
    """

    def __init__(self, conn: Connection[Any], begin: str, pipelined: bool) -> None:
        self.conn = conn
        self.pipelined = pipelined
        self.committed = False
        self._pipe = ExitStack()  # pipeline mode on the connection
        try:
            if pipelined:  # nested in the caller's pipeline when given
                self._pipe.enter_context(conn.pipeline())
            conn.execute(begin, prepare=False)
            conn.execute(PLANNING, prepare=True)
        except BaseException:
            self._pipe.close()
            raise

    def run(self, stmts: Batch, *, last: bool) -> list[Any]:
        """Queue ``stmts``, commit with them when ``last``; their rows.

        Statements are only queued; fetching rows is what waits for them, so a
        batch (and every statement that returns nothing) costs no round trip of
        its own. After the operation's last statements the commit goes in the
        same round trip: leaving the pipeline fetches every result.
        """
        cursors = [self._send(stmt) for stmt in stmts]
        if self.pipelined and last:
            self.commit()
        return [
            c.fetchall() if s.fetch else None
            for c, s in zip(cursors, stmts, strict=True)
        ]

    def _send(self, stmt: Stmt) -> Cursor[Any]:
        cursor = self.conn.cursor(row_factory=tuple_row)
        if stmt.many is not None:
            cursor.executemany(stmt.sql, stmt.many)
        else:
            cursor.execute(stmt.sql, stmt.params, prepare=True)
        return cursor

    def commit(self) -> None:
        self.committed = True
        self.conn.execute("COMMIT", prepare=False)
        self._pipe.close()  # sends what is queued; raises if any of it failed

    def abandon(self) -> None:
        """Leave pipeline mode and roll back, whatever state the connection is in."""
        with suppress(Error):
            self._pipe.close()
        with suppress(Error):
            self.conn.execute("ROLLBACK", prepare=False)


def check_pipe(conn: object, pipe: object | None, pool_type: type) -> None:
    """Refuse a pipeline given with a pool, or opened on another connection."""
    if pipe is None:
        return
    if isinstance(conn, pool_type):
        raise ValueError(
            "A pipeline can only be used with a single connection, not a pool: "
            "pass the connection the pipeline was opened on."
        )
    if getattr(pipe, "pgconn", None) is not getattr(conn, "pgconn", object()):
        raise ValueError("The pipeline was opened on another connection than conn.")


def translate(exc: Error) -> BaseException:
    """A fencing failure raised by the database as CheckpointConflictError (a
    lost thread lease as ThreadLeaseLostError), a missing table as a hint to run
    ``setup()``; other errors unchanged."""
    if isinstance(exc, UndefinedTable) and "engine_checkpoint" in str(exc):
        return UndefinedTable(f"{exc}\n{SETUP_HINT}")
    if exc.sqlstate == LEASE_LOST_SQLSTATE:
        lost = json.loads(exc.diag.message_detail or "{}")
        return lease_lost(
            lost.get("thread_id", ""),
            lost.get("checkpoint_ns", ""),
            lost.get("holder", ""),
        )
    if exc.sqlstate != CONFLICT_SQLSTATE:
        return exc
    detail = json.loads(exc.diag.message_detail or "{}")
    return conflict(
        detail.get("thread_id", ""),
        detail.get("checkpoint_ns", ""),
        detail.get("expected"),
        detail.get("head"),
    )

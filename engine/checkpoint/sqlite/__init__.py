"""SqliteSaver: checkpoints in a SQLite file, the embedded default.

One ``sqlite3`` connection per saver, shared by threads behind a lock, in WAL
mode so readers in other processes never block the writer. Every call is one
transaction: writes use ``BEGIN IMMEDIATE``, which also serializes writers
across processes (the fencing check runs under that lock), reads get a
consistent snapshot. ``synchronous=NORMAL`` (set by :meth:`from_conn_string`)
keeps every commit across a process crash; a power loss may drop the last
commits but never corrupts the file. ``from_conn_string(path,
synchronous="FULL")`` syncs the log at every commit instead, as LangGraph's
SQLite saver does (SQLite's default): a commit then survives a power loss too,
and a short invoke costs about twice as long (``benchmarks/README.md``).

The tables are created (and upgraded after an engine upgrade) on the saver's
first use, as LangGraph's SQLite savers do; :meth:`SqliteSaver.setup` does it
up front.

Example:
    >>> with SqliteSaver.from_conn_string("checkpoints.db") as saver:
    ...     graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any, TypeVar

from engine.checkpoint._sqlcore.dialect import Op, Rows, Stmt
from engine.checkpoint._sqlcore.saver import (
    SETUP_HINT,
    SqlCheckpointSaver,
    drive,
    run_each,
)
from engine.checkpoint.serde.base import SerializerProtocol
from engine.checkpoint.sqlite._sql import CREATE_MIGRATIONS_TABLE, DIALECT, MIGRATIONS

__all__ = ("SYNCHRONOUS_LEVELS", "SqliteSaver", "connect", "migrate", "sync_level")

T = TypeVar("T")

_LEASE_ONLY = DIALECT.sql["lease_commit_early"]
"""The first statement of a transaction that only changes a lease (see ``_run``)."""
_NORMAL = 1
"""``PRAGMA synchronous`` NORMAL as a number (what the pragma reads back)."""

BUSY_TIMEOUT = 30.0
"""Seconds a writer waits for another process's write transaction to finish."""


SYNCHRONOUS_LEVELS = ("NORMAL", "FULL", "EXTRA")
"""The ``PRAGMA synchronous`` levels :func:`connect` takes. ``NORMAL`` (the
default) keeps every commit across a process crash; a power loss may drop the
last commits, never corrupt the file. ``FULL`` (SQLite's own default, which
LangGraph's savers keep) and ``EXTRA`` sync the write-ahead log at every commit.
``OFF`` is refused: a power loss could then corrupt the file."""


def sync_level(synchronous: str) -> str:
    """``synchronous`` checked against :data:`SYNCHRONOUS_LEVELS` (any case), upper-cased."""
    level = synchronous.upper() if isinstance(synchronous, str) else synchronous
    if level not in SYNCHRONOUS_LEVELS:
        raise ValueError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, got "
            f"{synchronous!r} (OFF is refused: a power loss could corrupt the file)"
        )
    return level


def connect(conn_string: str, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A connection configured for the savers: WAL, ``synchronous`` (see
    :data:`SYNCHRONOUS_LEVELS`), explicit transactions.

    ``conn_string`` is a file path, ``":memory:"`` or a ``file:`` URI.
    """
    level = sync_level(synchronous)  # before anything is opened
    conn = sqlite3.connect(
        conn_string,
        check_same_thread=False,
        isolation_level=None,
        timeout=BUSY_TIMEOUT,
        uri=conn_string.startswith("file:"),
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={level}")
    return conn


def migrate(conn: sqlite3.Connection) -> list[int]:
    """Apply the migrations this database lacks; the versions applied.

    Safe when several processes call it at once: ``BEGIN IMMEDIATE`` lets one
    apply them while the others wait, then find nothing left to do. A database
    that is already current is only read (so a read-only file works).
    """
    if _is_current(conn):
        return []
    with suppress(sqlite3.OperationalError):  # read-only or :memory: databases
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(CREATE_MIGRATIONS_TABLE)
        done = {
            row[0] for row in conn.execute("SELECT v FROM engine_checkpoint_migrations")
        }
        applied = []
        for version, statements in enumerate(MIGRATIONS):
            if version in done:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO engine_checkpoint_migrations (v) VALUES (?)", (version,)
            )
            applied.append(version)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return applied


def _is_current(conn: sqlite3.Connection) -> bool:
    try:
        rows = conn.execute("SELECT v FROM engine_checkpoint_migrations").fetchall()
    except sqlite3.OperationalError:  # no such table: never set up
        return False
    return {row[0] for row in rows} >= set(range(len(MIGRATIONS)))


class SqliteSaver(SqlCheckpointSaver):
    """Checkpoints in SQLite (``sqlite3``; no extra dependency).

    The first call that touches the database creates or upgrades the tables
    (LangGraph's behaviour); calling :meth:`setup` first is optional.

    Args:
        conn: an open connection; it must not have ``autocommit=False`` (the
            saver issues its own ``BEGIN``/``COMMIT``). :func:`connect` makes a
            suitable one; ``check_same_thread=False`` is needed to share it.
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
        if getattr(conn, "autocommit", None) is False:
            raise ValueError(
                "SqliteSaver needs a connection without autocommit=False: it manages "
                "its own transactions (use engine.checkpoint.sqlite.connect())"
            )
        self.conn = conn
        self.lock = threading.RLock()
        self.is_setup = False
        self._syncs_hard: bool | None = None
        """Whether the connection syncs harder than NORMAL (read at the first
        lease change; once read as NORMAL or lower, not read again)."""

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, synchronous: str = "NORMAL", **kwargs: Any
    ) -> Iterator[SqliteSaver]:
        """A saver on a new connection (a file path or ``":memory:"``), closed on exit.

        ``synchronous``: ``"NORMAL"`` (default) or ``"FULL"``/``"EXTRA"``, which
        sync every commit to disk as LangGraph's SQLite saver does (see
        :data:`SYNCHRONOUS_LEVELS`). Other keyword arguments go to the
        constructor (``serde``, ``default_ttl``).
        """
        conn = connect(conn_string, synchronous=synchronous)
        saver = cls(conn, **kwargs)
        try:
            yield saver
        finally:
            saver.close()

    def close(self) -> None:
        """Close the connection once no call of another thread is using it.

        A call still running in another thread (a lease renewal, a background
        save) finishes first; a call made after this raises
        ``sqlite3.ProgrammingError``. Closing a ``sqlite3`` connection under a
        running statement can crash the interpreter, so never close
        ``saver.conn`` directly while the saver may be in use.
        """
        with self.lock:
            self.conn.close()

    def setup(self) -> None:
        """Create or upgrade the tables (numbered migrations; a no-op when current).

        Optional: the saver runs it on first use.
        """
        with self.lock:
            if not self.is_setup:
                migrate(self.conn)
                self.is_setup = True

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor on the saver's connection, for statements of your own.

        Holds the saver's lock until the block ends (its calls from other
        threads wait) and sets the tables up first. With ``transaction`` the
        block is one write transaction (``BEGIN IMMEDIATE``), committed when it
        ends and rolled back when it raises; without, each statement commits on
        its own (connections from :func:`connect` are in autocommit mode).
        """
        with self.lock:
            self.setup()
            cur = self.conn.cursor()
            try:
                if not transaction:
                    yield cur
                    return
                cur.execute("BEGIN IMMEDIATE")
                try:
                    yield cur
                except BaseException:
                    _rollback(self.conn)
                    raise
                try:
                    cur.execute("COMMIT")
                except BaseException:
                    _rollback(self.conn)
                    raise
            finally:
                cur.close()

    def _run(self, op: Op[T], *, write: bool) -> T:
        if not self.is_setup:
            self.setup()
        conn = self.conn
        # The transaction starts with the first statement: one that only
        # changes a lease (its first is the dialect's marker) commits at sync
        # level NORMAL when the connection syncs harder (FULL, EXTRA): a lease
        # row lost to a power loss is harmless (its holder is gone too, and a
        # save checks its lease in the save's own transaction), and SQLite
        # changes the level only outside a transaction.
        started = False
        restore: int | None = None

        def execute(stmt: Stmt) -> Rows | None:
            nonlocal started, restore
            if not started:
                started = True
                if stmt.sql == _LEASE_ONLY:
                    if self._syncs_hard is not False:  # read once when NORMAL
                        level = conn.execute("PRAGMA synchronous").fetchone()[0]
                        self._syncs_hard = level > _NORMAL
                        if self._syncs_hard:
                            conn.execute(f"PRAGMA synchronous={_NORMAL}")
                            restore = level
                    conn.execute("BEGIN IMMEDIATE")
                    return None
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            if stmt.many is not None:
                conn.executemany(stmt.sql, stmt.many)
                return None
            cursor = conn.execute(stmt.sql, stmt.params)
            return cursor.fetchall() if stmt.fetch else None

        def begin() -> None:
            self.lock.acquire()  # taken only now: structures were serialized without it

        def end(ok: bool) -> None:
            try:
                if ok:
                    try:
                        conn.execute("COMMIT")
                    except BaseException:
                        _rollback(conn)
                        raise
                else:
                    _rollback(conn)
            finally:
                try:
                    if restore is not None:
                        conn.execute(f"PRAGMA synchronous={restore}")
                finally:
                    self.lock.release()

        try:
            return drive(op, partial(run_each, execute), begin, end)
        except sqlite3.OperationalError as exc:
            if "no such table: engine_checkpoint" in str(exc):
                raise sqlite3.OperationalError(f"{exc}\n{SETUP_HINT}") from exc
            raise


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")

"""One saver transaction sent through libpq's pipeline mode directly.

psycopg's cursors spend ~25 µs of Python on each statement of a pipeline (a
cursor object, the query's conversion, the pipeline's queue, its generators),
and a run's step sends about ten. :class:`LibpqTransaction` sends the saver's
statements with the connection's ``pgconn`` (psycopg's documented libpq
wrapper) and adapts values with psycopg's ``Transformer``, the dumpers and
loaders its cursors use (one per connection, kept like the names of the
statements prepared on it: ``_Session``): the database gets the same
parameters and the saver the same rows as through a cursor, for ~6 µs a
statement (most of it the dumpers').

:class:`AsyncLibpqTransaction` is the same for ``AsyncPostgresSaver``: the
protocol is written once, as generators that yield when they must wait for the
socket (``READ``, ``READ | WRITE``); the sync class waits in ``poll``, the async
one on the event loop's reader and writer callbacks.

Both keep the contract of the psycopg path in ``PostgresSaver._run``: one
transaction, statements queued until rows are needed (then a flush request, no
sync), the commit sent with the operation's last statements, the first error
raised once the pipeline is drained, and the connection left idle, out of
pipeline mode and out of any transaction, whatever happened.

Statements are prepared on a connection's first use (named ``_engine_N``, apart
from psycopg's own ``_pg3_N``) and keep their generic plan (``PLANNING``). When
someone else dropped them (``DEALLOCATE ALL``, ``DISCARD ALL`` on the saver's
connection), the operation fails with psycopg's ``InvalidSqlStatementName`` as
psycopg's own prepared statements would, and the connection's are prepared
anew from the next operation on (psycopg's would stay missing).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import select
import threading
import weakref
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from psycopg import AsyncConnection, Capabilities, Connection, errors
from psycopg.abc import Transformer as TransformerType
from psycopg.adapt import PyFormat, Transformer
from psycopg.pq import (
    ConnStatus,
    ExecStatus,
    Format,
    PipelineStatus,
    TransactionStatus,
)
from psycopg.pq.abc import PGresult

from engine.checkpoint._sqlcore.dialect import Rows, Stmt

__all__ = ("AsyncLibpqTransaction", "LibpqTransaction", "available_on", "to_libpq")

MAX_PREPARED = 256
"""Statement shapes prepared per process at most; later ones (unusual ``list``
filters) are sent unnamed and planned each time."""

T = TypeVar("T")

Waits = Generator[int, None, T]
"""Protocol steps: yield the socket events to wait for (``READ``, ``WRITE``),
resumed once one happened; return the step's result."""

INVALID_STATEMENT_NAME = "26000"

SEND_BYTES = 256 * 1024
"""Parameters queued past this many bytes are sent before the next statement is
queued (reading what the server answered meanwhile, so neither side waits on
the other): a value sent in parts never piles up whole in libpq's buffer."""

READ = select.POLLIN if hasattr(select, "poll") else 1
WRITE = select.POLLOUT if hasattr(select, "poll") else 4

_PLACEHOLDER = re.compile(r"%(.)", re.S)
_SUPPORTED = hasattr(select, "poll") and Capabilities().has_pipeline()
"""libpq 14 or later (pipeline mode, flush requests) and a platform with poll."""


@lru_cache(maxsize=1024)
def to_libpq(sql: str) -> bytes:
    """``sql`` with psycopg's ``%s`` placeholders numbered for libpq (``$1``...)
    and ``%%`` as ``%``; any other ``%`` sequence is refused."""
    count = itertools.count(1)

    def number(match: re.Match[str]) -> str:
        code = match.group(1)
        if code == "s":
            return f"${next(count)}"
        if code == "%":
            return "%"
        raise ValueError(f"Only %s placeholders are supported, not %{code}: {sql!r}")

    return _PLACEHOLDER.sub(number, sql).encode()


class _Names:
    """The name each statement shape is prepared under, the same on every connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[tuple[str, tuple[int, ...]], bytes] = {}

    def of(self, sql: str, types: tuple[int, ...]) -> bytes | None:
        key = (sql, types)
        name = self._names.get(key)
        if name is None:
            with self._lock:
                name = self._names.get(key)
                if name is None:
                    if len(self._names) >= MAX_PREPARED:
                        return None
                    name = self._names[key] = b"_engine_%d" % len(self._names)
        return name


_NAMES = _Names()


class _WeakContext:
    """What a ``Transformer`` is made from: the connection's adapters, and the
    connection by weak reference, so that the :class:`_Session` that keeps the
    transformer does not keep the connection alive (its entry goes with it)."""

    __slots__ = ("adapters", "connection")

    def __init__(self, conn: Connection[Any] | AsyncConnection[Any]) -> None:
        self.adapters = conn.adapters
        self.connection = weakref.proxy(conn)


@dataclass(slots=True)
class _Session:
    """What a connection's transactions share, one after the other (the
    connection's lock is held during each): the statement names prepared on it,
    and one ``Transformer``, whose dumpers and loaders are looked up once per
    connection rather than once per transaction (~25 µs of client time for a
    resumed run's two transactions). Like a psycopg cursor's, it keeps the
    adapters it found: one registered on the connection after its first saver
    transaction does not apply to the saver's parameters (strings, bytes,
    numbers, text arrays)."""

    prepared: set[bytes]
    tx: TransformerType


_SESSIONS: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()
"""Each connection's session (gone with the connection)."""
_SESSIONS_LOCK = threading.Lock()


def _session_of(conn: Connection[Any] | AsyncConnection[Any]) -> _Session:
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(conn)
        if session is None:
            session = _SESSIONS[conn] = _Session(set(), Transformer(_WeakContext(conn)))
        return session


def available_on(conn: Connection[Any] | AsyncConnection[Any]) -> bool:
    """Whether ``conn`` can take a transaction of this module's now: libpq has
    pipeline mode, the platform can poll, and the connection is idle, outside a
    transaction and outside pipeline mode."""
    pgconn = conn.pgconn
    return (
        _SUPPORTED
        and pgconn.pipeline_status == PipelineStatus.OFF
        and pgconn.transaction_status == TransactionStatus.IDLE
    )


@dataclass(slots=True)
class _Sent:
    """A statement in the pipeline; its rows once read (when it fetches). Its
    parameters are not kept: a value sent in parts is never held whole."""

    fetch: bool
    rows: Rows | None = None


_Awaited = _Sent | bytes | None
"""A result to read: a statement's, a ``Parse``'s (the name it prepares) or a
command's (BEGIN, COMMIT: None)."""


class _LibpqPipeline:
    """The protocol of a saver transaction on an idle autocommit connection:
    sending (never waits), and generators for all that waits on the socket.

    ``send`` queues a statement; ``_read`` waits for every queued one (flush
    request), ``_commit`` queues ``COMMIT`` with a sync and waits for all,
    ``_recover`` ends the transaction whatever state it is in (rolled back).
    The connection's lock is held meanwhile (the savers do).
    """

    def __init__(
        self,
        conn: Connection[Any] | AsyncConnection[Any],
        begin: str,
        planning: str,
        planning_for: Mapping[str, str] | None = None,
    ) -> None:
        self.pgconn = conn.pgconn
        session = _session_of(conn)
        self.tx = session.tx
        self.encoding = conn.info.encoding
        self.committed = False
        self._prepared = session.prepared
        self._awaited: list[_Awaited] = []
        self._syncs = 0
        """Syncs sent whose ``PIPELINE_SYNC`` result is not read yet."""
        self._unsent = 0
        """Bytes of parameters queued since the last flush (``SEND_BYTES``)."""
        self._lost_track = False
        """A read was cut off (an interrupt): which results are left, and which
        statements the connection has prepared, is no longer known."""
        self._planning: str | None = planning
        """The settings statement, sent before the operation's first statement
        (``_plan``); None once sent."""
        self._planning_for = planning_for or {}
        self.pgconn.enter_pipeline_mode()
        self.pgconn.send_query_params(begin.encode(), None)
        self._awaited.append(None)

    def _plan(self, stmts: Sequence[Stmt]) -> int:
        """Queue the settings statement before the operation's first ones: the
        one ``planning_for`` names for its first statement, which it then stands
        for (a lease change's ``SET LOCAL synchronous_commit``: one statement
        fewer), else the default. How many of ``stmts`` it stands for (0 or 1)."""
        planning, self._planning = self._planning, None
        assert planning is not None
        instead = self._planning_for.get(stmts[0].sql) if stmts else None
        self.send(Stmt(planning if instead is None else instead))
        return 0 if instead is None else 1

    # --- sending (never waits) --------------------------------------------------

    def send(self, stmt: Stmt) -> _Sent:
        """Queue ``stmt``; its rows (when it fetches) are on the result after a
        read. Past ``SEND_BYTES`` queued, :meth:`_flush` is due (``flush_due``)."""
        sent = _Sent(stmt.fetch)
        if stmt.many is None:
            self._send_query(stmt.sql, stmt.params, sent)
        else:
            for params in stmt.many:
                self._send_query(stmt.sql, params, sent)
        return sent

    @property
    def flush_due(self) -> bool:
        return self._unsent > SEND_BYTES

    def _send_query(self, sql: str, params: Sequence[Any], sent: _Sent) -> None:
        pgconn = self.pgconn
        if params:
            values = self.tx.dump_sequence(params, [PyFormat.AUTO] * len(params))
            types = tuple(self.tx.types or ())
            formats = self.tx.formats
            self._unsent += sum(map(len, filter(None, values)))
        else:
            values, types, formats = (), (), None
        name = _NAMES.of(sql, types)
        if name is None:
            pgconn.send_query_params(
                to_libpq(sql), values, param_types=types, param_formats=formats
            )
        else:
            if name not in self._prepared:
                pgconn.send_prepare(name, to_libpq(sql), param_types=types)
                self._prepared.add(name)
                self._awaited.append(name)
            pgconn.send_query_prepared(name, values, param_formats=formats)
        self._awaited.append(sent)

    # --- waiting ------------------------------------------------------------------

    def _run(self, stmts: Sequence[Stmt], last: bool) -> Waits[list[Rows | None]]:
        """Queue ``stmts``, commit with them when ``last``, else read when one
        fetches; their rows (None for those that do not fetch)."""
        skipped = self._plan(stmts) if self._planning is not None else 0
        sent: list[_Sent | None] = [None] * skipped
        for stmt in stmts[skipped:]:
            sent.append(self.send(stmt))
            if self.flush_due:
                yield from self._flush()
        if last:
            yield from self._commit()
        elif any(stmt.fetch for stmt in stmts):
            yield from self._read()
        return [one.rows if one is not None and one.fetch else None for one in sent]

    def _read(self) -> Waits[None]:
        """Wait for every queued statement (the transaction stays open)."""
        self.pgconn.send_flush_request()
        yield from self._exchange(sync=False)

    def _commit(self) -> Waits[None]:
        """Queue ``COMMIT`` after the queued statements and wait for all of them."""
        if self._planning is not None:  # nothing sent: the settings need not be
            self._planning = None
        self.pgconn.send_query_params(b"COMMIT", None)
        self._awaited.append(None)
        self.committed = True
        self.pgconn.pipeline_sync()
        self._syncs += 1
        yield from self._exchange(sync=True)
        self.pgconn.exit_pipeline_mode()

    def _exchange(self, *, sync: bool) -> Waits[None]:
        yield from self._flush()
        error = yield from self._read_awaited()
        if sync:
            yield from self._read_syncs()
        if error is None:
            return
        yield from self._recover()
        if error.sqlstate == INVALID_STATEMENT_NAME:  # dropped by someone else
            self._prepared.clear()
        raise error

    def _read_awaited(self) -> Waits[errors.Error | None]:
        """Every awaited result read; the first error among them."""
        awaited, self._awaited = self._awaited, []
        error: errors.Error | None = None
        self._lost_track = True  # until every result is read
        for what in awaited:
            result = yield from self._next()
            if result is None:  # pragma: no cover - libpq always has one here
                raise errors.InternalError("libpq returned no result for a query")
            status = result.status
            if status == ExecStatus.FATAL_ERROR and error is None:
                error = errors.error_from_result(result, encoding=self.encoding)
            if isinstance(what, bytes):
                if status != ExecStatus.COMMAND_OK:  # not prepared after all
                    self._prepared.discard(what)
            elif what is not None and what.fetch and status == ExecStatus.TUPLES_OK:
                tx = self.tx
                tx.set_pgresult(result)
                what.rows = tx.load_rows(0, result.ntuples, tuple)
                tx.set_pgresult(None)  # a large result is not kept while idle
            yield from self._next()  # the end marker after the query's results
        self._lost_track = False
        return error

    def _next(self) -> Waits[PGresult | None]:
        """What libpq gives next: a result, or the marker (None) it puts after
        each query's results."""
        pgconn = self.pgconn
        while pgconn.is_busy():
            yield READ
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None and pgconn.status == ConnStatus.BAD:
            message = pgconn.get_error_message(self.encoding)
            raise errors.OperationalError(f"the connection was lost: {message}")
        return result

    def _read_syncs(self) -> Waits[None]:
        """Read up to the last sync sent, skipping what comes before (results an
        interrupted read left, and their end markers)."""
        markers = 0
        while self._syncs:
            result = yield from self._next()
            if result is None:
                markers += 1
                if markers > 1:  # pragma: no cover - libpq lost its sync
                    raise errors.InternalError("libpq has no sync result to read")
                continue
            markers = 0
            if result.status == ExecStatus.PIPELINE_SYNC:
                self._syncs -= 1

    def _flush(self) -> Waits[None]:
        """Send everything queued, reading what the server answers meanwhile."""
        self._unsent = 0
        pgconn = self.pgconn
        while pgconn.flush():
            yield READ | WRITE
            pgconn.consume_input()

    # --- failure ----------------------------------------------------------------

    def _recover(self) -> Waits[None]:
        """Sync the pipeline, read it out, leave pipeline mode, roll back."""
        pgconn = self.pgconn
        if pgconn.pipeline_status != PipelineStatus.OFF:
            pgconn.pipeline_sync()
            self._syncs += 1
            yield from self._flush()
            if self._lost_track:
                self._awaited.clear()  # skipped up to the sync
            else:
                yield from self._read_awaited()
            yield from self._read_syncs()
            pgconn.exit_pipeline_mode()
        if pgconn.transaction_status != TransactionStatus.IDLE:
            yield from self._simple(b"ROLLBACK")
        if self._lost_track:
            names = yield from self._simple(
                b"SELECT name FROM pg_prepared_statements "
                b"WHERE name LIKE '\\_engine\\_%'"
            )
            self._prepared.clear()
            self._prepared.update(row[0] for row in names)
            self._lost_track = False

    def _simple(self, sql: bytes) -> Waits[Rows]:
        """Run ``sql`` outside pipeline mode; its rows (binary values)."""
        pgconn = self.pgconn
        pgconn.send_query_params(sql, None, result_format=Format.BINARY)
        yield from self._flush()
        results = []
        while (result := (yield from self._next())) is not None:
            results.append(result)
        if results[0].status == ExecStatus.FATAL_ERROR:
            raise errors.error_from_result(results[0], encoding=self.encoding)
        return [(results[0].get_value(row, 0),) for row in range(results[0].ntuples)]


class LibpqTransaction(_LibpqPipeline):
    """A saver transaction through libpq, waiting on the socket in ``poll``."""

    def __init__(
        self,
        conn: Connection[Any],
        begin: str,
        planning: str,
        planning_for: Mapping[str, str] | None = None,
    ) -> None:
        self._poll = select.poll()
        self._events = READ
        self._poll.register(conn.pgconn.socket, READ)
        super().__init__(conn, begin, planning, planning_for)

    def run(self, stmts: Sequence[Stmt], *, last: bool) -> list[Rows | None]:
        """See :meth:`_LibpqPipeline._run`."""
        return self._wait(self._run(stmts, last))

    def commit(self) -> None:
        self._wait(self._commit())

    def abandon(self) -> None:
        """End the transaction, rolled back, whatever it sent or read; the
        connection is closed when it cannot be brought back to idle."""
        try:
            self._wait(self._recover())
        except errors.Error:
            self.pgconn.finish()  # the pool drops it; the saver's error stands
        except BaseException:
            self.pgconn.finish()
            raise

    def _wait(self, steps: Waits[T]) -> T:
        try:
            events = next(steps)
            while True:
                if events != self._events:
                    self._poll.modify(self.pgconn.socket, events)
                    self._events = events
                self._poll.poll()
                events = steps.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


class AsyncLibpqTransaction(_LibpqPipeline):
    """A saver transaction through libpq, waiting on the event loop."""

    def __init__(
        self,
        conn: AsyncConnection[Any],
        begin: str,
        planning: str,
        planning_for: Mapping[str, str] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        super().__init__(conn, begin, planning, planning_for)

    async def run(self, stmts: Sequence[Stmt], *, last: bool) -> list[Rows | None]:
        """See :meth:`_LibpqPipeline._run`."""
        return await self._wait(self._run(stmts, last))

    async def commit(self) -> None:
        await self._wait(self._commit())

    async def abandon(self) -> None:
        """See :meth:`LibpqTransaction.abandon`."""
        try:
            await self._wait(self._recover())
        except errors.Error:
            self.pgconn.finish()
        except BaseException:
            self.pgconn.finish()
            raise

    async def _wait(self, steps: Waits[T]) -> T:
        try:
            events = next(steps)
            while True:
                await self._ready(events)
                events = steps.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _ready(self, events: int) -> None:
        """Until the socket is readable (or writable, when asked)."""
        loop, fd = self._loop, self.pgconn.socket
        ready = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, wake)
        if events & WRITE:
            loop.add_writer(fd, wake)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
            if events & WRITE:
                loop.remove_writer(fd)

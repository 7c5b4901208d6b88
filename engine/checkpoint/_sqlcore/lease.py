"""Thread-lease operations of the SQL savers (see ``engine.checkpoint._lease``).

Leases are rows of ``engine_thread_leases`` (thread_id, checkpoint_ns, holder,
expires_at), timed by the database's clock so that processes on machines whose
clocks differ agree on when a lease expired. Each dialect supplies the
statements as templates of its own (``lease_acquire``, ``lease_renew``,
``lease_release``, ``lease_get``; Postgres also ``lease_check``, a statement
that fails the transaction when the holder lost the lease, so a fenced save
needs no round trip of its own; and ``lease_commit_early``, run first in a
lease change's transaction). Taking a lease is one statement: an upsert that
replaces the row only when it expired or is the same holder's.
"""

from __future__ import annotations

from datetime import datetime

from engine._internal._typing import RunnableConfig
from engine.checkpoint._lease import ThreadLease, check_seconds, lease_time
from engine.checkpoint._sqlcore import reads
from engine.checkpoint._sqlcore.dialect import Op, Rows, SqlDialect, Stmt
from engine.checkpoint.base import CheckpointTuple, lease_key_of
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("acquire", "acquire_and_read", "get", "release", "renew")


def acquire(
    d: SqlDialect, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
) -> Op[ThreadLease | None]:
    """Take the lease unless another holder's is running; the lease after it
    (None when the row was released between the two statements: try again).

    The take and the read of the row are sent together, so a take is one round
    trip whether or not another holder has the lease (it commits in it).
    """
    seconds = check_seconds(seconds)
    yield from _commit_early(d)
    taken, row = yield (
        Stmt(
            d["lease_acquire"], (thread_id, checkpoint_ns, holder, seconds), fetch=True
        ),
        Stmt(d["lease_get"], (thread_id, checkpoint_ns), fetch=True, last=True),
    )
    return _lease_of(thread_id, checkpoint_ns, taken or row)


def acquire_and_read(
    d: SqlDialect,
    serde: SerializerProtocol,
    config: RunnableConfig,
    holder: str,
    seconds: float,
    now: datetime,
    guess: reads.HeadGuess | None = None,
) -> Op[tuple[ThreadLease | None, CheckpointTuple | None | reads.Missed]]:
    """:func:`acquire` and, when the lease is this holder's, the checkpoint
    ``config`` addresses, in one transaction: the take and the checkpoint row
    go in one round trip, its values and writes in a second. When another
    holder's lease runs, its lease row is read instead (the tuple is None).

    ``guess``: the thread's head as the saver last saved it, for a ``config``
    that reads the newest checkpoint. Its values and writes then go with the
    take, and the transaction commits in that one round trip; the tuple is
    :class:`reads.Missed` with the head's row when the head is another: the
    caller reads that row's values and writes in a statement batch of its own,
    as a take without a guess reads them after the row (on Postgres, under
    READ COMMITTED, each statement sees what was committed before it).
    """
    seconds = check_seconds(seconds)
    thread_id, checkpoint_ns = lease_key_of(config)
    yield from _commit_early(d)
    read = reads.checkpoint_row(d, config, now)
    take = Stmt(
        d["lease_acquire"], (thread_id, checkpoint_ns, holder, seconds), fetch=True
    )
    if guess is not None and reads.reads_newest(config):
        # Where statements go together, the lease row goes too, in case the take
        # finds another holder's; elsewhere it is read only then (``_holder``).
        lease_row: tuple[Stmt, ...] = ()
        if d.pipelines:
            lease_row = (Stmt(d["lease_get"], (thread_id, checkpoint_ns), fetch=True),)
        taken, checkpoint_rows, *results = yield (
            take,
            read,
            *lease_row,
            *reads.head_guess_stmts(d, guess),
        )
        if not taken:  # another holder's lease runs (or none: try again)
            if lease_row:
                return _lease_of(thread_id, checkpoint_ns, results[0]), None
            return (yield from _holder(d, thread_id, checkpoint_ns)), None
        results = results[len(lease_row) :]
        lease = _lease_of(thread_id, checkpoint_ns, taken)
        return lease, reads.tuple_of_guess(serde, checkpoint_rows, guess, results)
    taken, checkpoint_rows = yield (take, read)
    if not taken:  # another holder's lease runs: who, and until when
        return (yield from _holder(d, thread_id, checkpoint_ns)), None
    taken_lease = _lease_of(thread_id, checkpoint_ns, taken)
    tuple_ = yield from reads.tuple_of_row(
        d, serde, checkpoint_rows, newest=reads.reads_newest(config)
    )
    return taken_lease, tuple_


def _holder(
    d: SqlDialect, thread_id: str, checkpoint_ns: str
) -> Op[ThreadLease | None]:
    """The lease row after a take that did not take it: another holder's (None
    when it was released in between: the caller tries again)."""
    row = yield Stmt(d["lease_get"], (thread_id, checkpoint_ns), fetch=True, last=True)
    return _lease_of(thread_id, checkpoint_ns, row)


def _lease_of(thread_id: str, checkpoint_ns: str, rows: Rows) -> ThreadLease | None:
    if not rows:
        return None
    return ThreadLease(
        thread_id, checkpoint_ns, str(rows[0][0]), lease_time(rows[0][1])
    )


def renew(
    d: SqlDialect, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
) -> Op[bool]:
    """Extend ``holder``'s lease; False when it no longer holds it."""
    yield from _commit_early(d)
    rows = yield Stmt(
        d["lease_renew"],
        (check_seconds(seconds), thread_id, checkpoint_ns, holder),
        fetch=True,
        last=True,
    )
    return bool(rows)


def release(d: SqlDialect, thread_id: str, checkpoint_ns: str, holder: str) -> Op[None]:
    """Delete ``holder``'s lease row (nothing when another holder has it)."""
    yield from _commit_early(d)
    yield Stmt(d["lease_release"], (thread_id, checkpoint_ns, holder))


def _commit_early(d: SqlDialect) -> Op[None]:
    """The dialect's statement letting a lease change commit without waiting
    for durability, when it has one (Postgres)."""
    if (sql := d.sql.get("lease_commit_early")) is not None:
        yield Stmt(sql)


def get(d: SqlDialect, thread_id: str, checkpoint_ns: str) -> Op[ThreadLease | None]:
    """The lease row of a thread and namespace, expired or not."""
    rows = yield Stmt(d["lease_get"], (thread_id, checkpoint_ns), fetch=True, last=True)
    if not rows:
        return None
    return ThreadLease(
        thread_id, checkpoint_ns, str(rows[0][0]), lease_time(rows[0][1])
    )

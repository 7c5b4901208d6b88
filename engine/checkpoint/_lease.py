"""Thread leases: the storage side of "one run at a time on a thread".

A run takes a lease on its ``(thread_id, checkpoint_ns)`` before it runs any
task (``acquire_lease``), renews it while it runs and gives it back when it
ends. A lease can be taken over only once it has expired. Every save the run
makes carries the lease it was made under (the :data:`HELD_LEASE` config key);
the saver refuses such a save with :class:`~engine.errors.ThreadLeaseLostError`
unless that holder still holds the lease, in the same transaction as the save.
So a process that was paused past its lease (a zombie) and wakes up after
another run took the thread writes nothing.

A save is refused only when the lease was taken over (or released), not merely
because it expired: while nobody took the thread, its holder is still the only
writer. Each backend keeps leases in its own storage: Postgres and SQLite in
the ``engine_thread_leases`` table of the checkpoint database (so processes
sharing the database share the rule), the in-memory saver in a dict (one
process). This module holds what they share: the record, the config key, the
errors and the in-memory table.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from engine._internal._constants import CONF
from engine._internal._typing import RunnableConfig
from engine.errors import ErrorCode, ThreadLeaseLostError, error_message

__all__ = (
    "DEFAULT_LEASE_SECONDS",
    "HELD_LEASE",
    "LeaseTable",
    "ThreadLease",
    "held_lease",
    "lease_lost",
    "lease_time",
)

DEFAULT_LEASE_SECONDS = 30.0
"""How long a lease lasts without renewal unless the saver's ``lease_seconds``
says otherwise. A run renews it every third of that, so a process that died
frees its threads within this many seconds."""

HELD_LEASE = "__engine_held_lease"
"""Config key of a save (``put``, ``put_writes``, ``put_steps`` entries): a
``(lease_checkpoint_ns, holder)`` pair. The saver stores nothing unless
``holder`` still holds the lease on the config's thread and that namespace
(a subgraph's saves carry the root run's lease, whose namespace differs)."""


class ThreadLease(NamedTuple):
    """Who holds a thread (and namespace), and until when unless renewed."""

    thread_id: str
    checkpoint_ns: str
    holder: str
    """An opaque name unique to one run (host, process and a random part)."""
    expires_at: datetime
    """UTC; measured by the database's clock for the SQL savers."""


def held_lease(config: RunnableConfig) -> tuple[str, str] | None:
    """The ``(lease_checkpoint_ns, holder)`` a save's config is fenced with, if any."""
    value = config.get(CONF, {}).get(HELD_LEASE)
    if value is None:
        return None
    ns, holder = value
    return str(ns), str(holder)


def lease_lost(thread_id: str, checkpoint_ns: str, holder: str) -> ThreadLeaseLostError:
    """The error a save (or a step) raises once its run no longer holds the thread."""
    return ThreadLeaseLostError(
        error_message(
            f"This run ({holder}) no longer holds thread {thread_id!r} "
            f"(namespace {checkpoint_ns!r}): its lease expired and another run "
            "took the thread over, so nothing more of this run is saved. The "
            "thread goes on from what the other run saves; read its state before "
            "acting again. A run renews its lease while it is alive; a process "
            "paused or stalled for longer than the lease loses it.",
            ErrorCode.THREAD_LEASE_LOST,
        )
    )


def lease_time(value: Any) -> datetime:
    """A stored expiry as an aware UTC datetime (SQLite stores Unix seconds)."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value), UTC)


def check_seconds(seconds: float) -> float:
    """A lease duration, refused unless positive."""
    seconds = float(seconds)
    if not seconds > 0:
        raise ValueError(
            f"a lease must last a positive number of seconds, got {seconds!r}"
        )
    return seconds


class LeaseTable:
    """The in-memory saver's leases. Not locked: the saver calls it under its lock."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], tuple[str, datetime]] = {}

    def acquire(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> ThreadLease:
        now = datetime.now(UTC)
        key = (thread_id, checkpoint_ns)
        current = self.rows.get(key)
        if current is None or current[0] == holder or current[1] <= now:
            current = (holder, now + timedelta(seconds=check_seconds(seconds)))
            self.rows[key] = current
        return ThreadLease(thread_id, checkpoint_ns, *current)

    def renew(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> bool:
        key = (thread_id, checkpoint_ns)
        current = self.rows.get(key)
        if current is None or current[0] != holder:
            return False
        expires = datetime.now(UTC) + timedelta(seconds=check_seconds(seconds))
        self.rows[key] = (holder, expires)
        return True

    def release(self, thread_id: str, checkpoint_ns: str, holder: str) -> None:
        key = (thread_id, checkpoint_ns)
        current = self.rows.get(key)
        if current is not None and current[0] == holder:
            del self.rows[key]

    def get(self, thread_id: str, checkpoint_ns: str) -> ThreadLease | None:
        current = self.rows.get((thread_id, checkpoint_ns))
        return (
            None if current is None else ThreadLease(thread_id, checkpoint_ns, *current)
        )

    def check(self, config: RunnableConfig) -> None:
        """Refuse a save fenced by a lease its holder no longer holds."""
        conf: Mapping[str, Any] = config.get(CONF, {})
        self.check_held(str(conf.get("thread_id", "")), conf.get(HELD_LEASE))

    def check_held(self, thread_id: str, held: Any) -> None:
        """:meth:`check` of a config's ``thread_id`` (as text) and ``HELD_LEASE``
        value (None: not fenced), already read."""
        if held is None:
            return
        ns, holder = held
        ns, holder = str(ns), str(holder)
        current = self.rows.get((thread_id, ns))
        if current is None or current[0] != holder:
            raise lease_lost(thread_id, ns, holder)

"""What must hold in the databases after any fault: checked in SQL, after the fact.

Every fault test (a process killed, paused, disconnected) ends by calling
:func:`assert_invariants` on what it left behind. Each check answers a list of
violations, one readable line each, so a failure says what broke and where.

The checkpoint database (:func:`check_saver`, a SQLite path or a Postgres DSN):

* ``fork``: one line of checkpoints per thread and namespace: two children of
  one checkpoint (or two roots) only when the later ones were made on purpose
  (a replay from a past checkpoint, ``source="fork"``, or ``update_state`` on
  one, ``source="update"``); two writers that both continued the same head
  leave two children that are not.
* ``missing value``: every channel version a checkpoint names has its value row
  (or is kept in the checkpoint row itself, as ``None`` is).
* ``broken delta``: every delta value row's base version is stored.
* ``orphan write``: every pending write belongs to a stored checkpoint.

The studio's tables (:func:`check_studio`, a Django connection):

* ``stale run``: no run left ``running`` past its lease (plus ``lease_grace``).
* ``two running``: at most one running run per thread.
* ``double decision``: at most one decision per (request, version, level).
* ``resume``: a final decision (a rejection, or the last level's approval)
  queued exactly one run, which exists; no run answers two decisions; no
  version was resumed twice.
* ``unapproved purchase``: every outbox purchase has approving decisions for
  its exact amount and version at every level its request needs, and no
  rejection.
* ``side effect``: each side effect is recorded once (one outbox row per
  request, one email per tool call), and a request whose outcome is
  ``executed`` has its purchase in the outbox.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import psycopg

from engine.checkpoint._sqlcore.reads import _metadata, load_checkpoint
from engine.checkpoint.postgres._sql import DIALECT as PG_DIALECT
from engine.checkpoint.serde.base import SerializerProtocol
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.checkpoint.sqlite._sql import DIALECT as SQLITE_DIALECT

__all__ = (
    "DELIBERATE_SOURCES",
    "assert_invariants",
    "check_saver",
    "check_studio",
    "is_postgres",
    "saver_rows",
)

DELIBERATE_SOURCES = frozenset({"fork", "update"})
"""Checkpoint sources that start a branch on purpose (time travel, state edits)."""


# -- the checkpoint database ---------------------------------------------------------


def is_postgres(target: str) -> bool:
    """Whether ``target`` is a Postgres DSN (a URL or a ``key=value`` conninfo)
    rather than a SQLite file path."""
    return target.startswith(("postgres://", "postgresql://")) or "dbname=" in target


def saver_rows(target: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (no parameters) on a checkpoint database."""
    if is_postgres(target):
        with psycopg.connect(target, autocommit=True) as conn:
            return list(conn.execute(sql).fetchall())  # type: ignore[arg-type]
    # read-write, never created: a wrong path fails instead of passing empty
    conn = sqlite3.connect(f"file:{target}?mode=rw", uri=True, isolation_level=None)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def check_saver(
    target: str,
    *,
    serde: SerializerProtocol | None = None,
    threads: Iterable[str] | None = None,
) -> list[str]:
    """Violations of the checkpoint invariants in the database at ``target``
    (a SQLite file path or a Postgres DSN); ``[]`` when all hold.

    ``threads``: check only these threads (a database other tests share).
    """
    serde = serde or JsonPlusSerializer()
    only = None if threads is None else set(threads)

    def wanted(thread_id: str) -> bool:
        return only is None or thread_id in only

    dialect = PG_DIALECT if is_postgres(target) else SQLITE_DIALECT
    problems: list[str] = []
    checkpoints = saver_rows(target, dialect["list_select"])
    blobs = {
        (r[0], r[1], r[2], r[3]): r[4]
        for r in saver_rows(
            target,
            # a delta is the row with a base version (Postgres leaves kind NULL)
            "SELECT thread_id, checkpoint_ns, channel, version, base_version "
            "FROM engine_checkpoint_blobs",
        )
    }
    children: dict[tuple[str, str, str | None], list[tuple[str, str]]] = defaultdict(
        list
    )
    for row in checkpoints:
        thread_id, ns, checkpoint_id, parent_id = row[0], row[1], row[2], row[3]
        if not wanted(thread_id):
            continue
        where = f"thread {thread_id!r} ns {ns!r} checkpoint {checkpoint_id}"
        try:
            checkpoint = load_checkpoint(serde, row)
            metadata = _metadata(serde, row)
        except Exception as exc:
            problems.append(f"unreadable: {where}: {exc}")
            continue
        source = str(metadata.get("source", ""))
        children[(thread_id, ns, parent_id)].append((checkpoint_id, source))
        inline = checkpoint.get("channel_values", {})
        for channel, version in checkpoint["channel_versions"].items():
            if channel in inline:
                continue
            if (thread_id, ns, channel, str(version)) not in blobs:
                problems.append(
                    f"missing value: {where} names {channel!r} version {version} "
                    "but no value row holds it"
                )
    for (thread_id, ns, parent_id), kids in sorted(
        children.items(), key=lambda item: (item[0][0], item[0][1], item[0][2] or "")
    ):
        undeliberate = [cid for cid, source in kids if source not in DELIBERATE_SOURCES]
        if len(undeliberate) > 1:
            problems.append(
                f"fork: thread {thread_id!r} ns {ns!r}: checkpoints {undeliberate} all "
                f"continue {parent_id or 'nothing (two roots)'}; only one writer may"
            )
    for (thread_id, ns, channel, version), base in sorted(blobs.items()):
        if (
            base is not None
            and wanted(thread_id)
            and (thread_id, ns, channel, base) not in blobs
        ):
            problems.append(
                f"broken delta: thread {thread_id!r} ns {ns!r} channel {channel!r} "
                f"version {version} extends {base}, which is not stored"
            )
    for thread_id, ns, checkpoint_id, task_id, count in saver_rows(
        target,
        "SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, COUNT(*) "
        "FROM engine_checkpoint_writes w LEFT JOIN engine_checkpoints c "
        "ON c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns "
        "AND c.checkpoint_id = w.checkpoint_id WHERE c.checkpoint_id IS NULL "
        "GROUP BY w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id "
        "ORDER BY 1, 2, 3, 4",
    ):
        if not wanted(thread_id):
            continue
        problems.append(
            f"orphan write: {count} write(s) of task {task_id} on thread {thread_id!r} "
            f"ns {ns!r} belong to checkpoint {checkpoint_id}, which is not stored"
        )
    return problems


# -- the studio's tables -------------------------------------------------------------


def check_studio(
    connection: Any = None,
    *,
    now: datetime | None = None,
    lease_grace: float = 0.0,
) -> list[str]:
    """Violations of the studio's invariants on a Django ``connection`` (default:
    the default database); ``[]`` when all hold.

    ``lease_grace``: seconds a running run may stay past its lease before it
    counts as left behind (a worker requeues expired runs when it next looks).
    """
    from django.db import connection as default_connection  # noqa: PLC0415
    from django.utils import timezone  # noqa: PLC0415

    from studio.models import (  # noqa: PLC0415
        ApprovalDecision,
        OutboundEmail,
        PurchaseOutbox,
        ReviewRequest,
        Run,
    )

    conn = connection or default_connection
    run = Run._meta.db_table
    decision = ApprovalDecision._meta.db_table
    review = ReviewRequest._meta.db_table
    outbox = PurchaseOutbox._meta.db_table
    email = OutboundEmail._meta.db_table
    cutoff = (now or timezone.now()) - timedelta(seconds=lease_grace)

    def rows(sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with conn.cursor() as cursor:
            cursor.execute(sql, list(params))
            return list(cursor.fetchall())

    problems: list[str] = []
    for run_id, thread_id, expires in rows(
        f"SELECT run_id, thread_id, lease_expires_at FROM {run} WHERE status = "
        "'running' AND (lease_expires_at IS NULL OR lease_expires_at < %s) "
        "ORDER BY run_id",
        [cutoff],
    ):
        problems.append(
            f"stale run: run {run_id} of thread {thread_id!r} is still running, its "
            f"lease ended {expires}"
        )
    for thread_id, count in rows(
        f"SELECT thread_id, COUNT(*) FROM {run} WHERE status = 'running' "
        "GROUP BY thread_id HAVING COUNT(*) > 1 ORDER BY thread_id"
    ):
        problems.append(f"two running: thread {thread_id!r} has {count} running runs")
    for request_id, version, level, count in rows(
        f"SELECT request_id, approval_version, level, COUNT(*) FROM {decision} "
        "GROUP BY request_id, approval_version, level HAVING COUNT(*) > 1 "
        "ORDER BY 1, 2, 3"
    ):
        problems.append(
            f"double decision: {request_id} v{version} level {level} has {count} "
            "decisions"
        )
    # final decisions: a rejection, or an approval at the last level the request needs
    for decision_id, request_id, version, action, run_id, found in rows(
        f"SELECT d.decision_id, d.request_id, d.approval_version, d.action, d.run_id, "
        f"r.run_id FROM {decision} d LEFT JOIN {run} r ON r.run_id = d.run_id "
        "WHERE d.action = 'reject' OR d.level >= COALESCE((SELECT MAX(q."
        f"levels_required) FROM {review} q WHERE q.thread_id = d.thread_id AND "
        "q.request_id = d.request_id AND q.approval_version = d.approval_version), "
        "1) ORDER BY 1"
    ):
        if not run_id:
            problems.append(
                f"resume: final decision {decision_id} ({action} {request_id} "
                f"v{version}) queued no run to resume the thread"
            )
        elif found is None:
            problems.append(
                f"resume: decision {decision_id} names run {run_id}, which does not "
                "exist"
            )
    for run_id, count in rows(
        f"SELECT run_id, COUNT(*) FROM {decision} WHERE run_id <> '' "
        "GROUP BY run_id HAVING COUNT(*) > 1 ORDER BY 1"
    ):
        problems.append(f"resume: run {run_id} answers {count} decisions")
    for request_id, version, count in rows(
        f"SELECT request_id, approval_version, COUNT(DISTINCT run_id) FROM {decision} "
        "WHERE run_id <> '' GROUP BY request_id, approval_version "
        "HAVING COUNT(DISTINCT run_id) > 1 ORDER BY 1, 2"
    ):
        problems.append(
            f"resume: {request_id} v{version} was resumed by {count} runs (one "
            "interrupt, one resume)"
        )
    for request_id, version, amount, approvals, rejections, needed in rows(
        f"SELECT o.request_id, o.approval_version, o.amount_minor, "
        f"(SELECT COUNT(DISTINCT d.level) FROM {decision} d WHERE d.request_id = "
        "o.request_id AND d.approval_version = o.approval_version AND d.action = "
        "'approve' AND d.amount_minor = o.amount_minor), "
        f"(SELECT COUNT(*) FROM {decision} d WHERE d.request_id = o.request_id AND "
        "d.approval_version = o.approval_version AND d.action = 'reject'), "
        f"COALESCE((SELECT MAX(q.levels_required) FROM {review} q WHERE "
        "q.request_id = o.request_id AND q.approval_version = o.approval_version), 1) "
        f"FROM {outbox} o ORDER BY 1"
    ):
        if rejections or approvals < needed:
            problems.append(
                f"unapproved purchase: {request_id} v{version} for {amount} is in the "
                f"outbox with {approvals} of {needed} approving level(s) for that "
                f"amount and version and {rejections} rejection(s)"
            )
    for request_id, count in rows(
        f"SELECT request_id, COUNT(*) FROM {outbox} GROUP BY request_id "
        "HAVING COUNT(*) > 1 ORDER BY 1"
    ):
        problems.append(f"side effect: {request_id} is in the outbox {count} times")
    for thread_id, call, count in rows(
        f"SELECT thread_id, tool_call_id, COUNT(*) FROM {email} "
        "GROUP BY thread_id, tool_call_id HAVING COUNT(*) > 1 ORDER BY 1, 2"
    ):
        problems.append(
            f"side effect: tool call {call} of thread {thread_id!r} sent {count} emails"
        )
    for thread_id, call, action in rows(
        f"SELECT e.thread_id, e.tool_call_id, d.action FROM {email} e JOIN {decision} d "
        "ON d.id = e.decision_id WHERE d.action <> 'approve' ORDER BY 1, 2"
    ):
        problems.append(
            f"side effect: tool call {call} of thread {thread_id!r} sent an email its "
            f"decision did not approve ({action})"
        )
    for request_id, version in rows(
        f"SELECT q.request_id, q.approval_version FROM {review} q WHERE q.graph = "
        f"'purchase' AND q.outcome = 'executed' AND NOT EXISTS (SELECT 1 FROM {outbox} "
        "o WHERE o.request_id = q.request_id) ORDER BY 1, 2"
    ):
        problems.append(
            f"side effect: {request_id} v{version} says executed but nothing is in the "
            "outbox"
        )
    return problems


def assert_invariants(
    *,
    saver: str | None = None,
    studio: Any = None,
    lease_grace: float = 0.0,
    serde: SerializerProtocol | None = None,
    threads: Iterable[str] | None = None,
) -> None:
    """Fail with every violation found: in the checkpoint database at ``saver``
    (only ``threads`` when given) and, when ``studio`` is given (a Django connection, or ``True`` for the
    default one), in the studio's tables."""
    problems: list[str] = []
    if saver is not None:
        problems += check_saver(saver, serde=serde, threads=threads)
    if studio is not None and studio is not False:
        problems += check_studio(
            None if studio is True else studio, lease_grace=lease_grace
        )
    assert not problems, "invariants broken:\n" + "\n".join(problems)

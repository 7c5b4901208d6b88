"""Retention operations of the SQL savers: delete, copy, prune, TTL and sweep.

What to keep is decided by the pure planners in ``engine.checkpoint._retention``
(shared with InMemorySaver); these operations only read the thread's shape and
apply the plan, each in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engine.checkpoint._blobs import load_stored, unpack_structure
from engine.checkpoint._pending_writes import (
    WRITES_CHANNEL,
    WRITES_TAG,
    unpack_task_writes,
)
from engine.checkpoint._retention import (
    BlobKey,
    live_blob_keys,
    open_interrupts,
    plan_prune,
    reparent_survivors,
)
from engine.checkpoint._sqlcore.dialect import Op, Rows, SqlDialect, Stmt
from engine.checkpoint._sqlcore.filters import metadata_condition
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = (
    "copy_thread",
    "delete_for_runs",
    "delete_thread",
    "prune_thread",
    "set_ttl",
    "sweep_expired",
)

RUNS_PER_STATEMENT = 50
"""Run ids looked up per statement by ``delete_for_runs`` (bounds its parameters)."""


def _lock(d: SqlDialect, thread_id: str) -> Op[None]:
    """Wait for the thread's writers (a fenced put cannot interleave with us)."""
    if d.lock_thread is not None:
        yield Stmt(d.lock_thread, (thread_id,))


def delete_thread(d: SqlDialect, thread_id: str) -> Op[None]:
    """Every checkpoint, value, write and deadline of a thread."""
    yield from _lock(d, thread_id)
    for name in ("delete_writes", "delete_blobs", "delete_checkpoints", "delete_ttl"):
        yield Stmt(d[name], (thread_id,))


def copy_thread(d: SqlDialect, source: str, target: str) -> Op[None]:
    """A thread's full history under a new id (its deadline is not copied)."""
    for thread_id in sorted({source, target}):  # one order: no deadlock
        yield from _lock(d, thread_id)
    rows: Rows = yield Stmt(d["thread_exists"], (target,), fetch=True)
    if rows:
        raise ValueError(f"Cannot copy into thread {target!r}: it already exists")
    rows = yield Stmt(d["thread_exists"], (source,), fetch=True)
    if not rows:
        raise ValueError(f"Cannot copy thread {source!r}: it does not exist")
    for name in ("copy_checkpoints", "copy_blobs", "copy_writes"):
        yield Stmt(d[name], (target, source))


def prune_thread(d: SqlDialect, serde: SerializerProtocol, thread_id: str) -> Op[None]:
    """``prune(strategy="keep_latest")`` for one thread (see ``plan_prune``)."""
    yield from _lock(d, thread_id)
    tree: Rows
    channels: Rows
    kept_with_child: Rows
    tree, channels, kept_with_child = yield (
        Stmt(d["thread_tree"], (thread_id,), fetch=True),
        Stmt(d["thread_write_channels"], (thread_id,), fetch=True),
        Stmt(d["thread_parent_writes"], (thread_id,), fetch=True),
    )
    if not tree:
        return
    # writes kept in a child's row: (ns, child, parent) -> [(task_id, path, entry)]
    in_child = {
        (ns, child, parent): unpack_task_writes(
            bytes(payload), f"entry of writes in checkpoint {child!r} of {thread_id!r}"
        )
        for ns, child, parent, payload in kept_with_child
    }
    channels = [
        *channels,  # a task whose writes are in its child's row has finished
        *(
            (ns, parent, task_id, WRITES_CHANNEL)
            for (ns, _child, parent), tasks in in_child.items()
            for task_id, _path, _entry in tasks
        ),
    ]
    parents_by_ns: dict[str, dict[str, str | None]] = {}
    for ns, checkpoint_id, parent_id in tree:
        parents_by_ns.setdefault(ns, {})[checkpoint_id] = parent_id
    drop: list[tuple[str, str, str]] = []
    reparent: list[tuple[str | None, str, str, str]] = []
    for ns, parents in parents_by_ns.items():
        protected = open_interrupts((c, t, ch) for n, c, t, ch in channels if n == ns)
        keep, moved = plan_prune(parents, protected)
        drop.extend((thread_id, ns, cid) for cid in parents if cid not in keep)
        reparent.extend((parent, thread_id, ns, cid) for cid, parent in moved.items())
    if drop:
        dropped = set(drop)
        # writes kept in a dropped child's row move to rows of their own when
        # the checkpoint they belong to stays
        moved_writes = [
            (thread_id, ns, parent, task_id, 0, WRITES_CHANNEL, WRITES_TAG, entry, path)
            for (ns, child, parent), tasks in in_child.items()
            if (thread_id, ns, child) in dropped
            and (thread_id, ns, parent) not in dropped
            for task_id, path, entry in tasks
        ]
        yield Stmt(d["delete_checkpoint_writes"], many=drop)
        if moved_writes:
            yield Stmt(d["insert_write_replace"], many=moved_writes)
        yield Stmt(d["delete_checkpoint"], many=drop)
    if reparent:
        yield Stmt(d["reparent"], many=reparent)
    yield from _collect_blobs(d, serde, thread_id)


def delete_for_runs(
    d: SqlDialect, serde: SerializerProtocol, run_ids: Sequence[str]
) -> Op[None]:
    """``delete_for_runs``: the checkpoints whose metadata names one of these runs.

    SQL narrows the rows down with the metadata's JSON where it can read it (a
    serializer whose metadata is not JSON, e.g. an encrypted one, leaves every
    row to check); each candidate's metadata is then decoded and checked here.
    Per thread, under its lock: the checkpoints go with their pending writes;
    writes a deleted checkpoint's row kept for a parent that stays move to rows
    of their own; children of deleted checkpoints are re-parented; values no
    remaining checkpoint reads are deleted.
    """
    wanted = sorted({str(run_id) for run_id in run_ids})
    doomed: dict[str, set[tuple[str, str]]] = {}
    for start in range(0, len(wanted), RUNS_PER_STATEMENT):
        chunk = wanted[start : start + RUNS_PER_STATEMENT]
        conditions = [metadata_condition(d, {"run_id": run_id}) for run_id in chunk]
        sql, params = d["metadata_select"], []
        if all(cond is not None for cond in conditions):
            sql += " WHERE " + " OR ".join(cond[0] for cond in conditions if cond)
            params = [p for cond in conditions if cond for p in cond[1]]
        rows: Rows = yield Stmt(sql, params, fetch=True)
        for thread_id, ns, checkpoint_id, type_tag, payload in rows:
            where = f"metadata of checkpoint {checkpoint_id!r} of thread {thread_id!r}"
            metadata = load_stored(serde, (type_tag, bytes(payload)), where)
            run_id = metadata.get("run_id") if isinstance(metadata, dict) else None
            if run_id is not None and str(run_id) in chunk:
                doomed.setdefault(str(thread_id), set()).add((ns, checkpoint_id))
    for thread_id in sorted(doomed):
        yield from _delete_checkpoints(d, serde, thread_id, doomed[thread_id])


def _delete_checkpoints(
    d: SqlDialect,
    serde: SerializerProtocol,
    thread_id: str,
    doomed: set[tuple[str, str]],
) -> Op[None]:
    """Delete some checkpoints of a thread, keeping the rest a tree (see above)."""
    yield from _lock(d, thread_id)
    tree: Rows
    kept_with_child: Rows
    tree, kept_with_child = yield (
        Stmt(d["thread_tree"], (thread_id,), fetch=True),
        Stmt(d["thread_parent_writes"], (thread_id,), fetch=True),
    )
    parents_by_ns: dict[str, dict[str, str | None]] = {}
    for ns, checkpoint_id, parent_id in tree:
        parents_by_ns.setdefault(ns, {})[checkpoint_id] = parent_id
    drop = [
        (thread_id, ns, cid)
        for ns, cid in sorted(doomed)
        if cid in parents_by_ns.get(ns, {})
    ]
    if not drop:
        return
    moved_writes = [
        (thread_id, ns, parent, task_id, 0, WRITES_CHANNEL, WRITES_TAG, entry, path)
        for ns, child, parent, payload in kept_with_child
        if (ns, child) in doomed
        and parent is not None
        and (ns, parent) not in doomed
        and parent in parents_by_ns.get(ns, {})
        for task_id, path, entry in unpack_task_writes(
            bytes(payload), f"entry of writes in checkpoint {child!r} of {thread_id!r}"
        )
    ]
    reparent = [
        (parent, thread_id, ns, cid)
        for ns, parents in parents_by_ns.items()
        for cid, parent in reparent_survivors(
            parents, [c for n, c in doomed if n == ns]
        ).items()
    ]
    yield Stmt(d["delete_checkpoint_writes"], many=drop)
    if moved_writes:
        yield Stmt(d["insert_write_keep"], many=moved_writes)
    yield Stmt(d["delete_checkpoint"], many=drop)
    if reparent:
        yield Stmt(d["reparent"], many=reparent)
    yield from _collect_blobs(d, serde, thread_id)


def _collect_blobs(
    d: SqlDialect, serde: SerializerProtocol, thread_id: str
) -> Op[None]:
    """Delete the stored values no remaining checkpoint of the thread reads."""
    kept, stored = yield (
        Stmt(d["thread_checkpoints"], (thread_id,), fetch=True),
        Stmt(d["thread_blob_keys"], (thread_id,), fetch=True),
    )
    wanted: list[BlobKey] = []
    for ns, type_tag, payload, *_metadata in kept:
        where = f"checkpoint of thread {thread_id!r}"
        checkpoint = unpack_structure(
            load_stored(serde, (type_tag, bytes(payload)), where), where
        )
        wanted.extend(
            (ns, channel, str(version))
            for channel, version in checkpoint["channel_versions"].items()
        )
    base_of: dict[BlobKey, str | None] = {
        (ns, channel, version): base if kind == "delta" else None
        for ns, channel, version, kind, base in stored
    }
    live = live_blob_keys(wanted, base_of)
    dead = [(thread_id, *key) for key in base_of if key not in live]
    if dead:
        yield Stmt(d["delete_blob"], many=dead)


def set_ttl(d: SqlDialect, thread_id: str, deadline: datetime | None) -> Op[None]:
    """Set (or, with None, clear) a thread's expiry deadline."""
    if deadline is None:
        yield Stmt(d["delete_ttl"], (thread_id,))
    else:
        yield Stmt(d["upsert_ttl"], (thread_id, d.timestamp(deadline)))


def sweep_expired(d: SqlDialect, now: datetime) -> Op[list[str]]:
    """Delete the threads whose deadline has passed; their ids, sorted."""
    rows: Rows = yield Stmt(d["expired_threads"], (d.timestamp(now),), fetch=True)
    expired = sorted(str(row[0]) for row in rows)
    for thread_id in expired:
        yield from delete_thread(d, thread_id)
    return expired

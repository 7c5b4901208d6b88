"""Write operations of the SQL savers: put (optionally with a step's last writes)
and put_writes. Semantics are InMemorySaver's, statement for statement.

* Fencing: when the config carries ``EXPECTED_HEAD``, the thread's writers are
  serialized (Postgres: a transaction-scoped advisory lock; SQLite: the
  ``BEGIN IMMEDIATE`` write lock) and the newest checkpoint id is compared with
  it before anything is written; a mismatch raises and the transaction rolls
  back, so a refused write leaves no trace.
* Round trips: at most one batch of reads (head, delta bases), then the inserts
  and the commit, which a pipelining driver sends together. Where the database
  checks the head itself (Postgres), a put without deltas is one round trip.
* Channel values are written once per (thread, namespace, channel, version);
  list channels that only grew are written as deltas on their base version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine._internal._constants import (
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
)
from engine._internal._typing import RunnableConfig
from engine.checkpoint._blobs import BlobRecord, dumps_structure, encode_blob
from engine.checkpoint._sqlcore.dialect import Op, Rows, SqlDialect, Stmt
from engine.checkpoint.base import (
    EXPECTED_HEAD,
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    config_for,
    conflict,
    require_thread_id,
    ttl_deadline,
)
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("TaskWrites", "put", "put_writes")

TaskWrites = tuple[str, str, Sequence[tuple[str, Any]]]
"""(task_id, task_path, writes) saved against the parent checkpoint by ``put_step``."""


def put(
    d: SqlDialect,
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    task_writes: Sequence[TaskWrites] = (),
    default_ttl: float | None = None,
) -> Op[RunnableConfig]:
    """Store a checkpoint (and, for ``put_step``, the writes that precede it)."""
    conf = config.get("configurable", {})
    thread_id = require_thread_id(config)
    ns = conf.get(CONFIG_KEY_CHECKPOINT_NS) or ""
    parent_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
    # Serialize everything that does not depend on stored rows first (outside
    # the transaction: see Op).
    values = checkpoint.get("channel_values", {})
    deltas = checkpoint.get("channel_deltas", {})
    stored = {
        k: v
        for k, v in checkpoint.items()
        if k not in ("channel_values", "channel_deltas")
    }
    checkpoint_typed = dumps_structure(serde, stored)
    metadata_typed = serde.dumps_typed(dict(metadata))
    blobs: dict[str, BlobRecord] = {}
    delta_bases: dict[str, str] = {}
    for channel in new_versions:
        if channel not in values:
            blobs[channel] = BlobRecord("empty", "empty", b"")
        elif (delta := deltas.get(channel)) is not None and isinstance(
            values[channel], list
        ):
            delta_bases[channel] = str(delta[0])
        else:
            blobs[channel] = encode_blob(serde, values[channel], None, None)
    write_rows = [
        row
        for task_id, task_path, writes in (task_writes if parent_id is not None else ())
        for row in _encode_writes(serde, writes, task_id, task_path)
    ]
    deadline = ttl_deadline(default_ttl) if default_ttl is not None else None

    # What stored rows must tell before anything is written, asked in one batch:
    # the head (fencing, after taking the thread lock) and the chain bookkeeping
    # of the versions the new deltas extend.
    asks: list[Stmt] = []
    head_at = bases_at = -1  # where their rows come back in the batch
    if EXPECTED_HEAD in conf:
        if d.expect_head is not None:  # checked by the database: nothing to fetch
            yield Stmt(d.expect_head, (thread_id, ns, conf[EXPECTED_HEAD]))
        else:
            if d.lock_thread is not None:
                asks.append(Stmt(d.lock_thread, (thread_id,)))
            head_at = len(asks)
            asks.append(Stmt(d["head"], (thread_id, ns), fetch=True))
    if delta_bases:
        keys = sorted((thread_id, ns, ch, v) for ch, v in delta_bases.items())
        bases_at = len(asks)
        asks.append(Stmt(d["blob_bases"], d.keys_param(keys, 4), fetch=True))
    answers: list[Rows] = list((yield tuple(asks))) if asks else []
    if head_at >= 0:
        head = answers[head_at][0][0] if answers[head_at] else None
        if head != conf[EXPECTED_HEAD]:
            raise conflict(thread_id, ns, conf[EXPECTED_HEAD], head)
    if bases_at >= 0:
        bases = {
            (r[0], r[1]): BlobRecord(r[2], "", b"", None, None, r[3], r[4], r[5])
            for r in answers[bases_at]
        }
        for channel, base_version in delta_bases.items():
            blobs[channel] = encode_blob(
                serde,
                values[channel],
                (base_version, deltas[channel][1]),
                bases.get((channel, base_version)),
            )
    if write_rows:
        yield from _insert_writes(d, thread_id, ns, str(parent_id), write_rows)
    if blobs:
        yield Stmt(
            d["insert_blob"],
            many=[
                (thread_id, ns, channel, str(new_versions[channel]), *record)
                for channel, record in blobs.items()
            ],
        )
    row = (
        thread_id,
        ns,
        checkpoint["id"],
        parent_id,
        *checkpoint_typed,
        *metadata_typed,
    )
    yield Stmt(d["insert_checkpoint"], d.checkpoint_params(row))
    if deadline is not None:
        yield Stmt(d["upsert_ttl"], (thread_id, d.timestamp(deadline)))
    return config_for(thread_id, ns, checkpoint["id"])


def put_writes(
    d: SqlDialect,
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> Op[None]:
    """Store a task's writes against the checkpoint ``config`` addresses.

    Regular writes are idempotent (a second save of the same task index keeps the
    first); special writes (error, interrupt, resume) replace.
    """
    conf = config.get("configurable", {})
    thread_id = require_thread_id(config)
    ns = conf.get(CONFIG_KEY_CHECKPOINT_NS) or ""
    checkpoint_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
    if checkpoint_id is None:
        raise ValueError("put_writes() needs a config that addresses a checkpoint_id")
    rows = _encode_writes(serde, writes, task_id, task_path)
    if rows:
        yield from _insert_writes(d, thread_id, ns, str(checkpoint_id), rows)


# -- pieces ------------------------------------------------------------------------

_WriteRow = tuple[str, int, str, str, bytes, str]
"""(task_id, idx, channel, type, payload, task_path)"""


def _encode_writes(
    serde: SerializerProtocol,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> list[_WriteRow]:
    return [
        (
            task_id,
            WRITES_IDX_MAP.get(channel, idx),
            channel,
            *serde.dumps_typed(value),
            task_path,
        )
        for idx, (channel, value) in enumerate(writes)
    ]


def _insert_writes(
    d: SqlDialect, thread_id: str, ns: str, checkpoint_id: str, rows: list[_WriteRow]
) -> Op[None]:
    keep = [(thread_id, ns, checkpoint_id, *row) for row in rows if row[1] >= 0]
    replace = [(thread_id, ns, checkpoint_id, *row) for row in rows if row[1] < 0]
    if keep:
        yield Stmt(d["insert_write_keep"], many=keep)
    if replace:
        yield Stmt(d["insert_write_replace"], many=replace)

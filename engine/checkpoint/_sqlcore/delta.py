"""The SQL savers' ``get_delta_channel_history``: the ancestor walk in one read
transaction, reading of each ancestor only its row, the values of the channels
still walked for, and its pending writes (two statements per ancestor)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from engine._internal._typing import RunnableConfig
from engine.checkpoint._blobs import BlobRecord, decode_blobs
from engine.checkpoint._delta_history import DeltaChannelHistory, DeltaNode, DeltaWalk
from engine.checkpoint._sqlcore.dialect import Op, Rows, SqlDialect, Stmt
from engine.checkpoint._sqlcore.reads import _lookup, _pending_writes, load_checkpoint
from engine.checkpoint.base import get_checkpoint_id, require_thread_id
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("delta_channel_history",)


def delta_channel_history(
    d: SqlDialect,
    serde: SerializerProtocol,
    config: RunnableConfig,
    channels: Sequence[str],
    now: datetime,
) -> Op[dict[str, DeltaChannelHistory]]:
    """Per channel, the seed and writes that rebuild it at the addressed checkpoint."""
    thread_id = require_thread_id(config)
    ns = config.get("configurable", {}).get("checkpoint_ns") or ""
    checkpoint_id = get_checkpoint_id(config)
    ts = d.timestamp(now)
    rows: Rows
    if checkpoint_id is None:
        rows = yield Stmt(d["get_latest"], (thread_id, ns, thread_id, ts), fetch=True)
    else:
        params = (thread_id, ns, str(checkpoint_id), thread_id, ts)
        rows = yield Stmt(d["get_by_id"], params, fetch=True)
    target = None
    if rows:
        checkpoint = load_checkpoint(serde, rows[0])
        target = DeltaNode(
            rows[0][2], rows[0][3], checkpoint["channel_versions"], {}, ()
        )
    walk = DeltaWalk(channels, target)
    while walk.next_id is not None:
        params = (thread_id, ns, walk.next_id, thread_id, ts)
        rows = yield Stmt(d["get_by_id"], params, fetch=True)
        node = (
            (yield from _node(d, serde, rows[0], walk.open_channels)) if rows else None
        )
        walk.visit(node)
    return walk.result()


def _node(
    d: SqlDialect, serde: SerializerProtocol, row: tuple[Any, ...], wanted: list[str]
) -> Op[DeltaNode]:
    thread_id, ns, checkpoint_id, parent_id = row[0], row[1], row[2], row[3]
    checkpoint = load_checkpoint(serde, row)
    inline = checkpoint.get("channel_values") or {}
    versions = checkpoint["channel_versions"]
    wanted_versions = {c: versions[c] for c in wanted if c in versions}
    blob_keys = sorted(
        (thread_id, ns, c, str(v))
        for c, v in wanted_versions.items()
        if c not in inline
    )
    keys_param = d.keys_param([(thread_id, ns, checkpoint_id)], 3)
    writes_stmts = (
        Stmt(d["writes_for_checkpoints"], keys_param, fetch=True),
        Stmt(d["child_writes_for_checkpoints"], keys_param, fetch=True),
    )
    blob_rows: Rows = []
    write_rows: Rows
    child_rows: Rows
    if blob_keys:
        blobs_stmt = Stmt(d["blobs_for_keys"], d.keys_param(blob_keys, 4), fetch=True)
        blob_rows, write_rows, child_rows = yield (blobs_stmt, *writes_stmts)
    else:
        write_rows, child_rows = yield writes_stmts
    blobs = {
        (b[0], b[1], b[2], b[3]): BlobRecord(
            b[4], b[5], bytes(b[6]), b[7], b[8], b[9], b[10], b[11]
        )
        for b in blob_rows
    }
    values = decode_blobs(
        serde, wanted_versions, _lookup(blobs, thread_id, ns), None, inline
    )
    pending = _pending_writes(serde, write_rows, child_rows)
    return DeltaNode(
        checkpoint_id,
        parent_id,
        versions,
        values,
        pending.get((thread_id, ns, checkpoint_id), []),
    )

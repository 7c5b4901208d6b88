"""Corrupt stored rows on purpose, the same way on every backend (serde safety tests)."""

from __future__ import annotations

from engine.checkpoint._blobs import BlobRecord
from engine.checkpoint._pending_writes import WRITES_CHANNEL
from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.memory import InMemorySaver
from tests._support.savers import SaverSpec

__all__ = ("tamper_blob", "tamper_checkpoint", "tamper_write")


def tamper_blob(
    saver: BaseCheckpointSaver,
    spec: SaverSpec,
    thread_id: str,
    channel: str,
    tag: str,
    payload: bytes,
) -> None:
    """Replace every stored value of ``channel`` with ``(tag, payload)``, stored whole."""
    if isinstance(saver, InMemorySaver):
        for key in [k for k in saver.blobs if k[0] == thread_id and k[2] == channel]:
            saver.blobs[key] = BlobRecord("full", tag, payload)
        return
    spec.execute(
        "UPDATE engine_checkpoint_blobs SET kind = 'full', type = %s, blob = %s, "
        "base_version = NULL WHERE thread_id = %s AND channel = %s",
        (tag, payload, thread_id, channel),
    )


def tamper_checkpoint(
    saver: BaseCheckpointSaver,
    spec: SaverSpec,
    thread_id: str,
    tag: str,
    payload: bytes,
) -> None:
    """Replace the stored checkpoint dict of every checkpoint of a thread."""
    if isinstance(saver, InMemorySaver):
        for rows in saver.storage[thread_id].values():
            for cid, (_, meta, parent, *_) in list(rows.items()):
                rows[cid] = ((tag, payload), meta, parent)
        return
    if spec.kind == "sqlite":
        spec.execute(
            "UPDATE engine_checkpoints SET checkpoint_type = %s, checkpoint = %s "
            "WHERE thread_id = %s",
            (tag, payload, thread_id),
        )
        return
    # Postgres validates its JSON column, so bad bytes can only sit in the raw one.
    spec.execute(
        "UPDATE engine_checkpoints SET checkpoint_type = %s, checkpoint = NULL, "
        "checkpoint_raw = %s WHERE thread_id = %s",
        (tag, payload, thread_id),
    )


def tamper_write(
    saver: BaseCheckpointSaver,
    spec: SaverSpec,
    thread_id: str,
    tag: str,
    payload: bytes,
) -> None:
    """Replace the value of every pending write of a thread."""
    if isinstance(saver, InMemorySaver):
        for key, bucket in list(saver.writes.items()):
            if key[0] != thread_id:
                continue
            if not isinstance(bucket, dict):  # a bucket of one entry
                if len(bucket) & 1:  # scalar writes, flat
                    task_id, path, idx = bucket[:3]
                    channel = WRITES_CHANNEL
                else:
                    task_id, channel, _, _, path, idx = bucket
                saver.writes[key] = (task_id, channel, tag, payload, path, idx)
                continue
            for wkey, (task_id, channel, _, path) in list(bucket.items()):
                bucket[wkey] = (task_id, channel, (tag, payload), path)
        return
    spec.execute(
        "UPDATE engine_checkpoint_writes SET type = %s, blob = %s WHERE thread_id = %s",
        (tag, payload, thread_id),
    )

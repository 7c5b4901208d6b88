"""Blame: which step and node last wrote a state key, and the chain of earlier writes.

A key was written in the step that made checkpoint X when its channel version
at X differs from the version at X's parent (or X is the first checkpoint and
holds it). The writing nodes are the ones whose update in X's
``metadata["writes"]`` names the key. The walk follows parent links backwards,
reading the saver's ``list()`` a page at a time (ancestors are always older,
so a page holds the next ones; other branches' checkpoints are skipped), and
stops after :data:`MAX_ENTRIES` writes or :data:`MAX_SCAN` checkpoints: the
view then offers to continue from where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.checkpoint.base import CheckpointTuple
from engine.constants import START
from studio.errors import NotFound
from studio.presentation.diff import MISSING, summarize
from studio.presenters import BlameEntry, BlameView
from studio.services.access import visible_thread
from studio.services.checkpoints import (
    ThreadHistory,
    checkpoint_id_of,
    parent_id_of,
    timestamp,
    writers,
)
from studio.services.fork_tree import edit_values

__all__ = ("MAX_ENTRIES", "MAX_SCAN", "blame")

MAX_ENTRIES = 20
MAX_SCAN = 300
_PAGE = 100


def blame(
    user: Any, thread_id: str, checkpoint_id: str, key: str, *, start: str = ""
) -> BlameView:
    """The writes of ``key`` that led to its value at ``checkpoint_id``, newest first.

    Args:
        key: the state key; "" asks which (the view has the keys and no entries).
        start: continue an earlier walk from this checkpoint (the ``more`` cursor).

    Raises:
        ThreadNotFound, CheckpointNotFound: unknown or invisible ids.
        NotFound: ``key`` is not a state key of the thread's graph.
    """
    history = ThreadHistory(visible_thread(user, thread_id))
    if key and key not in history.state_keys:
        raise NotFound(f"The state has no key {key!r}.", key=key)
    target = history.saved(checkpoint_id)
    if not key:
        return BlameView(
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            step=int((target.metadata or {}).get("step", -1)),
            key="",
            keys=history.state_keys,
            kind="",
            current=summarize(MISSING),
            entries=(),
        )
    current = history.values(target).get(key, MISSING)
    entries: list[BlameEntry] = []
    scanned = 0
    more = ""
    for child, parent in _pairs(history, history.saved(start) if start else target):
        scanned += 1
        entry = _write(child, parent, key, history)
        if entry is not None:
            entries.append(entry)
        if parent is not None and (len(entries) >= MAX_ENTRIES or scanned >= MAX_SCAN):
            more = checkpoint_id_of(parent.config)
            break
    metadata = target.metadata or {}
    return BlameView(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        step=int(metadata.get("step", -1)),
        key=key,
        keys=history.state_keys,
        kind=history.kinds.get(key, "value"),
        current=summarize(current),
        entries=tuple(entries),
        more=more,
        scanned=scanned,
    )


def _pairs(
    history: ThreadHistory, first: CheckpointTuple
) -> Iterator[tuple[CheckpointTuple, CheckpointTuple | None]]:
    """(checkpoint, its parent) along the parent chain, from ``first`` to the root."""
    child = first
    while True:
        wanted = parent_id_of(child)
        if not wanted:
            yield child, None
            return
        parent = None
        cursor = checkpoint_id_of(child.config)
        while parent is None:
            page = history.page(before=cursor, limit=_PAGE)
            parent = next(
                (t for t in page if checkpoint_id_of(t.config) == wanted), None
            )
            if parent is None:
                if len(page) < _PAGE:
                    yield child, None  # the parent is gone (pruned): stop here
                    return
                cursor = checkpoint_id_of(page[-1].config)
        yield child, parent
        child = parent


def _write(
    child: CheckpointTuple,
    parent: CheckpointTuple | None,
    key: str,
    history: ThreadHistory,
) -> BlameEntry | None:
    version = child.checkpoint.get("channel_versions", {}).get(key)
    before = (
        parent.checkpoint.get("channel_versions", {}).get(key)
        if parent is not None
        else None
    )
    if version is None or version == before:
        return None
    nodes, written = _writers_of(history.thread.thread_id, child, parent, key)
    metadata = child.metadata or {}
    return BlameEntry(
        checkpoint_id=checkpoint_id_of(child.config),
        step=int(metadata.get("step", -1)),
        source=str(metadata.get("source", "")),
        nodes=tuple(nodes) or ("",),
        written=tuple(summarize(value) for value in written),
        value=summarize(history.values(child).get(key, MISSING)),
        time=timestamp(child.checkpoint.get("ts")),
    )


def _writers_of(
    thread_id: str, child: CheckpointTuple, parent: CheckpointTuple | None, key: str
) -> tuple[list[str], list[Any]]:
    """The nodes that wrote ``key`` in the step that made ``child``, and what they wrote.

    An input or a state update records its values in the metadata. A loop step
    records only the keys each node wrote; the values are the parent's pending
    writes to the key (in the order the tasks finished).
    """
    nodes: list[str] = []
    values: list[Any] = []
    for node, update in writers(child.metadata).items():
        if isinstance(update, dict):
            if key in update:
                nodes.append(node)
                values.append(update[key])
        elif isinstance(update, list | tuple):
            found = [u[key] for u in update if isinstance(u, dict) and key in u]
            if found or key in update:
                nodes.append(node)
                values.extend(found)
    if not values and (child.metadata or {}).get("source") == "update":
        made = edit_values(thread_id, checkpoint_id_of(child.config)) or {}
        if key in made:
            values = [made[key]]
    if parent is not None and (parent.metadata or {}).get("source") == "input":
        # the first step applies the input, held by the parent's start channel
        given = parent.checkpoint.get("channel_values", {}).get(START)
        nodes = nodes or [START]
        if isinstance(given, dict) and key in given:
            values = [given[key]]
    if not values and parent is not None:
        values = [v for _, channel, v in parent.pending_writes or () if channel == key]
    return nodes, values

"""Read operations of the SQL savers: get_tuple, one page of list() or of
list_summaries(), stored_bytes.

A checkpoint is read in three statements whatever its size: its row, then, in
one batch, every channel value it names (delta chains followed by a recursive
query) and its pending writes. ``list()`` reads a page of checkpoints the same
way, still three statements per page; ``list_summaries()`` reads only the rows,
one statement per page. Metadata filters run in SQL (see ``filters``) and are
re-checked in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engine._internal._constants import (
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
)
from engine._internal._typing import RunnableConfig
from engine.checkpoint._blobs import (
    BlobRecord,
    decode_blobs,
    load_stored,
    restore_structure,
    unpack_structure,
)
from engine.checkpoint._pending_writes import (
    WRITES_CHANNEL,
    WRITES_TAG,
    is_packed,
    unpack_task_writes,
    unpack_writes,
)
from engine.checkpoint._sqlcore.dialect import Op, Rows, SqlDialect, Stmt
from engine.checkpoint._sqlcore.filters import metadata_condition
from engine.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    CheckpointSummary,
    CheckpointTuple,
    PendingWrite,
    config_for,
    metadata_matches,
    require_thread_id,
)
from engine.checkpoint.serde.base import SerializerProtocol
from engine.errors import SerializationError

__all__ = (
    "PAGE_SIZE",
    "BlobKey",
    "HeadGuess",
    "ListCursor",
    "Missed",
    "assemble_tuples",
    "checkpoints_of_rows",
    "get_tuple",
    "head_guess_stmts",
    "list_page",
    "load_checkpoint",
    "stored_bytes",
    "summaries_page",
    "split_reads",
    "tuple_of_guess",
    "value_and_write_reads",
)

PAGE_SIZE = 100
"""Checkpoints read per statement by ``list()``; pages are fetched as needed."""

ListCursor = tuple[str, str, str]
"""(checkpoint_id, thread_id, checkpoint_ns) of the last row of a page."""

_BlobKey = tuple[str, str, str, str]
_CheckpointKey = tuple[str, str, str]


class Missed:
    """A guessed head read that did not match (see :func:`tuple_of_guess`):
    the head's row, read with the lease, whose values and writes are still to
    read (:func:`tuple_of_row`)."""

    __slots__ = ("rows",)

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    def __repr__(self) -> str:
        return f"Missed({len(self.rows)} row)"


BlobKey = _BlobKey
"""(thread_id, checkpoint_ns, channel, version) of a stored value."""

HeadGuess = tuple[str, str, str, frozenset[_BlobKey], Mapping[_BlobKey, BlobRecord]]
"""(thread_id, checkpoint_ns, checkpoint_id, value keys, known values) of a
thread's head as its saver last saved it: the keys of every channel version it
records, and the records of those whose value the saver keeps (small values it
stored: a stored version never changes, so they need no read)."""


def get_tuple(
    d: SqlDialect, serde: SerializerProtocol, config: RunnableConfig, now: datetime
) -> Op[CheckpointTuple | None]:
    """The checkpoint ``config`` addresses (the newest when it names no id)."""
    rows: Rows = yield checkpoint_row(d, config, now)
    return (yield from tuple_of_row(d, serde, rows, newest=reads_newest(config)))


def reads_newest(config: RunnableConfig) -> bool:
    """Whether :func:`checkpoint_row` reads the newest checkpoint of its
    namespace (``config`` names no checkpoint id)."""
    return config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINT_ID) is None


def checkpoint_row(d: SqlDialect, config: RunnableConfig, now: datetime) -> Stmt:
    """The statement reading the row of the checkpoint ``config`` addresses."""
    conf = config.get("configurable", {})
    thread_id = require_thread_id(config)
    ns = conf.get(CONFIG_KEY_CHECKPOINT_NS) or ""
    checkpoint_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
    if checkpoint_id is None:
        params: tuple[Any, ...] = (thread_id, ns, thread_id, d.timestamp(now))
        return Stmt(d["get_latest"], params, fetch=True)
    params = (thread_id, ns, str(checkpoint_id), thread_id, d.timestamp(now))
    return Stmt(d["get_by_id"], params, fetch=True)


def tuple_of_row(
    d: SqlDialect, serde: SerializerProtocol, rows: Rows, *, newest: bool = False
) -> Op[CheckpointTuple | None]:
    """What :func:`checkpoint_row` read, as a full tuple (None: no such
    checkpoint); ``newest``: it is its namespace's newest (see :func:`load_tuples`)."""
    if not rows:
        return None
    loaded = yield from load_tuples(d, serde, rows, newest=newest)
    return loaded[0]


def list_page(
    d: SqlDialect,
    serde: SerializerProtocol,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    cursor: ListCursor | None,
    now: datetime,
) -> Op[tuple[list[CheckpointTuple], ListCursor | None]]:
    """One page of ``list()``, newest first, and the cursor of the next page.

    ``limit`` is how many matches the caller still wants. The next cursor is
    None when no rows are left.
    """
    sql, params, size = _page_query(
        d, d["list_select"], config, filter, before, limit, cursor, now
    )
    rows: Rows = yield Stmt(sql, params, fetch=True)
    next_cursor = _next_cursor(rows, size)
    metadata = [_metadata(serde, row) for row in rows]
    if filter:
        kept = [i for i, meta in enumerate(metadata) if metadata_matches(meta, filter)]
        rows = [rows[i] for i in kept]
        metadata = [metadata[i] for i in kept]
    if limit is not None:
        rows, metadata = rows[:limit], metadata[:limit]
    if not rows:
        return [], next_cursor
    loaded = yield from load_tuples(d, serde, rows, metadata)
    return loaded, next_cursor


def summaries_page(
    d: SqlDialect,
    serde: SerializerProtocol,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    cursor: ListCursor | None,
    now: datetime,
) -> Op[tuple[list[CheckpointSummary], ListCursor | None]]:
    """One page of ``list_summaries()``: ``list_page`` from the checkpoint rows
    alone (ids, metadata, creation time), one statement, no values or writes."""
    sql, params, size = _page_query(
        d, d["summary_select"], config, filter, before, limit, cursor, now
    )
    rows: Rows = yield Stmt(sql, params, fetch=True, last=True)
    next_cursor = _next_cursor(rows, size)
    result: list[CheckpointSummary] = []
    for row in rows:
        if limit is not None and len(result) >= limit:
            break
        thread_id, ns, checkpoint_id, parent_id = row[0], row[1], row[2], row[3]
        metadata = _metadata(
            serde, (thread_id, ns, checkpoint_id, None, None, None, row[4], row[5])
        )
        if filter and not metadata_matches(metadata, filter):
            continue
        ts = row[6]
        if ts is None and row[8] is not None:  # stored before the ts column
            where = _where(thread_id, checkpoint_id)
            stored = load_stored(serde, (row[7], bytes(row[8])), where)
            ts = stored.get("ts") if isinstance(stored, dict) else None
        result.append(
            CheckpointSummary(
                config_for(thread_id, ns, checkpoint_id),
                metadata,
                config_for(thread_id, ns, parent_id) if parent_id else None,
                ts,
            )
        )
    return result, next_cursor


def _page_query(
    d: SqlDialect,
    select: str,
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    cursor: ListCursor | None,
    now: datetime,
) -> tuple[str, tuple[Any, ...], int]:
    """The statement reading one page (newest first), its parameters, its size."""
    conf = (config or {}).get("configurable", {})
    ph = d.placeholder
    where: list[str] = []
    params: list[Any] = []
    if (thread_id := conf.get(CONFIG_KEY_THREAD_ID)) is not None:
        where += [f"c.thread_id = {ph}", d["thread_not_expired"]]
        params += [str(thread_id), str(thread_id), d.timestamp(now)]
    else:
        where.append(d["not_expired"])
        params.append(d.timestamp(now))
    if (ns := conf.get(CONFIG_KEY_CHECKPOINT_NS)) is not None:
        where.append(f"c.checkpoint_ns = {ph}")
        params.append(ns)
    if (checkpoint_id := conf.get(CONFIG_KEY_CHECKPOINT_ID)) is not None:
        where.append(f"c.checkpoint_id = {ph}")
        params.append(str(checkpoint_id))
    before_id = (before or {}).get("configurable", {}).get(CONFIG_KEY_CHECKPOINT_ID)
    if before_id is not None:
        where.append(f"c.checkpoint_id < {ph}")
        params.append(str(before_id))
    if cursor is not None:
        # The first condition lets the index range-scan; the row comparison
        # breaks ties between threads and namespaces sharing an id.
        where.append(
            f"c.checkpoint_id <= {ph} AND "
            f"(c.checkpoint_id, c.thread_id, c.checkpoint_ns) < ({ph}, {ph}, {ph})"
        )
        params.extend((cursor[0], *cursor))
    if filter and (condition := metadata_condition(d, filter)) is not None:
        where.append(condition[0])
        params.extend(condition[1])
    size = PAGE_SIZE if limit is None else max(1, min(limit, PAGE_SIZE))
    sql = (
        f"{select} WHERE {' AND '.join(where)} "
        "ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC "
        f"LIMIT {ph}"
    )
    return sql, (*params, size), size


def _next_cursor(rows: Rows, size: int) -> ListCursor | None:
    return (rows[-1][2], rows[-1][0], rows[-1][1]) if len(rows) == size else None


def stored_bytes(d: SqlDialect, thread_id: str) -> Op[int]:
    """Bytes of serialized payloads stored for a thread (see BaseCheckpointSaver)."""
    rows: Rows = yield Stmt(d["stored_bytes"], (thread_id,) * 3, fetch=True, last=True)
    return sum(int(part) for part in rows[0])


# -- rows -> tuples ----------------------------------------------------------------


def load_tuples(
    d: SqlDialect,
    serde: SerializerProtocol,
    rows: Rows,
    metadata: Sequence[CheckpointMetadata] | None = None,
    *,
    newest: bool = False,
) -> Op[list[CheckpointTuple]]:
    """Checkpoint rows (``_SELECT_CHECKPOINT``) -> full tuples, in one batch of
    statements: the channel values, the pending writes (in the writes table
    and in a child's row). That batch is the operation's last (a driver
    commits in its round trip).

    ``newest``: the rows are the newest of their namespace, read in this
    transaction, so no child row can hold their writes (a child sorts after
    its parent): that lookup is left out.
    """
    checkpoints, blob_keys = checkpoints_of_rows(serde, rows)
    checkpoint_keys = {(row[0], row[1], row[2]) for row in rows}
    results = yield value_and_write_reads(d, checkpoint_keys, blob_keys, newest=newest)
    return assemble_tuples(
        serde, rows, checkpoints, *split_reads(results, blob_keys), metadata
    )


def value_and_write_reads(
    d: SqlDialect,
    checkpoint_keys: Iterable[_CheckpointKey],
    blob_keys: Iterable[_BlobKey],
    *,
    newest: bool,
) -> tuple[Stmt, ...]:
    """What full tuples of checkpoints need besides their rows, the
    operation's last batch: the values (none when no key), the writes in the
    writes table, and unless ``newest`` (no child row can hold them: a child
    sorts after its parent) those kept in a child's row. Results in that order
    (:func:`split_reads`)."""
    keys_param = d.keys_param(sorted(checkpoint_keys), 3)
    stmts: tuple[Stmt, ...] = (
        Stmt(d["writes_for_checkpoints"], keys_param, fetch=True, last=newest),
    )
    if not newest:
        stmts += (
            Stmt(d["child_writes_for_checkpoints"], keys_param, fetch=True, last=True),
        )
    blob_keys = sorted(blob_keys)
    if blob_keys:
        stmts = (
            Stmt(d["blobs_for_keys"], d.keys_param(blob_keys, 4), fetch=True),
            *stmts,
        )
    return stmts


def split_reads(
    results: Sequence[Rows], blob_keys: Collection[_BlobKey]
) -> tuple[Rows, Rows, Rows]:
    """The value, write and child-row write rows of :func:`value_and_write_reads`
    for ``blob_keys`` (the same keys), empty when not read."""
    blob_rows: Rows = []
    if blob_keys:
        blob_rows, *results = results
    write_rows, *child = results
    return blob_rows, write_rows, child[0] if child else []


def checkpoints_of_rows(
    serde: SerializerProtocol, rows: Rows
) -> tuple[list[Checkpoint], set[_BlobKey]]:
    """The checkpoints of rows (values still to fill in) and the keys of the
    values they need from the blobs table (those not inline in the row)."""
    checkpoints: list[Checkpoint] = []
    blob_keys: set[_BlobKey] = set()
    for row in rows:
        thread_id, ns = row[0], row[1]
        checkpoint = load_checkpoint(serde, row)
        checkpoints.append(checkpoint)
        inline = checkpoint.get("channel_values") or {}
        for channel, version in checkpoint["channel_versions"].items():
            if channel not in inline:
                blob_keys.add((thread_id, ns, channel, str(version)))
    return checkpoints, blob_keys


def assemble_tuples(
    serde: SerializerProtocol,
    rows: Rows,
    checkpoints: list[Checkpoint],
    blob_rows: Rows,
    write_rows: Rows,
    child_rows: Rows,
    metadata: Sequence[CheckpointMetadata] | None = None,
    *,
    known: Mapping[_BlobKey, BlobRecord] | None = None,
) -> list[CheckpointTuple]:
    """Full tuples from checkpoint rows, their checkpoints
    (:func:`checkpoints_of_rows`), and the value and write rows read for them;
    ``known``: records of values not read (the saver's own, see ``HeadGuess``)."""
    blobs: dict[_BlobKey, BlobRecord] = dict(known) if known else {}
    blobs |= {
        (b[0], b[1], b[2], b[3]): BlobRecord(
            b[4], b[5], bytes(b[6]), b[7], b[8], b[9], b[10], b[11]
        )
        for b in blob_rows
    }
    pending = _pending_writes(serde, write_rows, child_rows)
    result: list[CheckpointTuple] = []
    shared: dict[int, Any] = {}  # blobs outlive the loop: record ids stay unique
    for i, (row, checkpoint) in enumerate(zip(rows, checkpoints, strict=True)):
        thread_id, ns, checkpoint_id, parent_id = row[0], row[1], row[2], row[3]
        checkpoint["channel_values"] = decode_blobs(
            serde,
            checkpoint["channel_versions"],
            _lookup(blobs, thread_id, ns),
            shared,
            checkpoint.get("channel_values"),
        )
        meta = metadata[i] if metadata is not None else _metadata(serde, row)
        result.append(
            CheckpointTuple(
                config=config_for(thread_id, ns, checkpoint_id),
                checkpoint=checkpoint,
                metadata=meta,
                parent_config=(
                    config_for(thread_id, ns, parent_id) if parent_id else None
                ),
                pending_writes=pending.get((thread_id, ns, checkpoint_id), []),
            )
        )
    return result


def head_guess_stmts(d: SqlDialect, guess: HeadGuess) -> tuple[Stmt, ...]:
    """The reads a newest checkpoint needs (:func:`value_and_write_reads`),
    sent before its row is known, for the head ``guess`` names."""
    thread_id, ns, checkpoint_id, keys, known = guess
    return value_and_write_reads(
        d, [(thread_id, ns, checkpoint_id)], keys - known.keys(), newest=True
    )


def tuple_of_guess(
    serde: SerializerProtocol, rows: Rows, guess: HeadGuess, results: Sequence[Rows]
) -> CheckpointTuple | None | Missed:
    """The newest checkpoint's tuple from its row and what
    :func:`head_guess_stmts` read (``results``, in order); :class:`Missed` with
    the row when it is not the guessed head or needs a value the guess did not
    read."""
    if not rows:
        return None
    if rows[0][2] != guess[2]:
        return Missed(rows)
    checkpoints, needed = checkpoints_of_rows(serde, rows)
    keys, known = guess[3], guess[4]
    if not needed <= keys:
        return Missed(rows)
    blob_rows, write_rows, child_rows = split_reads(results, keys - known.keys())
    return assemble_tuples(
        serde, rows, checkpoints, blob_rows, write_rows, child_rows, known=known
    )[0]


def _pending_writes(
    serde: SerializerProtocol, write_rows: Rows, child_rows: Rows
) -> dict[_CheckpointKey, list[PendingWrite]]:
    """Each checkpoint's pending writes, from its rows of writes and from its
    child's row, ordered by task path, task id, then index (``_writes``).

    A task's regular writes found in both places (only when saved twice, the
    second time against a checkpoint that already had a child) are the child
    row's: saved with the step, they were the first.
    """
    entries: dict[_CheckpointKey, list[tuple[str, str, int, str, str, bytes]]] = {}
    in_child: set[tuple[_CheckpointKey, str]] = set()
    for thread_id, ns, checkpoint_id, payload in child_rows:
        if payload is None:
            continue
        key = (thread_id, ns, checkpoint_id)
        found = entries.setdefault(key, [])
        where = f"entry of the writes of {_where(thread_id, checkpoint_id)}"
        for task_id, path, entry in unpack_task_writes(bytes(payload), where):
            found.append((path, task_id, 0, WRITES_CHANNEL, WRITES_TAG, entry))
            in_child.add((key, task_id))
    for w in write_rows:
        key = (w[0], w[1], w[2])
        if w[8] >= 0 and (key, w[3]) in in_child:
            continue
        entries.setdefault(key, []).append((w[7], w[3], w[8], w[4], w[5], bytes(w[6])))
    pending: dict[_CheckpointKey, list[PendingWrite]] = {}
    for key, found in entries.items():
        where = f"write of {_where(key[0], key[2])}"
        writes = pending[key] = []
        for _path, task_id, _idx, channel, tag, payload in sorted(found):
            if is_packed(channel, tag):
                writes.extend(
                    (task_id, name, load_stored(serde, (item_tag, item), where))
                    for name, item_tag, item in unpack_writes(payload, f"{where}s")
                )
            else:
                writes.append(
                    (task_id, channel, load_stored(serde, (tag, payload), where))
                )
    return pending


def load_checkpoint(serde: SerializerProtocol, row: tuple[Any, ...]) -> Checkpoint:
    """The checkpoint dict (without values) of a ``_SELECT_CHECKPOINT`` row."""
    where = _where(row[0], row[2])
    stored = unpack_structure(load_stored(serde, (row[4], bytes(row[5])), where), where)
    if not isinstance(stored, dict):
        raise SerializationError(
            f"Stored {_where(row[0], row[2])} is corrupt: not a checkpoint"
        )
    checkpoint: Checkpoint = restore_structure(stored, row[2], row[8])  # type: ignore[assignment]
    return checkpoint


def _lookup(
    blobs: dict[_BlobKey, BlobRecord], thread_id: str, ns: str
) -> Callable[[str, str], BlobRecord | None]:
    def lookup(channel: str, version: str) -> BlobRecord | None:
        return blobs.get((thread_id, ns, channel, version))

    return lookup


def _metadata(serde: SerializerProtocol, row: tuple[Any, ...]) -> CheckpointMetadata:
    typed = (row[6], bytes(row[7]))
    try:  # the error's wording is load_stored's, built only when needed
        metadata: CheckpointMetadata = serde.loads_typed(typed)
    except Exception:
        load_stored(serde, typed, f"metadata of {_where(row[0], row[2])}")
        raise
    return metadata


def _where(thread_id: str, checkpoint_id: str) -> str:
    return f"checkpoint {checkpoint_id!r} of thread {thread_id!r}"

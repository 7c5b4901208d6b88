"""Write operations of the SQL savers: put (optionally with a step's last writes),
put_steps (several of those, and writes-only entries, in one transaction) and
put_writes. Semantics are InMemorySaver's, statement for statement.

* Fencing: when a checkpoint's config carries ``EXPECTED_HEAD``, the thread's
  writers are serialized (Postgres: a transaction-scoped advisory lock; SQLite:
  the ``BEGIN IMMEDIATE`` write lock) and the newest checkpoint id is compared
  with it before that checkpoint is written; a mismatch raises and the
  transaction rolls back, so a refused write leaves no trace. In a batch each
  entry is checked in turn, against the head as the entries before it left it
  (the database checks it after their inserts, or, where the head is fetched,
  it is fetched once and advanced in Python exactly as the inserts advance it).
* Round trips: at most one batch of reads (heads, delta bases neither written
  by the batch itself nor known from the saver's earlier saves: ``ChainBook``),
  then the inserts and the commit, which a pipelining driver sends together.
  Where the database checks the head itself (Postgres), a put or a batch is one
  round trip, deltas included when their bases are known, and one more each time
  its payloads pass ``FLUSH_BYTES`` (the pipeline is drained before more values
  are serialized).
* Serializing: a checkpoint's structure and metadata before the transaction, its
  values and writes inside it, entry by entry, just before their rows are sent,
  so a batch of large values never holds them all serialized. Where the dialect
  can put parts together (Postgres), a value whose JSON passes ``PART_BYTES`` (a
  long list, or a state dict holding one) is serialized and sent a part at a
  time, so not even one value is held serialized whole. A value that cannot be
  stored fails the transaction: nothing of the batch is kept, parts included.
* Channel values are written once per (thread, namespace, channel, version);
  list channels that only grew are written as deltas on their base version.
* Storage layout: the checkpoint dict is stored without its ``id`` (the
  ``checkpoint_id`` column) and its ``ts`` (the ``ts`` column), which reads put
  back (see ``reads.load_checkpoint``), with its versions packed
  (``_blobs.pack_structure``); its values are rows of ``engine_checkpoint_blobs``
  (scalars too, unless ``_blobs.INLINE_SCALARS``). A task's writes are one row
  for its regular writes and one per special write (``engine.checkpoint._pending_writes``);
  the regular writes a fenced ``put_step`` saves with the checkpoint that follows
  them go in that checkpoint's row (``parent_writes``) instead.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine._internal import _faults
from engine._internal._constants import (
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
)
from engine._internal._typing import RunnableConfig
from engine.checkpoint._blobs import (
    EMPTY_RECORD,
    BlobRecord,
    dumps_structure,
    encode_blob,
    encode_delta,
    full_record,
    inline_values,
    stored_structure,
)
from engine.checkpoint._lease import held_lease, lease_lost
from engine.checkpoint._pending_writes import encode_task_writes, pack_task_writes
from engine.checkpoint._sqlcore.dialect import Op, Rows, SqlDialect, Stmt
from engine.checkpoint.base import (
    EXPECTED_HEAD,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    StepSave,
    config_for,
    conflict,
    require_thread_id,
    ttl_deadline,
)
from engine.checkpoint.serde.base import SerializerProtocol
from engine.checkpoint.serde.jsonplus import PlainDict

__all__ = (
    "GUESS_VALUE_BYTES",
    "ChainBook",
    "Staged",
    "TaskWrites",
    "put",
    "put_steps",
    "put_writes",
)

TaskWrites = tuple[str, str, Sequence[tuple[str, Any]]]
"""(task_id, task_path, writes) saved against the parent checkpoint by ``put_step``."""

_UNFENCED = object()
"""``_Entry.expected`` of an entry that carries no ``EXPECTED_HEAD``."""

_BlobKey = tuple[str, str, str, str]

GUESS_VALUE_BYTES = 1024
"""Values whose payload is at most this many bytes are kept, as stored, in the
saver's guess of the thread's head (``Staged.values``), so a resumed run's take
needs no read of them (``reads.head_guess_stmts``)."""


@dataclass(slots=True)
class Staged:
    """What an operation stored that its saver keeps once the transaction
    committed (never before: a rolled-back save must leave no trace)."""

    chains: dict[_BlobKey, BlobRecord] = field(default_factory=dict)
    """Chain bookkeeping of the list values stored (see ``ChainBook``)."""
    values: dict[_BlobKey, BlobRecord] = field(default_factory=dict)
    """The records of the small whole values fenced saves stored
    (``GUESS_VALUE_BYTES``), as sent: a stored version never changes, so the
    saver may serve them to its own later reads of the head
    (``SqlCheckpointSaver._remember_heads``). Fenced only: a run's versions are
    new, so its row is the one kept; an unfenced put of a version stored before
    (by a caller re-saving a checkpoint) keeps the earlier row, which a guess
    must not contradict."""


FLUSH_BYTES = 256 * 1024
"""A batch sends the rows it gathered once their payloads pass this many bytes,
before serializing its next entry (on Postgres, and waits for the server to take
them: ``SqlDialect.drain``): the 64 saves a run may queue then never hold more
than about this much serialized at once (plus one entry's own), however large
their values. Smaller batches still go in one statement per table and, on
Postgres, one round trip."""

PART_BYTES = 32 * 1024
"""A value whose serialized form passes this many bytes is sent in parts of
about this size, each serialized just before it is sent, where the dialect can
put parts together (Postgres: ``insert_blob_part`` and ``join_blob_parts``) and
the serializer writes in pieces (``dumps_typed_pieces``). A large state is then
never held serialized whole, nor copied whole by the driver: a run's peak
memory stays near the value itself. Smaller values go as one row, as before."""

_WriteRow = tuple[str, int, str, str, bytes, str]
"""(task_id, idx, channel, type, payload, task_path)"""


@dataclass(slots=True)
class _Entry:
    """One entry of a batch: its structure and metadata serialized, its values and
    writes once its turn comes (:func:`_encode`)."""

    thread_id: str
    ns: str
    checkpoint_id: str | None
    """The checkpoint stored; None for a writes-only entry."""
    target_id: str | None
    """The checkpoint the writes are saved against (a checkpoint's parent)."""
    expected: Any = _UNFENCED
    row: tuple[Any, ...] | None = None
    """``insert_checkpoint``'s row, before ``dialect.checkpoint_params``; its last
    column holds the regular writes kept in the row (``_keeps_writes_in_row``),
    which are then not in ``write_rows``."""
    versions: dict[str, str] = field(default_factory=dict)
    blobs: dict[str, BlobRecord] = field(default_factory=dict)
    deltas: dict[str, tuple[str, int, Any]] = field(default_factory=dict)
    """channel -> (base version, start, value) of the list channels that may be
    stored as deltas (decided once the base's chain bookkeeping is known)."""
    write_rows: list[_WriteRow] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    """channel -> value stored whole, serialized when the entry's rows are made
    (``_encode``), so a batch holds the payloads of a few entries at a time."""
    task_writes: Sequence[TaskWrites] = ()
    """The writes saved against ``target_id``, serialized with the values."""
    deadline: datetime | None = None
    lease: tuple[str, str] | None = None
    """``(lease_checkpoint_ns, holder)`` of a save fenced by a thread lease."""
    lists: set[str] = field(default_factory=set)
    """Channels whose value is a list: only they can be a later delta's base, so
    only theirs go to the :class:`ChainBook` (a counter's never would be read)."""
    sent: set[str] = field(default_factory=set)
    """Channels whose value is already stored, sent in parts (``_send_in_parts``):
    their record in ``blobs`` is bookkeeping only."""


class ChainBook:
    """The chain bookkeeping (kind, length, bytes; no payload) of the values a
    saver stored, so that the next step's delta on one of them needs no read.

    A loop's step writes its list channels as deltas on the versions the step
    before stored; those rows' bookkeeping decides whether the new value is a
    delta or a full copy (``_blobs.encode_blob``). Reading it back costs a round
    trip per save; the saver that wrote it knows it. Used only for fenced saves:
    their head check (in the same transaction) proves the parent checkpoint, and
    so the base value it names, is still stored. Should another writer have
    stored that version first (its row is the one kept), the figures may differ
    from the row's, which only shifts when the next full copy is written. Staged
    by the operation (``staged``), kept when the saver's commit succeeded (:meth:`keep`).
    Bounded: the oldest entries go first.
    """

    __slots__ = ("_known", "_lock", "_size")

    def __init__(self, size: int = 4096) -> None:
        self._known: dict[_BlobKey, BlobRecord] = {}
        self._lock = threading.Lock()
        self._size = size

    def get(self, key: _BlobKey) -> BlobRecord | None:
        return self._known.get(key)

    def keep(self, records: dict[_BlobKey, BlobRecord]) -> None:
        """Remember what an operation staged, once its transaction committed."""
        if not records:
            return
        with self._lock:
            known = self._known
            for key, record in records.items():
                known.pop(key, None)
                known[key] = record
            while len(known) > self._size:
                del known[next(iter(known))]


def _prepare_put(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    task_writes: Sequence[TaskWrites],
    default_ttl: float | None,
) -> _Entry:
    conf = config.get("configurable", {})
    thread_id = require_thread_id(config)
    ns = conf.get(CONFIG_KEY_CHECKPOINT_NS) or ""
    parent_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
    values = checkpoint.get("channel_values", {})
    hints = checkpoint.get("channel_deltas", {})
    inline = inline_values(checkpoint)
    checkpoint_typed = dumps_structure(serde, stored_structure(checkpoint, inline))
    metadata_typed = serde.dumps_typed(
        metadata if type(metadata) is PlainDict else dict(metadata)
    )
    entry = _Entry(
        thread_id,
        ns,
        checkpoint["id"],
        None if parent_id is None else str(parent_id),
        conf.get(EXPECTED_HEAD, _UNFENCED),
        lease=held_lease(config),
    )
    for channel, version in new_versions.items():
        if channel in inline:  # kept in the checkpoint row
            continue
        entry.versions[channel] = str(version)
        if channel not in values:
            entry.blobs[channel] = EMPTY_RECORD
            continue
        value = values[channel]
        if isinstance(value, list):
            entry.lists.add(channel)
        if (hint := hints.get(channel)) is not None and channel in entry.lists:
            entry.deltas[channel] = (str(hint[0]), hint[1], value)
        else:
            entry.values[channel] = value
    if entry.target_id is not None:
        entry.task_writes = task_writes
    entry.row = (
        thread_id,
        ns,
        checkpoint["id"],
        entry.target_id,
        *checkpoint_typed,
        *metadata_typed,
        checkpoint.get("ts"),
    )
    if default_ttl is not None:
        entry.deadline = ttl_deadline(default_ttl)
    return entry


def _prepare_writes(
    serde: SerializerProtocol,
    config: RunnableConfig,
    task_writes: Sequence[TaskWrites],
) -> _Entry:
    conf = config.get("configurable", {})
    thread_id = require_thread_id(config)
    checkpoint_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
    if checkpoint_id is None:
        raise ValueError("put_writes() needs a config that addresses a checkpoint_id")
    entry = _Entry(
        thread_id,
        conf.get(CONFIG_KEY_CHECKPOINT_NS) or "",
        None,
        str(checkpoint_id),
        lease=held_lease(config),
    )
    entry.task_writes = task_writes
    return entry


def _encode(serde: SerializerProtocol, e: _Entry) -> None:
    """Serialize an entry's values and writes (its deltas are encoded by
    ``_store``, which knows their bases); a checkpoint's row gets its last column,
    the regular writes kept in it (``_keeps_writes_in_row``)."""
    for channel, value in e.values.items():
        e.blobs[channel] = encode_blob(serde, value, None, None)
    e.values = {}
    e.write_rows = [
        row
        for task_id, task_path, writes in e.task_writes
        for row in _encode_writes(serde, writes, task_id, task_path)
    ]
    e.task_writes = ()
    if e.row is None:
        return
    parent_writes: bytes | None = None
    if _keeps_writes_in_row(e):
        regular = [(t, path, data) for t, i, _, _, data, path in e.write_rows if i >= 0]
        e.write_rows = [row for row in e.write_rows if row[1] < 0]
        parent_writes = pack_task_writes(regular) if regular else None
    e.row = (*e.row, parent_writes)


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
    book: ChainBook | None = None,
    staged: Staged | None = None,
) -> Op[RunnableConfig]:
    """Store a checkpoint (and, for ``put_step``, the writes that precede it)."""
    entry = _prepare_put(
        serde, config, checkpoint, metadata, new_versions, task_writes, default_ttl
    )
    stored = yield from _store(d, serde, [entry], book, staged)
    result = stored[0]
    assert result is not None
    return result


def put_steps(
    d: SqlDialect,
    serde: SerializerProtocol,
    steps: Sequence[StepSave],
    *,
    default_ttl: float | None = None,
    book: ChainBook | None = None,
    staged: Staged | None = None,
    release: tuple[str, str, str] | None = None,
) -> Op[list[RunnableConfig | None]]:
    """Store several steps in order in one transaction (see ``BaseCheckpointSaver.
    put_steps``): all of them, or, when one fails, none. ``release``: a lease
    ``(thread_id, checkpoint_ns, holder)`` deleted after them, in the same
    transaction (a run's last saves and its lease's end commit together)."""
    entries = [
        _prepare_writes(serde, config, task_writes)
        if checkpoint is None
        else _prepare_put(
            serde,
            config,
            checkpoint,
            metadata or {},
            new_versions,
            task_writes,
            default_ttl,
        )
        for config, task_writes, checkpoint, metadata, new_versions in steps
    ]
    return (yield from _store(d, serde, entries, book, staged, release))


def put_writes(
    d: SqlDialect,
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> Op[None]:
    """Store a task's writes against the checkpoint ``config`` addresses.

    Regular writes are idempotent (a second save of a task's regular writes keeps
    the first set, as a whole); special writes (error, interrupt, resume) replace.
    See ``engine.checkpoint._pending_writes``.
    """
    entry = _prepare_writes(serde, config, [(task_id, task_path, writes)])
    if writes:
        yield from _store(d, serde, [entry])


# -- the transaction -----------------------------------------------------------------


def _store(
    d: SqlDialect,
    serde: SerializerProtocol,
    entries: Sequence[_Entry],
    book: ChainBook | None = None,
    staged: Staged | None = None,
    release: tuple[str, str, str] | None = None,
) -> Op[list[RunnableConfig | None]]:
    """Run prepared entries in order: fencing, delta decisions, inserts; then
    the release of a lease, when given.

    ``book``: the chain bookkeeping of values the saver stored before; a fenced
    entry's delta base found there is not read back (see :class:`ChainBook`),
    and the values stored here go to ``staged`` (their bookkeeping, and the
    small ones whole: :class:`Staged`), which the saver keeps once the
    transaction committed.
    """
    if not entries:
        return []
    fenced = [
        e
        for e in entries
        if e.checkpoint_id is not None and e.expected is not _UNFENCED
    ]
    db_checks = d.expect_head is not None
    # The batch's first checkpoint, when fenced: only writes (which no head
    # check sees) come before it, so its check can go first.
    lead = next((e for e in entries if e.checkpoint_id is not None), None)
    if lead is not None and lead.expected is _UNFENCED:
        lead = None
    checked_lead = False
    asks: list[Stmt] = []
    # Thread leases first: a save of a run that lost its thread stores nothing.
    leases = sorted({(e.thread_id, *e.lease) for e in entries if e.lease is not None})
    lease_check = d.sql.get("lease_check")
    threads = sorted({e.thread_id for e in fenced})
    places = sorted({(e.thread_id, e.ns) for e in fenced})
    # The batch is fenced on one thread's head, its lead's (where the database
    # checks the head itself, that needs no thread lock).
    one_head = lead is not None and threads == [lead.thread_id]
    # A run's step (one lease, one head) sends both in one statement: Postgres
    # checks them, the lease first; SQLite reads them for the checks below.
    check_both = d.sql.get("lease_check_and_head") if len(leases) == 1 else None
    # When the batch gives that lease back, the check is the release (Postgres).
    end_both = None
    if check_both is not None and release == leases[0]:
        end_both = d.sql.get("lease_end_and_head")
    released = False
    read_both = d.sql.get("lease_holder_and_head") if len(leases) == 1 else None
    together = check_both is not None and db_checks and one_head
    leases_at = len(asks)
    for held in leases:
        if together:
            continue  # sent with the head check below
        if lease_check is not None:  # fails the transaction (Postgres)
            yield Stmt(lease_check, held)
        else:  # compared below, under the write lock (SQLite)
            asks.append(Stmt(d["lease_get"], held[:2], fetch=True))
    if fenced:
        if d.lock_thread is not None and not (db_checks and one_head):
            # Every fenced thread's lock before anything is read, in one order so
            # two batches never wait for each other.
            for thread_id in threads:
                yield Stmt(d.lock_thread, (thread_id,))
        if db_checks and lead is not None:
            assert d.expect_head is not None
            at_head = (lead.thread_id, lead.ns, lead.expected)
            if together and end_both is not None:
                yield Stmt(end_both, (*leases[0], *at_head, *leases[0]))
                released = True
            elif together:
                assert check_both is not None
                yield Stmt(check_both, (*leases[0], *at_head))
            else:
                yield Stmt(d.expect_head, at_head)
            checked_lead = True
    # What stored rows must tell, asked in one batch: the heads (where Python
    # compares them; the answer's row and column) and the chain bookkeeping of
    # delta bases older than the batch.
    heads_at: dict[tuple[str, str], tuple[int, int]] = {}
    if fenced and not db_checks:
        if read_both is not None and lease_check is None and len(places) == 1:
            asks[leases_at] = Stmt(read_both, (*leases[0][:2], *places[0]), fetch=True)
            heads_at[places[0]] = (leases_at, 1)
        else:
            for place in places:
                heads_at[place] = (len(asks), 0)
                asks.append(Stmt(d["head"], place, fetch=True))
    made: set[_BlobKey] = set()
    older: set[_BlobKey] = set()
    records: dict[_BlobKey, BlobRecord] = {}
    for e in entries:
        for channel, (base, _start, _value) in e.deltas.items():
            if (base_key := (e.thread_id, e.ns, channel, base)) in made:
                continue
            known = None
            if book is not None and e.expected is not _UNFENCED:
                known = book.get(base_key)
            if known is not None:
                records[base_key] = known
            else:
                older.add(base_key)
        made.update((e.thread_id, e.ns, ch, v) for ch, v in e.versions.items())
    bases_at = -1
    if older:
        bases_at = len(asks)
        asks.append(Stmt(d["blob_bases"], d.keys_param(sorted(older), 4), fetch=True))
    answers: list[Rows] = list((yield tuple(asks))) if asks else []
    if lease_check is None:
        for at, (thread_id, ns, holder) in enumerate(leases, leases_at):
            if not answers[at] or answers[at][0][0] != holder:
                raise lease_lost(thread_id, ns, holder)
    heads: dict[tuple[str, str], str | None] = {
        key: (answers[at][0][column] if answers[at] else None)
        for key, (at, column) in heads_at.items()
    }
    if bases_at >= 0:
        for r in answers[bases_at]:
            records[(r[0], r[1], r[2], r[3])] = BlobRecord(
                r[4], "", b"", None, None, r[5], r[6], r[7]
            )
    # The inserts, gathered per statement and sent before each database-side
    # head check (which must see the checkpoints of the entries before it).
    keep: list[tuple[Any, ...]] = []
    replace: list[tuple[Any, ...]] = []
    blob_rows: list[tuple[Any, ...]] = []
    checkpoint_rows: list[tuple[Any, ...]] = []
    deadlines: dict[str, datetime] = {}
    results: list[RunnableConfig | None] = []
    queued = 0  # payload bytes gathered since the last flush
    pieces_of = (
        getattr(serde, "dumps_typed_pieces", None)
        if "insert_blob_part" in d.sql
        else None
    )

    def flush() -> Op[None]:
        if keep:
            yield from d.inserts("insert_write_keep", list(keep))
        if replace:
            yield Stmt(d["insert_write_replace"], many=list(replace))
        if blob_rows:
            yield from d.inserts("insert_blob", list(blob_rows))
        if _faults.ARMED and checkpoint_rows:
            _faults.hit("between_values_and_checkpoint")
        if checkpoint_rows:
            yield Stmt(d["insert_checkpoint"], many=list(checkpoint_rows))
        keep.clear()
        replace.clear()
        blob_rows.clear()
        checkpoint_rows.clear()

    def gather(e: _Entry) -> int:
        """Serialize an entry and add its rows to the lists ``flush`` sends; the
        bytes of their payloads. (A function, so that none of them outlives it.)"""
        _encode(serde, e)
        size = 0
        for task_id, idx, channel, type_tag, payload, path in e.write_rows:
            size += len(payload)
            row = (
                e.thread_id,
                e.ns,
                e.target_id,
                task_id,
                idx,
                channel,
                type_tag,
                payload,
                path,
            )
            (keep if idx >= 0 else replace).append(row)
        e.write_rows = []
        if e.checkpoint_id is None:
            return size
        for channel, (base, start, value) in e.deltas.items():
            e.blobs[channel] = encode_blob(
                serde,
                value,
                (base, start),
                records.get((e.thread_id, e.ns, channel, base)),
            )
        for channel, record in e.blobs.items():
            blob_key = (e.thread_id, e.ns, channel, e.versions[channel])
            if blob_key not in records:  # the first insert of a key is the one kept
                if channel in e.lists:
                    # A later delta's base: its bookkeeping, not its payload.
                    records[blob_key] = bookkeeping = record._replace(payload=b"")
                    if staged is not None:
                        staged.chains[blob_key] = bookkeeping
                else:  # never a delta's base (only lists are): noted as such
                    records[blob_key] = EMPTY_RECORD
                if (
                    staged is not None
                    and e.expected is not _UNFENCED  # a run's: its versions are new
                    and record.kind != "delta"
                    and channel not in e.sent
                    and len(record.payload) <= GUESS_VALUE_BYTES
                ):
                    staged.values[blob_key] = record
            if channel in e.sent:
                continue  # stored already, its parts put together
            blob_rows.append(d.blob_params((*blob_key, *record)))
            size += len(record.payload)
        e.blobs = {}
        assert e.row is not None
        checkpoint_rows.append(d.checkpoint_params(e.row))
        size += len(e.row[-1] or b"")
        e.row = None  # its last column can be large (the writes kept in the row)
        return size

    if checked_lead:
        # Checked by the database, which locks the thread until the commit: from
        # there on this transaction knows the head (it moves only by the rows
        # inserted below), so a later entry's check passes for sure when its
        # expected head is that one, and is left out.
        assert lead is not None
        heads[(lead.thread_id, lead.ns)] = lead.expected
    for e in entries:
        place = (e.thread_id, e.ns)
        if e.checkpoint_id is not None and e.expected is not _UNFENCED:
            if not db_checks:
                if heads[place] != e.expected:
                    raise conflict(e.thread_id, e.ns, e.expected, heads[place])
            elif heads.get(place, _UNFENCED) != e.expected:
                # Not the head this transaction left there (or none it knows
                # yet): the database checks, and reports the head it finds.
                assert d.expect_head is not None
                yield from flush()
                yield Stmt(d.expect_head, (e.thread_id, e.ns, e.expected))
                heads[place] = e.expected
        if queued > FLUSH_BYTES:
            # Large values: send what is gathered before serializing more, so
            # the batch never holds many of them at once (a pipelining driver
            # holds them until it reads a result: one round trip more).
            yield from flush()
            if d.drain is not None:
                yield Stmt(d.drain, fetch=True)
            queued = 0
        if pieces_of is not None:
            for channel, (base, start, value) in list(e.deltas.items()):
                # A list due a full copy goes with the whole values (in parts
                # when large); a delta is kept, encoded, as ``gather`` would.
                base_key = (e.thread_id, e.ns, channel, base)
                record = encode_delta(
                    serde, value, (base, start), records.get(base_key)
                )
                if record is None:
                    e.values[channel] = value
                else:
                    e.blobs[channel] = record
                del e.deltas[channel]
            if e.values:
                yield from _send_in_parts(d, pieces_of, e)
        queued += gather(e)
        if e.checkpoint_id is None:
            results.append(None)
            continue
        if place in heads:
            head = heads[place]
            heads[place] = (
                e.checkpoint_id if head is None else max(head, e.checkpoint_id)
            )
        if e.deadline is not None:
            deadlines[e.thread_id] = e.deadline
        results.append(config_for(e.thread_id, e.ns, e.checkpoint_id))
    yield from flush()
    for thread_id, deadline in deadlines.items():
        yield Stmt(d["upsert_ttl"], (thread_id, d.timestamp(deadline)))
    if release is not None and not released:
        yield Stmt(d["lease_release"], release)
    return results


def _send_in_parts(
    d: SqlDialect,
    pieces_of: Callable[[Any], tuple[str, Iterable[bytes]]],
    e: _Entry,
) -> Op[None]:
    """Serialize the entry's whole values (``e.values``: with the lists due a
    full copy instead of a delta, which ``_store`` moves there) into ``e.blobs``,
    sending each one larger than ``PART_BYTES`` in parts as it is serialized,
    then put together into its row (noted in ``e.sent``); the others go with
    the entry's rows, as before.

    A part is a row of the blobs table under a version of its own (a random
    token: it never meets a real one), numbered in ``chain_len``; the statement
    that puts them together deletes them and inserts the value's row as
    ``insert_blob`` would (none if the key is stored already). All of it happens
    in the save's transaction: a failure leaves nothing, parts included.
    """
    for channel in list(e.values):
        tag, pieces = pieces_of(e.values.pop(channel))
        held: list[bytes] = []
        held_bytes = total = 0
        parts: list[str] = []  # the versions the parts are stored under
        token = ""
        for piece in pieces:
            if held_bytes >= PART_BYTES:  # and more follows: a part
                if not parts:
                    token = f"~part {uuid.uuid4().hex}"
                yield _part(d, e, channel, token, parts, held)
                total += held_bytes
                held, held_bytes = [], 0
            held.append(piece)
            held_bytes += len(piece)
        if not parts:  # one piece, or small enough: one row
            e.blobs[channel] = full_record(tag, b"".join(held))
            continue
        yield _part(d, e, channel, token, parts, held)  # the last piece or more
        total += held_bytes
        del held
        row = d.blob_params(
            (e.thread_id, e.ns, channel, e.versions[channel], "full", tag, b"")
            + (None, None, 0, 0, 0)
        )
        yield Stmt(
            d["join_blob_parts"],
            (e.thread_id, e.ns, channel, parts, *row[:6], *row[7:]),
        )
        e.blobs[channel] = BlobRecord("full", tag, b"", None, None, 0, 0, total)
        e.sent.add(channel)


def _part(
    d: SqlDialect,
    e: _Entry,
    channel: str,
    token: str,
    parts: list[str],
    held: list[bytes],
) -> Stmt:
    """The statement storing the next part of a value, under the version
    ``token`` and its number (added to ``parts``)."""
    parts.append(f"{token} {len(parts)}")
    return Stmt(
        d["insert_blob_part"],
        (e.thread_id, e.ns, channel, parts[-1], b"".join(held), len(parts) - 1),
    )


# -- pieces ------------------------------------------------------------------------


def _keeps_writes_in_row(e: _Entry) -> bool:
    """Whether the entry's regular writes go in its checkpoint's row.

    Only when its put is fenced on the checkpoint the writes belong to (its
    parent) and sorts after it: the parent is then the newest checkpoint and the
    new one its next, where reads look (``child_writes_for_checkpoints``).
    """
    return (
        e.checkpoint_id is not None
        and e.target_id is not None
        and e.expected == e.target_id
        and e.checkpoint_id > e.target_id
    )


def _encode_writes(
    serde: SerializerProtocol,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> list[_WriteRow]:
    return [
        (task_id, idx, channel, tag, payload, task_path)
        for idx, channel, tag, payload in encode_task_writes(serde, writes)
    ]

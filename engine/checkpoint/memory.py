"""InMemorySaver: checkpoints in process memory, stored serialized like the SQL backends.

For tests, notebooks and the embedded studio's throwaway threads. Values go
through the serializer on the way in, so what works here works in SQLite and
Postgres too. With ``factory=`` the tables can be kept elsewhere, e.g. in a
:class:`PersistentDict` saved to a file on exit. Thread leases (held in process
only) come from ``_memory_leases``.
"""

from __future__ import annotations

import builtins
import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any, NamedTuple

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
)
from engine._internal._typing import RunnableConfig
from engine.checkpoint._blobs import (
    EMPTY_RECORD,
    MEMBER,
    BlobRecord,
    decode_blobs,
    dumps_structure,
    encode_blob,
    full_record,
    load_stored,
    member_source,
    pack_structure,
    unpack_structure,
)
from engine.checkpoint._lease import HELD_LEASE, LeaseTable
from engine.checkpoint._memory_async import MemoryAsyncMethods
from engine.checkpoint._memory_compact import (
    compact_loop_structure,
    compact_structure,
    expand_structure,
)
from engine.checkpoint._memory_inputs import InputMembers, input_members, shared_member
from engine.checkpoint._memory_leases import MemoryLeases
from engine.checkpoint._memory_narrow import dumps_narrow, is_narrow, loads_narrow
from engine.checkpoint._pending_writes import (
    WRITES_CHANNEL,
    encode_task_writes,
    is_packed,
    unpack_writes,
)
from engine.checkpoint._persistent_dict import PersistentDict
from engine.checkpoint._retention import (
    live_blob_keys,
    open_interrupts,
    plan_prune,
    reparent_survivors,
)
from engine.checkpoint.base import (
    EXPECTED_HEAD,
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointSummary,
    CheckpointTuple,
    PendingWrite,
    PruneStrategy,
    StepSave,
    config_for,
    conflict,
    metadata_matches,
    require_thread_id,
    ttl_deadline,
)
from engine.checkpoint.serde.base import SerializerProtocol
from engine.checkpoint.serde.jsonplus import (
    JsonPlusSerializer,
    PlainDict,
    register_type,
)

__all__ = ("InMemorySaver", "MemorySaver", "PersistentDict")

register_type(BlobRecord)  # stored in the blobs table, which a PersistentDict saves

_Row = tuple[Any, ...]
"""(checkpoint structure, metadata, parent id[, creation time]): the structure
(without values) and the metadata as the serializer's ``(type, payload)``, or, for
the types the default serializer gives them (``jsonraw`` and ``json``), as the
payload alone (a pair costs 56 bytes). With the default serializer a narrow
structure is JSON bytes without its id and creation time (the row's key and its
fourth item: a summary reads the time without parsing, and shares the string):
the short array of ``engine.checkpoint._memory_narrow`` for the loop's checkpoints,
the JSON object otherwise; a wide one is compact tuples (``(COMPACT, tuples)``,
see ``_NARROW``; for the loop's saves, with its node dicts of ``versions_seen``
kept as they are: ``compact_loop_structure``). Rows of earlier versions have three items, or the JSON object
where the array is kept now; both read."""

COMPACT = "*mem"
"""The type of a structure kept as tuples (see ``engine.checkpoint._memory_compact``)."""

_NARROW = 16
"""Structures of at most this many channels plus nodes are kept as one JSON bytes
object (one ``orjson`` call; ~260 bytes for a 4-channel loop as the short array,
against ~750 as tuples); wider ones as compact tuples that share what did not change with the
thread's previous checkpoint (a 50-node chain's JSON would be ~5 KB a step)."""

_LAST_PLACES = 4

_NOT_IN_ROW = frozenset({"channel_values", "channel_deltas", "id", "ts"})
"""Checkpoint keys a JSON structure leaves out: the values (kept per version), the
delta hint (never kept), the id (the row's key) and the creation time (the row's
fourth item); the last two are put back when read."""

_NO_TS: Any = object()
"""A row's fourth item when the checkpoint had no creation time."""


_Kept = BlobRecord | bytes
"""How the blobs table keeps a channel version: a whole JSON value as its bytes
alone (most values; a record would add 128 bytes to each), anything else (deltas,
other serializers' payloads, no value) as its :class:`BlobRecord`."""


_Entry = tuple[str, str, tuple[str, bytes], str]
"""A pending write as kept: (task id, channel, (type, payload), task path)."""

SCALAR_WRITES = "*s"
"""The type of an entry holding a task's regular writes as they are, when each
value is a str, int, float, bool or None (immutable: nothing the task does later
reaches them) and the serializer is the default one: ``(channel, value, channel,
value...)`` flat, instead of packed JSON (``WRITES_TAG``), which reads back the
same values. A loop step's usual writes (a counter, a routing flag) so cost no
encoding. Kept only in memory: a ``PersistentDict`` file holds them as JSON."""

_SCALARS = frozenset({str, int, float, bool, type(None)})

_Lone = tuple[str, str, str, bytes, str, int]
"""A bucket of one entry, flat: (task id, channel, type, payload, task path, index)."""

_LoneScalars = tuple[Any, ...]
"""A bucket of one ``SCALAR_WRITES`` entry, flatter still: (task id, task path,
index, channel, value, channel, value...), an odd length where a ``_Lone`` has
six items (so a ``PersistentDict`` file, which keeps tuples as tuples, reads it
back as it was). One tuple a step where a ``_Lone`` holds the writes in a tuple
of their own: 72 bytes fewer a step of a loop."""

_Bucket = dict[tuple[str, int], _Entry] | _Lone | _LoneScalars
"""A checkpoint's pending writes: ``{(task id, index): entry}``, or, while it holds
one entry (a step of one task: its regular writes packed in one), that entry flat
(``_Lone``, or ``_LoneScalars`` for scalar writes): a dict, its key and the
(type, payload) pair cost ~290 bytes more a step."""


def _entries(bucket: _Bucket) -> Iterable[tuple[tuple[str, int], _Entry]]:
    """A bucket's ``((task id, index), entry)`` pairs, whichever form it has."""
    if isinstance(bucket, dict):
        return bucket.items()
    if len(bucket) & 1:  # _LoneScalars
        task_id, path, idx = bucket[:3]
        entry = (task_id, WRITES_CHANNEL, (SCALAR_WRITES, bucket[3:]), path)
        return (((task_id, idx), entry),)  # type: ignore[return-value]
    task_id, channel, tag, payload, path, idx = bucket
    return (((task_id, idx), (task_id, channel, (tag, payload), path)),)


def _kept(record: BlobRecord) -> _Kept:
    if record.kind == "full" and record.type_tag == "json":
        return record.payload
    return record


def _kept_full(tag: str, payload: bytes) -> _Kept:
    """``_kept`` of a whole value's record (no delta), without making the record
    when it would only be taken apart again."""
    if tag == "json":
        return payload
    return full_record(tag, payload)


def _record(kept: _Kept | None) -> BlobRecord | None:
    """The record a kept blob stands for (None for None)."""
    if isinstance(kept, bytes):
        return full_record("json", kept)
    return kept


def _base_of(ns: str, kept: _Kept) -> str | tuple[str, str, str] | None:
    """What a kept value is read from (``live_blob_keys``): the version of its
    channel a delta extends, the value a member record reads, or None."""
    if isinstance(kept, bytes) or kept.kind not in ("delta", MEMBER):
        return None
    if kept.kind == "delta":
        return kept.base_version
    return (ns, member_source(kept)[0], str(kept.base_version))


def _reparented(row: _Row, parent: str | None) -> _Row:
    """The row with another parent (the rest as it was)."""
    return (row[0], row[1], parent, *row[3:])


class _Plan(NamedTuple):
    """A checked and encoded put, not stored yet."""

    thread_id: str
    ns: str
    checkpoint_id: str
    row: _Row
    blobs: dict[tuple[str, str, str, str], _Kept]
    shared: Any = None
    """What the thread's next compact structure may share (``compact_structure``)."""
    inputs: InputMembers | None = None
    """An input checkpoint's large members, for the save after it (``_memory_inputs``)."""


class InMemorySaver(MemoryLeases, MemoryAsyncMethods):
    """Keeps checkpoints in a dict. Thread-safe; not shared between processes.

    Args:
        serde: serializer (default: tagged JSON).
        factory: makes each table (checkpoints, writes, values, deadlines):
            called with a default factory, as ``defaultdict`` is, or with none.
            Tables that are not plain ``defaultdict``s are entered as context
            managers when the saver is, and exited with it: with
            ``PersistentDict`` (loaded by the factory), leaving ``with saver:``
            saves them.
        default_ttl: seconds after its last write when a thread expires (None: never).
    """

    saves_inline = True
    """A put is quick and does no I/O: a synchronous run saves inline, without a
    background lane (a subclass whose puts are slow sets this to False)."""

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        factory: Callable[..., defaultdict[Any, Any]] = defaultdict,
        default_ttl: float | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.storage: dict[str, dict[str, dict[str, _Row]]] = factory(
            lambda: defaultdict(dict)
        )
        self.writes: dict[tuple[str, str, str], _Bucket] = factory(dict)
        self.blobs: dict[tuple[str, str, str, str], _Kept] = factory()
        self.deadlines: dict[str, datetime] = factory()
        self._heads: dict[tuple[str, str], str] = {}
        """Newest checkpoint id per (thread, namespace), so a put's fencing check does
        not scan the thread; filled on demand, forgotten when rows are deleted."""
        self._last: dict[tuple[str, str], Any] = {}
        """The newest compact structure of the places written last (a few): the next
        one shares its unchanged parts (channel names, versions seen)."""
        self._inputs: dict[tuple[str, str], InputMembers] = {}
        """Per place whose last save was an input checkpoint with large values: its
        members, which the save after it keeps once (``_memory_inputs``)."""
        self.default_ttl = default_ttl
        self.leases = LeaseTable()  # never persisted: a lease lives with its process
        self.lock = threading.RLock()
        self.stack = ExitStack()
        if factory is not defaultdict:
            for table in (self.storage, self.writes, self.blobs, self.deadlines):
                self.stack.enter_context(table)  # type: ignore[arg-type]

    def __enter__(self) -> InMemorySaver:
        self.stack.__enter__()
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return self.stack.__exit__(*exc)

    async def __aenter__(self) -> InMemorySaver:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        return self.__exit__(*exc)

    # -- helpers -----------------------------------------------------------------

    def _expired(self, thread_id: str) -> bool:
        deadline = self.deadlines.get(thread_id)
        return deadline is not None and deadline <= datetime.now(UTC)

    def _head(self, thread_id: str, ns: str) -> str | None:
        rows = self.storage.get(thread_id, {}).get(ns)
        if not rows:
            return None
        head = self._heads.get((thread_id, ns))
        if head is None or head not in rows:
            head = self._heads[(thread_id, ns)] = max(rows)
        return head

    def _forget_heads(self, thread_id: str) -> None:
        for table in (self._heads, self._last, self._inputs):
            for place in [p for p in table if p[0] == thread_id]:
                del table[place]

    def _structure(self, typed: bytes | tuple[str, Any], where: str) -> Any:
        """A stored checkpoint structure (without values), unpacked."""
        if isinstance(typed, bytes):
            if is_narrow(typed):
                return loads_narrow(self.serde, typed, where)
            typed = ("jsonraw", typed)
        elif typed[0] == COMPACT:
            return expand_structure(typed[1])
        return unpack_structure(load_stored(self.serde, typed, where), where)

    def _metadata(self, kept: bytes | tuple[str, bytes], where: str) -> Any:
        """A stored checkpoint's metadata, loaded."""
        typed = ("json", kept) if isinstance(kept, bytes) else kept
        return load_stored(self.serde, typed, f"metadata of {where}")

    def _tuple(self, thread_id: str, ns: str, checkpoint_id: str) -> CheckpointTuple:
        row = self.storage[thread_id][ns][checkpoint_id]
        cp_typed, meta_typed, parent_id = row[:3]
        where = f"checkpoint {checkpoint_id!r} of thread {thread_id!r}"
        stored = self._structure(cp_typed, where)
        if "id" not in stored:  # kept as the row's key (and the time as its 4th item)
            head = {"v": stored.pop("v")} if "v" in stored else {}
            head["id"] = checkpoint_id
            if len(row) > 3 and row[3] is not _NO_TS:
                head["ts"] = row[3]
            stored = {**head, **stored}
        checkpoint: Checkpoint = stored
        values = decode_blobs(
            self.serde,
            checkpoint["channel_versions"],
            lambda channel, version: _record(
                self.blobs.get((thread_id, ns, channel, version))
            ),
            inline=checkpoint.get("channel_values"),
        )
        checkpoint["channel_values"] = values
        metadata: CheckpointMetadata = self._metadata(meta_typed, where)
        bucket = self.writes.get((thread_id, ns, checkpoint_id))
        entries = sorted(
            _entries(bucket) if bucket is not None else (),
            key=lambda item: (item[1][3], item[0][0], item[0][1]),
        )
        pending: list[PendingWrite] = []
        for _, (task_id, channel, typed, _path) in entries:
            if typed[0] == SCALAR_WRITES and channel == WRITES_CHANNEL:
                flat: Any = typed[1]
                pending.extend(zip(repeat(task_id), flat[::2], flat[1::2]))
                continue
            items = (
                unpack_writes(typed[1], f"writes of {where}")
                if is_packed(channel, typed[0])
                else [(channel, *typed)]
            )
            pending.extend(
                (
                    task_id,
                    name,
                    load_stored(self.serde, (tag, payload), f"write of {where}"),
                )
                for name, tag, payload in items
            )
        return CheckpointTuple(
            config=config_for(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=config_for(thread_id, ns, parent_id) if parent_id else None,
            pending_writes=pending,
        )

    # -- reads -------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config.get(CONF, {})
        thread_id = str(require_thread_id(config))
        ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "") or ""
        checkpoint_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
        with self.lock:
            if self._expired(thread_id):
                return None
            rows = self.storage.get(thread_id, {}).get(ns)
            if not rows:
                return None
            if checkpoint_id is None:
                checkpoint_id = self._head(thread_id, ns)
                assert checkpoint_id is not None
            elif checkpoint_id not in rows:
                return None
            return self._tuple(thread_id, ns, checkpoint_id)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        with self.lock:
            result = [
                self._tuple(thread_id, ns, checkpoint_id)
                for thread_id, ns, checkpoint_id, _ in self._matches(
                    config, filter, before, limit
                )
            ]
        yield from result

    def list_summaries(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointSummary]:
        """Like :meth:`list` without channel values or pending writes."""
        with self.lock:
            result: builtins.list[CheckpointSummary] = []
            for thread_id, ns, checkpoint_id, metadata in self._matches(
                config, filter, before, limit
            ):
                row = self.storage[thread_id][ns][checkpoint_id]
                cp_typed, _, parent_id = row[:3]
                # Only its time is needed: read without expanding when it can be.
                if len(row) > 3:
                    ts = None if row[3] is _NO_TS else row[3]
                elif not isinstance(cp_typed, bytes) and cp_typed[0] == COMPACT:
                    keys, values = cp_typed[1]
                    ts = values[keys.index("ts")] if "ts" in keys else None
                else:
                    where = f"checkpoint {checkpoint_id!r} of thread {thread_id!r}"
                    stored = self._structure(cp_typed, where)
                    ts = stored.get("ts") if isinstance(stored, dict) else None
                result.append(
                    CheckpointSummary(
                        config_for(thread_id, ns, checkpoint_id),
                        metadata,
                        config_for(thread_id, ns, parent_id) if parent_id else None,
                        ts,
                    )
                )
        yield from result

    def _matches(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[tuple[str, str, str, CheckpointMetadata]]:
        """(thread, ns, id, metadata) of list()'s answer, newest first (lock held)."""
        conf = (config or {}).get(CONF, {})
        thread_filter = conf.get(CONFIG_KEY_THREAD_ID)
        ns_filter = conf.get(CONFIG_KEY_CHECKPOINT_NS)
        id_filter = conf.get(CONFIG_KEY_CHECKPOINT_ID)
        before_id = (before or {}).get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
        candidates: builtins.list[tuple[str, str, str]] = []
        for thread_id, namespaces in self.storage.items():
            if thread_filter is not None and thread_id != str(thread_filter):
                continue
            if self._expired(thread_id):
                continue
            for ns, rows in namespaces.items():
                if ns_filter is not None and ns != ns_filter:
                    continue
                for checkpoint_id in rows:
                    if id_filter is not None and checkpoint_id != id_filter:
                        continue
                    if before_id is not None and checkpoint_id >= before_id:
                        continue
                    candidates.append((checkpoint_id, thread_id, ns))
        candidates.sort(reverse=True)
        result: builtins.list[tuple[str, str, str, CheckpointMetadata]] = []
        for checkpoint_id, thread_id, ns in candidates:
            if limit is not None and len(result) >= limit:
                break
            where = f"checkpoint {checkpoint_id!r} of thread {thread_id!r}"
            metadata: CheckpointMetadata = self._metadata(
                self.storage[thread_id][ns][checkpoint_id][1], where
            )
            if filter and not metadata_matches(metadata, filter):
                continue
            result.append((thread_id, ns, checkpoint_id, metadata))
        return result

    # -- writes ------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        with self.lock:
            return self._put(config, checkpoint, metadata, new_versions)

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        plan = self._plan_put(config, checkpoint, metadata, new_versions, {}, {})
        self._apply(plan)
        return config_for(plan.thread_id, plan.ns, plan.checkpoint_id)

    def _plan_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        batch_heads: dict[tuple[str, str], str],
        pending: dict[tuple[str, str, str, str], _Kept],
        loop: bool = False,
    ) -> _Plan:
        """Check and encode a put without storing anything (lock held).

        ``batch_heads`` and ``pending`` carry what earlier entries of the same
        batch will store: their newest checkpoint id per thread and namespace,
        the values they add. ``loop``: the loop's save (``put_loop_step``).
        """
        conf = config.get(CONF, {})
        thread_id = conf.get(CONFIG_KEY_THREAD_ID)
        if type(thread_id) is not str or not thread_id:
            thread_id = str(require_thread_id(config))
        ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "") or ""
        place = (thread_id, ns)
        self._check_fence(thread_id, ns, conf, batch_heads.get(place))
        values = checkpoint.get("channel_values", {})
        deltas = checkpoint.get("channel_deltas", {})
        # None values stay in the row (``nil``, as in the SQL savers): no value record.
        versions = checkpoint.get("channel_versions", {})
        nil = {c: None for c, v in values.items() if v is None and c in versions}
        blobs: dict[tuple[str, str, str, str], _Kept] = {}
        source = metadata.get("source")
        members = self._inputs.get(place) if source == "loop" else None
        if members is not None and members.checkpoint_id != conf.get(
            CONFIG_KEY_CHECKPOINT_ID
        ):
            members = None  # not the save right after the input checkpoint
        for channel, version in new_versions.items():
            if channel in nil:
                continue
            key = (thread_id, ns, channel, str(version))
            if key in self.blobs or key in pending or key in blobs:
                continue
            if channel in values:
                delta = deltas.get(channel)
                if delta is None:
                    value = values[channel]
                    record = None if members is None else shared_member(members, value)
                    blobs[key] = record or _kept_full(*self.serde.dumps_typed(value))
                    continue
                base_key = (thread_id, ns, channel, str(delta[0]))
                kept = pending.get(base_key)
                base = _record(self.blobs.get(base_key) if kept is None else kept)
                blobs[key] = _kept(
                    encode_blob(self.serde, values[channel], delta, base)
                )
            else:
                blobs[key] = EMPTY_RECORD
        structure, shared = self._kept_structure(
            checkpoint, builtins.list(nil), place, loop
        )
        if structure is None:
            stored = {k: v for k, v in checkpoint.items() if k not in _NOT_IN_ROW}
            if nil:
                stored["channel_values"] = nil
            # Plain JSON as it is (no version table: nothing here is sent or kept
            # on disk, and leaving it out is the cheaper way).
            structure = dumps_structure(self.serde, stored)
            if structure[0] == "jsonraw":
                structure = structure[1]
        row = self._row(
            structure, metadata, conf.get(CONFIG_KEY_CHECKPOINT_ID), checkpoint, shared
        )
        pending.update(blobs)
        batch_heads[place] = max(batch_heads.get(place) or "", checkpoint["id"])
        inputs = (
            input_members(
                checkpoint["id"],
                ((k[2], k[3], values[k[2]]) for k in blobs if k[2] in values),
            )
            if source == "input"
            else None
        )
        return _Plan(thread_id, ns, checkpoint["id"], row, blobs, shared, inputs)

    def _check_fence(
        self,
        thread_id: str,
        ns: str,
        conf: dict[str, Any],
        batch_head: str | None = None,
    ) -> None:
        """A save's lease check and, when it is fenced, its head check (lock
        held); ``batch_head``: the newest checkpoint the entries before it in
        the same batch will store there."""
        self.leases.check_held(thread_id, conf.get(HELD_LEASE))
        if EXPECTED_HEAD in conf:
            head = self._head(thread_id, ns) or None
            if batch_head and (head is None or batch_head > head):
                head = batch_head
            if head != conf[EXPECTED_HEAD]:
                raise conflict(thread_id, ns, conf[EXPECTED_HEAD], head)

    def _kept_structure(
        self, checkpoint: Checkpoint, nil: builtins.list[str], place: Any, loop: bool
    ) -> tuple[bytes | tuple[str, Any] | None, Any]:
        """How a checkpoint's structure is kept (a ``_Row``'s first item) and what
        the thread's next compact structure may share (None for a narrow one);
        None as the structure when neither form fits (the JSON object then)."""
        shared = None
        if (
            len(checkpoint.get("channel_versions", ()))
            + len(checkpoint.get("versions_seen", ()))
            > _NARROW
            and getattr(self.serde, "dumps_typed_plain", None) is not None
        ):
            last = self._last.get(place)
            if loop:
                shared = compact_loop_structure(checkpoint, tuple(nil), last)
            if shared is None:
                shared = compact_structure(checkpoint, tuple(nil), last)
        if shared is not None:
            return (COMPACT, shared[0]), shared
        return dumps_narrow(self.serde, checkpoint, nil), None

    def _row(
        self,
        structure: Any,
        metadata: CheckpointMetadata,
        parent_id: str | None,
        checkpoint: Checkpoint,
        shared: Any,
    ) -> _Row:
        """A checkpoint's row, its metadata serialized (see ``_Row``)."""
        kind = type(metadata)
        meta = self.serde.dumps_typed(
            metadata if kind is dict or kind is PlainDict else dict(metadata)
        )
        row: _Row = (structure, meta[1] if meta[0] == "json" else meta, parent_id)
        if shared is None:  # the structure left the time out
            row += (checkpoint.get("ts", _NO_TS),)
        return row

    def _apply(self, plan: _Plan) -> None:
        """Store a planned put (lock held)."""
        self._keep(
            plan.thread_id,
            plan.ns,
            plan.checkpoint_id,
            plan.row,
            plan.blobs,
            plan.shared,
        )
        place = (plan.thread_id, plan.ns)
        self._inputs.pop(place, None)  # for the very next save only
        if plan.inputs is not None:
            self._inputs[place] = plan.inputs
            if len(self._inputs) > _LAST_PLACES:
                del self._inputs[next(iter(self._inputs))]
        if self.default_ttl is not None:
            self.deadlines[plan.thread_id] = ttl_deadline(self.default_ttl)  # type: ignore[assignment]

    def _keep(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        row: _Row,
        blobs: dict[tuple[str, str, str, str], _Kept],
        shared: Any,
    ) -> None:
        """Store a checkpoint's row and new values, and what the thread's next
        compact structure may share (lock held)."""
        self.blobs.update(blobs)
        self.storage.setdefault(thread_id, {}).setdefault(ns, {})[checkpoint_id] = row
        place = (thread_id, ns)
        if shared is not None:
            self._last.pop(place, None)  # newest last
            self._last[place] = shared
            if len(self._last) > _LAST_PLACES:
                del self._last[next(iter(self._last))]
        head = self._heads.get(place)
        if head is not None and checkpoint_id > head:
            self._heads[place] = checkpoint_id

    def _encode_step_writes(
        self,
        task_writes: Sequence[tuple[str, str, Sequence[tuple[str, Any]]]],
        parent_id: str | None,
    ) -> builtins.list[tuple[str, str, builtins.list[tuple[int, str, Any]]]]:
        """A step's last task writes, encoded (none for a first checkpoint,
        which has no parent to write against)."""
        return [
            (task_id, path, self._encode_writes(writes))
            for task_id, path, writes in (task_writes if parent_id is not None else ())
        ]

    def _store_step_writes(
        self,
        thread_id: str,
        ns: str,
        parent_id: str | None,
        encoded: builtins.list[tuple[str, str, builtins.list[tuple[int, str, Any]]]],
    ) -> None:
        """Keep a step's encoded writes for the checkpoint before it (lock held)."""
        if parent_id is None:  # a first checkpoint: none were encoded
            return
        for task_id, path, task_encoded in encoded:
            self._store_at((thread_id, ns, parent_id), task_encoded, task_id, path)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        with self.lock:
            self.leases.check(config)
            self._put_writes(config, writes, task_id, task_path)

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        self._store_writes(config, self._encode_writes(writes), task_id, task_path)

    def _encode_writes(
        self, writes: Sequence[tuple[str, Any]]
    ) -> builtins.list[tuple[int, str, tuple[str, bytes]]]:
        """A task's writes as stored (see ``engine.checkpoint._pending_writes``),
        or as they are when they are regular writes of scalars (``SCALAR_WRITES``)."""
        if type(self.serde) is JsonPlusSerializer:
            flat: builtins.list[Any] = []
            for channel, value in writes:
                if type(value) not in _SCALARS or channel in WRITES_IDX_MAP:
                    break
                flat += (channel, value)
            else:
                if flat:
                    return [(0, WRITES_CHANNEL, (SCALAR_WRITES, tuple(flat)))]  # type: ignore[list-item]
        return [
            (idx, channel, (tag, payload))
            for idx, channel, tag, payload in encode_task_writes(self.serde, writes)
        ]

    def _store_writes(
        self,
        config: RunnableConfig,
        encoded: Sequence[tuple[int, str, tuple[str, bytes]]],
        task_id: str,
        task_path: str,
    ) -> None:
        conf = config.get(CONF, {})
        thread_id = str(require_thread_id(config))
        ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "") or ""
        checkpoint_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
        if checkpoint_id is None:
            raise ValueError(
                "put_writes() needs a config that addresses a checkpoint_id"
            )
        self._store_at((thread_id, ns, checkpoint_id), encoded, task_id, task_path)

    def _store_at(
        self,
        place: tuple[str, str, str],
        encoded: Sequence[tuple[int, str, tuple[str, bytes]]],
        task_id: str,
        task_path: str,
    ) -> None:
        """Keep a task's encoded writes for the checkpoint at ``place``."""
        if type(task_path) is str:  # the same few paths every step: keep one copy
            task_path = sys.intern(task_path)
        kept = self.writes.get(place)
        if kept is None and len(encoded) == 1:
            idx, channel, (tag, payload) = encoded[0]
            if tag is SCALAR_WRITES:
                self.writes[place] = (task_id, task_path, idx, *payload)
            else:
                self.writes[place] = (task_id, channel, tag, payload, task_path, idx)
            return
        if isinstance(kept, dict):
            bucket = kept
        else:  # none yet, or one entry that is now joined by more
            bucket = self.writes[place] = {} if kept is None else dict(_entries(kept))
        for idx, channel, typed in encoded:
            key = (task_id, idx)
            if idx >= 0 and key in bucket:
                continue
            bucket[key] = (task_id, channel, typed, task_path)

    def put_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[tuple[str, str, Sequence[tuple[str, Any]]]],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """A step's last task writes and the checkpoint after it, atomically.

        Nothing is stored when any part fails (a fencing conflict, a value that
        cannot be serialized): writes and values are encoded before anything is
        stored.
        """
        plan = self._put_step(config, task_writes, checkpoint, metadata, new_versions)
        return config_for(plan.thread_id, plan.ns, plan.checkpoint_id)

    def put_loop_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[tuple[str, str, Sequence[tuple[str, Any]]]],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> None:
        """:meth:`put_step` for the loop's own saves (``SyncPersistence``), which
        need no config back and keep a promise: a node's dict in the
        checkpoint's ``versions_seen`` is never changed once made (the loop
        makes a new one when the node runs). A wide checkpoint then keeps those
        dicts instead of comparing and copying them (``compact_loop_structure``).
        Used only when a subclass does not override :meth:`put_step`.
        """
        if not self._put_usual_loop_step(
            config, task_writes, checkpoint, metadata, new_versions
        ):
            self._put_step(
                config, task_writes, checkpoint, metadata, new_versions, True
            )

    def _put_usual_loop_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[tuple[str, str, Sequence[tuple[str, Any]]]],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> bool:
        """Most of the loop's saves in one pass: a step's (source ``loop``) with
        the default serializer, no delta hints, no TTL, not the save right
        after the thread's input checkpoint (whose large values it may share),
        and a structure of the loop's shape. Stores exactly what ``_put_step``
        would store (``_plan_put`` then ``_apply``) without the batch, input and
        other-shape cases those handle; False, with nothing stored, for any
        other save, which ``_put_step`` then makes.
        """
        conf = config.get(CONF, {})
        thread_id = conf.get(CONFIG_KEY_THREAD_ID)
        ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "") or ""
        place = (thread_id, ns)
        if (
            type(self.serde) is not JsonPlusSerializer
            or self.default_ttl is not None
            or type(thread_id) is not str
            or not thread_id
            or metadata.get("source") != "loop"
            or "channel_deltas" in checkpoint
        ):
            return False
        parent_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
        encoded = self._encode_step_writes(task_writes, parent_id)
        values = checkpoint.get("channel_values", {})
        versions = checkpoint.get("channel_versions", {})
        # None values stay in the row (see ``_plan_put``): no value record
        nil = [c for c, v in values.items() if v is None and c in versions]
        with self.lock:
            if place in self._inputs:  # its values may be read from the input's
                return False
            self._check_fence(thread_id, ns, conf)
            stored = self.blobs
            dumps_typed = self.serde.dumps_typed
            blobs: dict[tuple[str, str, str, str], _Kept] = {}
            for channel, version in new_versions.items():
                key = (thread_id, ns, channel, str(version))
                if key in stored:
                    continue
                if channel not in values:
                    blobs[key] = EMPTY_RECORD
                elif (value := values[channel]) is not None or channel not in versions:
                    blobs[key] = _kept_full(*dumps_typed(value))
            structure, shared = self._kept_structure(checkpoint, nil, place, True)
            if structure is None:
                return False
            row = self._row(structure, metadata, parent_id, checkpoint, shared)
            self._keep(thread_id, ns, checkpoint["id"], row, blobs, shared)
            self._store_step_writes(thread_id, ns, parent_id, encoded)
        return True

    def _put_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[tuple[str, str, Sequence[tuple[str, Any]]]],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        loop: bool = False,
    ) -> _Plan:
        conf = config.get("configurable", {})
        parent_id = conf.get(CONFIG_KEY_CHECKPOINT_ID)
        encoded = self._encode_step_writes(task_writes, parent_id)
        with self.lock:
            plan = self._plan_put(
                config, checkpoint, metadata, new_versions, {}, {}, loop
            )
            self._apply(plan)
            self._store_step_writes(plan.thread_id, plan.ns, parent_id, encoded)
            return plan

    def put_steps(
        self, steps: Sequence[StepSave]
    ) -> builtins.list[RunnableConfig | None]:
        """Several steps (and writes-only entries) in order, under the lock.

        Every entry is checked (fencing against the head the entries before it
        leave) and encoded before anything is stored, so when one fails nothing
        of the batch is kept, as in the SQL savers' single transaction.
        """
        encoded: builtins.list[
            builtins.list[
                tuple[str, str, builtins.list[tuple[int, str, tuple[str, bytes]]]]
            ]
        ] = []
        for config, task_writes, checkpoint, _, _ in steps:
            conf = config.get(CONF, {})
            if checkpoint is None:
                require_thread_id(config)
                if conf.get(CONFIG_KEY_CHECKPOINT_ID) is None:
                    raise ValueError(
                        "put_writes() needs a config that addresses a checkpoint_id"
                    )
            elif conf.get(CONFIG_KEY_CHECKPOINT_ID) is None:
                task_writes = ()  # a first checkpoint has no parent to write against
            encoded.append(
                [
                    (task_id, path, self._encode_writes(writes))
                    for task_id, path, writes in task_writes
                ]
            )
        with self.lock:
            for config, *_ in steps:
                self.leases.check(config)
            batch_heads: dict[tuple[str, str], str] = {}
            pending: dict[tuple[str, str, str, str], _Kept] = {}
            plans = [
                None
                if checkpoint is None
                else self._plan_put(
                    config,
                    checkpoint,
                    metadata or {},
                    new_versions,
                    batch_heads,
                    pending,
                )
                for config, _, checkpoint, metadata, new_versions in steps
            ]
            results: builtins.list[RunnableConfig | None] = []
            for (config, *_), writes, plan in zip(steps, encoded, plans, strict=True):
                for task_id, path, task_encoded in writes:
                    self._store_writes(config, task_encoded, task_id, path)
                if plan is None:
                    results.append(None)
                    continue
                self._apply(plan)
                results.append(config_for(plan.thread_id, plan.ns, plan.checkpoint_id))
            return results

    # -- retention ---------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        thread_id = str(thread_id)
        with self.lock:
            self._forget_heads(thread_id)
            self.storage.pop(thread_id, None)
            self.deadlines.pop(thread_id, None)
            for wkey in [k for k in self.writes if k[0] == thread_id]:
                del self.writes[wkey]
            for bkey in [k for k in self.blobs if k[0] == thread_id]:
                del self.blobs[bkey]

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        wanted = {str(run_id) for run_id in run_ids}
        if not wanted:
            return
        with self.lock:
            touched: builtins.list[str] = []
            for thread_id, namespaces in builtins.list(self.storage.items()):
                for ns, rows in builtins.list(namespaces.items()):
                    doomed = {
                        cid
                        for cid, row in rows.items()
                        if self._run_of(thread_id, cid, row) in wanted
                    }
                    if not doomed:
                        continue
                    self._forget_heads(thread_id)
                    parents = {cid: row[2] for cid, row in rows.items()}
                    for cid, parent in reparent_survivors(parents, doomed).items():
                        rows[cid] = _reparented(rows[cid], parent)
                    for cid in doomed:
                        del rows[cid]
                        self.writes.pop((thread_id, ns, cid), None)
                    if not rows:
                        del namespaces[ns]
                    touched.append(thread_id)
                if not namespaces:
                    del self.storage[thread_id]
            for thread_id in dict.fromkeys(touched):
                self._gc_blobs(thread_id)

    def _run_of(self, thread_id: str, checkpoint_id: str, row: _Row) -> str | None:
        where = f"checkpoint {checkpoint_id!r} of thread {thread_id!r}"
        metadata = self._metadata(row[1], where)
        run_id = metadata.get("run_id") if isinstance(metadata, dict) else None
        return None if run_id is None else str(run_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source, target = str(source_thread_id), str(target_thread_id)
        with self.lock:
            if target in self.storage:
                raise ValueError(
                    f"Cannot copy into thread {target!r}: it already exists"
                )
            if source not in self.storage:
                raise ValueError(f"Cannot copy thread {source!r}: it does not exist")
            self._forget_heads(target)
            self.storage[target] = {
                ns: dict(rows) for ns, rows in self.storage[source].items()
            }
            for (thread, ns, channel, version), record in list(self.blobs.items()):
                if thread == source:
                    self.blobs[(target, ns, channel, version)] = record
            for (thread, ns, cid), bucket in list(self.writes.items()):
                if thread == source:
                    self.writes[(target, ns, cid)] = (
                        dict(bucket) if isinstance(bucket, dict) else bucket
                    )

    def prune(
        self, thread_ids: Sequence[str], *, strategy: PruneStrategy = "keep_latest"
    ) -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(
                f"Unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'"
            )
        with self.lock:
            for thread_id in map(str, thread_ids):
                if strategy == "delete":
                    self.delete_thread(thread_id)
                    continue
                self._forget_heads(thread_id)
                for ns, rows in self.storage.get(thread_id, {}).items():
                    parents = {cid: row[2] for cid, row in rows.items()}
                    keep, reparent = plan_prune(
                        parents, self._open_interrupts(thread_id, ns)
                    )
                    for cid in list(rows):
                        if cid not in keep:
                            del rows[cid]
                            self.writes.pop((thread_id, ns, cid), None)
                    for cid, parent in reparent.items():
                        rows[cid] = _reparented(rows[cid], parent)
                self._gc_blobs(thread_id)

    def _open_interrupts(self, thread_id: str, ns: str) -> set[str]:
        return open_interrupts(
            (cid, task_id, channel)
            for (thread, wns, cid), bucket in self.writes.items()
            if thread == thread_id and wns == ns
            for _, (task_id, channel, _, _) in _entries(bucket)
        )

    def _gc_blobs(self, thread_id: str) -> None:
        base_of = {
            (ns, channel, version): _base_of(ns, record)
            for (thread, ns, channel, version), record in self.blobs.items()
            if thread == thread_id
        }
        wanted = [
            (ns, channel, str(version))
            for ns, rows in self.storage.get(thread_id, {}).items()
            for cp_typed, *_ in rows.values()
            for channel, version in self._structure(cp_typed, "checkpoint")[
                "channel_versions"
            ].items()
        ]
        live = live_blob_keys(wanted, base_of)
        for key in [k for k in self.blobs if k[0] == thread_id and k[1:] not in live]:
            del self.blobs[key]

    def stored_bytes(self, thread_id: str) -> int:
        thread_id = str(thread_id)
        with self.lock:
            total = sum(
                len(self._structure_bytes(cp))
                + len(meta if isinstance(meta, bytes) else meta[1])
                for rows in self.storage.get(thread_id, {}).values()
                for cp, meta, *_ in rows.values()
            )
            total += sum(
                len(record if isinstance(record, bytes) else record.payload)
                for key, record in self.blobs.items()
                if key[0] == thread_id
            )
            total += sum(
                len(self._writes_bytes(typed))
                for key, bucket in self.writes.items()
                if key[0] == thread_id
                for _, (_, _, typed, _) in _entries(bucket)
            )
        return total

    def _writes_bytes(self, typed: tuple[str, Any]) -> bytes:
        """An entry's payload as the other savers would store it (packed)."""
        if typed[0] != SCALAR_WRITES:
            payload: bytes = typed[1]
            return payload
        flat = typed[1]
        writes = builtins.list(zip(flat[::2], flat[1::2], strict=True))
        ((_, _, _, packed),) = encode_task_writes(self.serde, writes)
        return packed

    def _structure_bytes(self, typed: bytes | tuple[str, Any]) -> bytes:
        """A structure's payload as the SQL savers would store it (packed)."""
        if not isinstance(typed, bytes) and typed[0] not in (COMPACT, "jsonraw"):
            payload: bytes = typed[1]
            return payload
        packed = pack_structure(self._structure(typed, "a stored checkpoint"))
        return dumps_structure(self.serde, packed)[1]

    def set_thread_ttl(self, thread_id: str, ttl: timedelta | float | None) -> None:
        with self.lock:
            deadline = ttl_deadline(ttl)
            if deadline is None:
                self.deadlines.pop(str(thread_id), None)
            else:
                self.deadlines[str(thread_id)] = deadline

    def sweep_expired(self, now: datetime | None = None) -> builtins.list[str]:
        moment = now or datetime.now(UTC)
        with self.lock:
            expired = [t for t, d in self.deadlines.items() if d <= moment]
            for thread_id in expired:
                self.delete_thread(thread_id)
        return sorted(expired)

    # -- async twins ---------------------------------------------------------------

    async def aput_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[tuple[str, str, Sequence[tuple[str, Any]]]],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put_step(config, task_writes, checkpoint, metadata, new_versions)


MemorySaver = InMemorySaver
"""LangGraph's older name for :class:`InMemorySaver`."""

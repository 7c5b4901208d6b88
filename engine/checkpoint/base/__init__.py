"""The checkpoint saver contract shared by the memory, SQLite and Postgres backends.

A checkpoint is the state of one thread (and namespace) after a super-step:
channel values, channel versions, and the versions each node has seen. Pending
writes are the writes of tasks that finished in the step *after* a checkpoint;
they make resuming exact (finished tasks are not run again).

Backends persist opaque ``(type_tag, payload)`` pairs made by ``self.serde``.
A package, as in LangGraph: :mod:`engine.checkpoint.base.id` makes the UUIDv6
checkpoint ids (``uuid6``).
"""

from __future__ import annotations

import builtins
import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple, TypedDict

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    ERROR,
    INTERRUPT,
    RESUME,
)
from engine._internal._ids import new_checkpoint_id, utc_now_iso
from engine._internal._typing import MISSING, RunnableConfig
from engine.checkpoint._delta_history import DeltaChannelHistory, DeltaNode, DeltaWalk
from engine.checkpoint._lease import DEFAULT_LEASE_SECONDS, ThreadLease
from engine.checkpoint.serde.base import (
    SerializerProtocol,
    UntypedSerializerProtocol,
    maybe_add_typed_methods,
)
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.checkpoint.serde.types import ChannelProtocol
from engine.errors import (
    CheckpointConflictError,
    EmptyChannelError,
    ErrorCode,
    error_message,
)

__all__ = (
    "EXCLUDED_METADATA_KEYS",
    "WRITES_IDX_MAP",
    "BaseCheckpointSaver",
    "ChannelVersions",
    "Checkpoint",
    "CheckpointMetadata",
    "CheckpointSummary",
    "CheckpointTuple",
    "DeltaChannelHistory",
    "EmptyChannelError",
    "PendingWrite",
    "PruneStrategy",
    "StepSave",
    "ThreadLease",
    "config_for",
    "conflict",
    "copy_checkpoint",
    "create_checkpoint",
    "empty_checkpoint",
    "get_checkpoint_id",
    "get_checkpoint_metadata",
    "get_serializable_checkpoint_metadata",
    "lease_key_of",
    "metadata_matches",
    "require_thread_id",
    "ttl_deadline",
    "writes_sort_key",
)

ChannelVersions = dict[str, str | int | float]
PendingWrite = tuple[str, str, Any]
PruneStrategy = Literal["keep_latest", "delete"]

CHECKPOINT_FORMAT = 4

WRITES_IDX_MAP = {ERROR: -1, INTERRUPT: -3, RESUME: -4}
"""Special writes are stored at fixed negative indexes so re-saving them replaces
the previous value (a task has one error, one interrupt list, one resume list).
A task's regular writes are one unit: a re-save keeps the first set, as a whole
(see ``engine.checkpoint._pending_writes``)."""

EXCLUDED_METADATA_KEYS = frozenset(
    {
        "thread_id",
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "langgraph_step",
        "langgraph_node",
        "langgraph_triggers",
        "langgraph_path",
        "langgraph_checkpoint_ns",
    }
)
"""Config keys :func:`get_checkpoint_metadata` never copies into metadata: they
address the checkpoint or describe the task, and are stored elsewhere."""


def writes_sort_key(
    task_path: str, task_id: str = "", idx: int = 0
) -> tuple[str, str, int]:
    """The order a step's writes are applied in: by task path (the string given
    to ``put_writes``), task id, then index. A saver that hands back stored writes
    for replay must sort them by it, or an order-sensitive reducer would rebuild
    another value than the run made."""
    return (task_path, task_id, idx)


EXPECTED_HEAD = "__engine_expected_head"
"""Config key: when present in ``put``'s config, the saver refuses the write unless
this checkpoint id is still the newest of the thread and namespace (fencing)."""


class CheckpointMetadata(TypedDict, total=False):
    """What is known about how a checkpoint came to be."""

    source: Literal["input", "loop", "update", "fork"]
    """``input`` (a run's input), ``loop`` (a super-step), ``update`` (update_state),
    ``fork`` (a copy of another checkpoint)."""
    step: int
    """-1 for the first input checkpoint, then 0, 1, ..."""
    parents: dict[str, str]
    """Checkpoint ids of the parent graphs, by namespace."""
    writes: dict[str, Any] | None
    """The updates that produced this checkpoint, by node name."""
    run_id: str
    thread_id: str
    counters_since_delta_snapshot: dict[str, tuple[int, int]]
    """Per ``DeltaChannel``: ``(steps that wrote it, steps)`` since its last saved
    snapshot; channels at ``(0, 0)`` are left out, and so is the key when all are.
    Stored as JSON, so read back as 2-item lists."""


class Checkpoint(TypedDict, total=False):
    """State of a thread at one point in time."""

    v: int
    """Format version of this dict."""
    id: str
    """Unique, time-ordered id: sorting ids sorts checkpoints oldest first."""
    ts: str
    """ISO 8601 creation time."""
    channel_values: dict[str, Any]
    """Channel name -> value (only channels that hold a value)."""
    channel_versions: ChannelVersions
    """Channel name -> version; versions increase within a thread."""
    versions_seen: dict[str, ChannelVersions]
    """Node name -> channel name -> the version that node last ran on."""
    updated_channels: list[str] | None
    """Channels written in the step that made this checkpoint."""
    schema_version: int
    """Version of the graph's state schema this checkpoint was written under."""
    channel_deltas: dict[str, tuple[str | int | float, int]]
    """Hint for savers, never stored as such: channel -> (previous version, n) when
    the new value is the previous version's value with ``value[n:]`` appended."""


class CheckpointTuple(NamedTuple):
    """A checkpoint with its config, metadata, parent and pending writes."""

    config: RunnableConfig
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    parent_config: RunnableConfig | None = None
    pending_writes: list[PendingWrite] | None = None


class CheckpointSummary(NamedTuple):
    """What a timeline needs of a checkpoint, without its values or writes."""

    config: RunnableConfig
    metadata: CheckpointMetadata
    parent_config: RunnableConfig | None
    created_at: str | None


StepSave = tuple[
    RunnableConfig,
    Sequence[tuple[str, str, Sequence[tuple[str, Any]]]],
    "Checkpoint | None",
    "CheckpointMetadata | None",
    "ChannelVersions",
]
"""One entry of ``put_steps``: ``(config, task_writes, checkpoint, metadata,
new_versions)``; ``task_writes`` are ``(task_id, task_path, writes)`` saved against
the checkpoint ``config`` addresses; ``checkpoint`` None saves only the writes."""


def empty_checkpoint() -> Checkpoint:
    """A checkpoint with no values, versions or history."""
    return Checkpoint(
        v=CHECKPOINT_FORMAT,
        id=new_checkpoint_id(-1),
        ts=utc_now_iso(),
        channel_values={},
        channel_versions={},
        versions_seen={},
        updated_channels=None,
    )


def copy_checkpoint(checkpoint: Checkpoint) -> Checkpoint:
    """A copy whose dicts can be changed without touching the original (values shared)."""
    copied = Checkpoint(
        v=checkpoint.get("v", CHECKPOINT_FORMAT),
        id=checkpoint["id"],
        ts=checkpoint["ts"],
        channel_values=checkpoint["channel_values"].copy(),
        channel_versions=checkpoint["channel_versions"].copy(),
        versions_seen={k: v.copy() for k, v in checkpoint["versions_seen"].items()},
        updated_channels=checkpoint.get("updated_channels"),
    )
    if "schema_version" in checkpoint:
        copied["schema_version"] = checkpoint["schema_version"]
    return copied


def create_checkpoint(
    checkpoint: Checkpoint,
    channels: Mapping[str, ChannelProtocol[Any, Any, Any]] | None,
    step: int,
    *,
    id: str | None = None,
) -> Checkpoint:
    """A new checkpoint after ``checkpoint``: its versions, and its values or,
    when ``channels`` are given, theirs.

    Only channels that ``checkpoint`` has a version for are read, and empty ones
    are left out. The id is ``id``, else a new one for ``step``; ``ts`` is now;
    ``updated_channels`` is None.
    """
    if channels is None:
        values = checkpoint["channel_values"]
    else:
        values = {}
        for name, channel in channels.items():
            if name not in checkpoint["channel_versions"]:
                continue
            try:
                value = channel.checkpoint()
            except EmptyChannelError:
                continue
            if value is not MISSING:
                values[name] = value
    created = Checkpoint(
        v=CHECKPOINT_FORMAT,
        id=id or new_checkpoint_id(step),
        ts=utc_now_iso(),
        channel_values=values,
        channel_versions=checkpoint["channel_versions"],
        versions_seen=checkpoint["versions_seen"],
        updated_channels=None,
    )
    if "schema_version" in checkpoint:
        created["schema_version"] = checkpoint["schema_version"]
    return created


def get_checkpoint_id(config: RunnableConfig) -> str | None:
    """The ``checkpoint_id`` a config addresses, if any."""
    checkpoint_id: str | None = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    return checkpoint_id


def require_thread_id(config: RunnableConfig, what: str = "A checkpointer") -> str:
    """The config's ``thread_id``, or a clear error saying how to pass one."""
    thread_id = config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)
    if thread_id is None or thread_id == "":
        raise ValueError(
            error_message(
                f"{what} requires a thread_id in the config, e.g. "
                '{"configurable": {"thread_id": "my-thread"}}',
                ErrorCode.MISSING_CHECKPOINTER,
            )
        )
    return str(thread_id)


def lease_key_of(config: RunnableConfig) -> tuple[str, str]:
    """``(thread_id, checkpoint_ns)``: the lease a run on ``config`` takes."""
    ns = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS) or ""
    return require_thread_id(config), ns


def conflict(
    thread_id: str, ns: str, expected: str | None, head: str | None
) -> CheckpointConflictError:
    """The error a fenced ``put`` raises when the thread's head moved (see EXPECTED_HEAD)."""
    return CheckpointConflictError(
        error_message(
            f"Thread {thread_id!r} (namespace {ns!r}) was advanced by another writer: "
            f"expected its latest checkpoint to be {expected!r}, found {head!r}. "
            "Only one run may write a thread at a time; re-read the thread and retry, "
            "or fork deliberately from a checkpoint_id.",
            ErrorCode.CHECKPOINT_CONFLICT,
        )
    )


def get_checkpoint_metadata(
    config: RunnableConfig, metadata: CheckpointMetadata
) -> CheckpointMetadata:
    """``metadata`` plus the config's plain values, as LangGraph stores them.

    Keys of ``config["metadata"]``, then of ``config["configurable"]``, are added
    when ``metadata`` (or an earlier source) lacks them, their value is a
    string, number or boolean, and they are neither internal (``__`` prefix) nor
    in :data:`EXCLUDED_METADATA_KEYS`. NUL characters are removed from strings
    (Postgres text cannot hold them).
    """
    merged: dict[str, Any] = {
        k: v.replace("\u0000", "") if isinstance(v, str) else v
        for k, v in metadata.items()
    }
    for source in (config.get("metadata"), config.get(CONF)):
        for key, value in (source or {}).items():
            if key in merged or key in EXCLUDED_METADATA_KEYS or key.startswith("__"):
                continue
            if isinstance(value, str):
                merged[key] = value.replace("\u0000", "")
            elif isinstance(value, (int, float, bool)):
                merged[key] = value
    return merged  # type: ignore[return-value]


def get_serializable_checkpoint_metadata(
    config: RunnableConfig, metadata: CheckpointMetadata
) -> CheckpointMetadata:
    """:func:`get_checkpoint_metadata` without ``writes`` (which may hold values
    that only the serializer, not plain JSON, can store)."""
    merged = get_checkpoint_metadata(config, metadata)
    merged.pop("writes", None)
    return merged


class BaseCheckpointSaver:
    """Storage contract for checkpoints and pending writes.

    Implement the sync methods, the async twins, or both; unimplemented ones raise
    ``NotImplementedError``. Every backend must pass ``tests/conformance``.

    Beyond LangGraph's contract, savers here support retention (``copy_thread``,
    ``prune``, per-thread TTL) and fencing: a ``put`` whose config carries
    ``EXPECTED_HEAD`` fails with ``CheckpointConflictError`` if another writer
    advanced the thread meanwhile; and thread leases (``acquire_lease`` and its
    kin, ``supports_leases``): a run holds its thread while it runs, and a save
    whose config carries ``HELD_LEASE`` is refused with ``ThreadLeaseLostError``
    once its run lost the lease (see ``engine.checkpoint._lease``).
    """

    serde: SerializerProtocol

    def __init__(
        self,
        *,
        serde: SerializerProtocol | UntypedSerializerProtocol | None = None,
    ) -> None:
        self.serde = (
            maybe_add_typed_methods(serde)
            if serde is not None
            else JsonPlusSerializer()
        )

    @property
    def config_specs(self) -> list[Any]:
        return []

    # -- reads -------------------------------------------------------------------

    def get(self, config: RunnableConfig) -> Checkpoint | None:
        """The checkpoint a config addresses (latest of the thread when no id)."""
        if value := self.get_tuple(config):
            return value.checkpoint
        return None

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first; ``filter`` matches metadata keys exactly."""
        raise NotImplementedError

    # -- writes ------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; only channels in ``new_versions`` need new blobs."""
        raise NotImplementedError

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against the checkpoint ``config`` addresses.

        Special writes (error, interrupt, resume) replace the task's previous
        one; its regular writes are kept from the first save, as a whole (a
        retry's writes are not mixed with the first attempt's). Pending writes
        read back by task path, task id, then the special writes followed by the
        regular ones in the order written.
        """
        raise NotImplementedError

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of a thread (all namespaces)."""
        raise NotImplementedError

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints made by these runs, in every thread and namespace.

        A checkpoint belongs to the run whose id its metadata's ``run_id`` holds;
        its pending writes go with it. The checkpoints of other runs stay, with
        their pending writes, and one whose parent was deleted is re-parented to
        its nearest remaining ancestor (none: it becomes a root), so a history
        stays a tree. Unknown run ids, and an empty list, delete nothing.
        """
        raise NotImplementedError

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's full history (all namespaces) to a new thread id."""
        raise NotImplementedError

    def prune(
        self, thread_ids: Sequence[str], *, strategy: PruneStrategy = "keep_latest"
    ) -> None:
        """Shrink threads' history.

        ``keep_latest`` keeps, per namespace, the newest checkpoint plus every
        checkpoint that is a fork point (has several children) or holds a pending
        interrupt, so branches and open questions survive; ``delete`` removes the
        threads entirely.
        """
        raise NotImplementedError

    def set_thread_ttl(self, thread_id: str, ttl: timedelta | float | None) -> None:
        """Expire a thread ``ttl`` (seconds or timedelta) from now; ``None`` clears it."""
        raise NotImplementedError

    def sweep_expired(self, now: datetime | None = None) -> builtins.list[str]:
        """Delete threads whose TTL has passed; returns their ids."""
        raise NotImplementedError

    def list_summaries(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointSummary]:
        """Like :meth:`list` (newest first, same arguments) but without channel
        values or pending writes: what a history or timeline view needs. SQL
        backends answer it from the checkpoint rows alone."""
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield CheckpointSummary(
                item.config,
                item.metadata,
                item.parent_config,
                item.checkpoint.get("ts"),
            )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """What rebuilds each ``DeltaChannel`` in ``channels`` at the checkpoint
        ``config`` addresses: the nearest stored value up its parent chain (the
        ``seed``, absent when there is none) and the writes stored on the
        checkpoints from there to its parent, oldest first (see
        ``engine.checkpoint._delta_history``). Every name gets an entry; no names,
        no entries. This default walks ``get_tuple``; savers may read less.
        """
        if not channels:
            return {}
        walk = DeltaWalk(channels, _delta_node(self.get_tuple(config)))
        while walk.next_id is not None:
            walk.visit(_delta_node(self.get_tuple(_with_id(config, walk.next_id))))
        return walk.result()

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async twin of :meth:`get_delta_channel_history`."""
        if not channels:
            return {}
        walk = DeltaWalk(channels, _delta_node(await self.aget_tuple(config)))
        while walk.next_id is not None:
            parent = await self.aget_tuple(_with_id(config, walk.next_id))
            walk.visit(_delta_node(parent))
        return walk.result()

    def put_steps(
        self, steps: Sequence[StepSave]
    ) -> builtins.list[RunnableConfig | None]:
        """Save several steps in order, in one transaction where the backend can
        (group commit for background saves). Returns each checkpoint's config
        (None for writes-only entries). When one entry fails, it and the entries
        after it are not kept; entries before it may be (as if saved one by one)."""
        results: builtins.list[RunnableConfig | None] = []
        for config, task_writes, checkpoint, metadata, new_versions in steps:
            if checkpoint is None:
                for task_id, task_path, writes in task_writes:
                    self.put_writes(config, writes, task_id, task_path)
                results.append(None)
                continue
            put_step = getattr(self, "put_step", None)
            if put_step is not None:
                results.append(
                    put_step(config, task_writes, checkpoint, metadata, new_versions)
                )
            else:
                for task_id, task_path, writes in task_writes:
                    self.put_writes(config, writes, task_id, task_path)
                results.append(
                    self.put(config, checkpoint, metadata or {}, new_versions)
                )
        return results

    def stored_bytes(self, thread_id: str) -> int:
        """Diagnostic: bytes of serialized data stored for a thread (all namespaces).

        Counts the payloads the saver keeps (checkpoints, metadata, channel values,
        pending writes), not database overhead, so backends compare like for like.
        """
        raise NotImplementedError

    # -- async twins (default: run the sync method) --------------------------------

    async def alist_summaries(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointSummary]:
        """Async twin of :meth:`list_summaries`."""
        async for item in self.alist(config, filter=filter, before=before, limit=limit):
            yield CheckpointSummary(
                item.config,
                item.metadata,
                item.parent_config,
                item.checkpoint.get("ts"),
            )

    async def aput_steps(
        self, steps: Sequence[StepSave]
    ) -> builtins.list[RunnableConfig | None]:
        """Async twin of :meth:`put_steps`."""
        results: builtins.list[RunnableConfig | None] = []
        for config, task_writes, checkpoint, metadata, new_versions in steps:
            if checkpoint is None:
                for task_id, task_path, writes in task_writes:
                    await self.aput_writes(config, writes, task_id, task_path)
                results.append(None)
                continue
            aput_step = getattr(self, "aput_step", None)
            if aput_step is not None:
                results.append(
                    await aput_step(
                        config, task_writes, checkpoint, metadata, new_versions
                    )
                )
            else:
                for task_id, task_path, writes in task_writes:
                    await self.aput_writes(config, writes, task_id, task_path)
                results.append(
                    await self.aput(config, checkpoint, metadata or {}, new_versions)
                )
        return results

    async def aget(self, config: RunnableConfig) -> Checkpoint | None:
        if value := await self.aget_tuple(config):
            return value.checkpoint
        return None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        nothing: tuple[CheckpointTuple, ...] = ()
        for item in nothing:  # an async generator that raises when iterated
            yield item
        raise NotImplementedError

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        raise NotImplementedError

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        raise NotImplementedError

    async def adelete_thread(self, thread_id: str) -> None:
        raise NotImplementedError

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async twin of :meth:`delete_for_runs`."""
        raise NotImplementedError

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        raise NotImplementedError

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: PruneStrategy = "keep_latest"
    ) -> None:
        raise NotImplementedError

    async def aset_thread_ttl(
        self, thread_id: str, ttl: timedelta | float | None
    ) -> None:
        raise NotImplementedError

    async def asweep_expired(self, now: datetime | None = None) -> builtins.list[str]:
        raise NotImplementedError

    async def astored_bytes(self, thread_id: str) -> int:
        raise NotImplementedError

    # -- thread leases (see engine.checkpoint._lease) ------------------------------

    supports_leases: bool = False
    """Whether this saver keeps thread leases. Runs on a saver without them take
    no lease (LangGraph's behaviour: concurrent runs on a thread both go on)."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS
    """How long a run's lease on a thread lasts without renewal; a run renews it
    every third of that. Set it on the saver (``saver.lease_seconds = 60``) to
    match a worker's own lease: a run resumed after its process died waits at
    most this long for the dead run's lease to expire."""

    def acquire_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> ThreadLease:
        """Take the lease on a thread and namespace for ``seconds``, unless another
        holder's lease is still running. Returns the lease as it stands after the
        attempt: taken when its ``holder`` is ``holder`` (taking it again as the
        same holder renews it)."""
        raise NotImplementedError

    def acquire_lease_and_get_tuple(
        self, config: RunnableConfig, holder: str, seconds: float
    ) -> tuple[ThreadLease, CheckpointTuple | None]:
        """:meth:`acquire_lease` on the thread and namespace of ``config`` and, when
        taken, :meth:`get_tuple` of ``config`` (None when another holder's lease
        runs: nothing is read then). A run starts with this; the SQL savers do
        both in one transaction."""
        thread_id, ns = lease_key_of(config)
        taken = self.acquire_lease(thread_id, ns, holder, seconds)
        if taken.holder != holder:
            return taken, None
        try:
            return taken, self.get_tuple(config)
        except BaseException:  # as if nothing was taken (the SQL savers roll back)
            self.release_lease(thread_id, ns, holder)
            raise

    def renew_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> bool:
        """Extend ``holder``'s lease to ``seconds`` from now; False when ``holder``
        no longer holds it (taken over or released)."""
        raise NotImplementedError

    def release_lease(self, thread_id: str, checkpoint_ns: str, holder: str) -> None:
        """Give the lease back if ``holder`` still holds it (else do nothing)."""
        raise NotImplementedError

    def get_lease(self, thread_id: str, checkpoint_ns: str) -> ThreadLease | None:
        """The lease on a thread and namespace, expired or not; None when free."""
        raise NotImplementedError

    async def aacquire_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> ThreadLease:
        """Async twin of :meth:`acquire_lease`."""
        raise NotImplementedError

    async def aacquire_lease_and_get_tuple(
        self, config: RunnableConfig, holder: str, seconds: float
    ) -> tuple[ThreadLease, CheckpointTuple | None]:
        """Async twin of :meth:`acquire_lease_and_get_tuple`."""
        thread_id, ns = lease_key_of(config)
        taken = await self.aacquire_lease(thread_id, ns, holder, seconds)
        if taken.holder != holder:
            return taken, None
        try:
            return taken, await self.aget_tuple(config)
        except BaseException:
            await self.arelease_lease(thread_id, ns, holder)
            raise

    async def arenew_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> bool:
        """Async twin of :meth:`renew_lease`."""
        raise NotImplementedError

    async def arelease_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str
    ) -> None:
        """Async twin of :meth:`release_lease`."""
        raise NotImplementedError

    async def aget_lease(
        self, thread_id: str, checkpoint_ns: str
    ) -> ThreadLease | None:
        """Async twin of :meth:`get_lease`."""
        raise NotImplementedError

    # -- versions ----------------------------------------------------------------

    def get_next_version(self, current: Any, channel: Any = None) -> str:
        """Next channel version: a zero-padded counter plus a random tie-breaker.

        The random part keeps versions unique across branches of one thread, so a
        value is stored once per (thread, namespace, channel, version) even when
        two forks reach the same counter.
        """
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(str(current).split(".", 1)[0])
        # 12 digits sort correctly up to a trillion steps; 8 hex digits of randomness
        return f"{counter + 1:012d}.{random.getrandbits(32):08x}"


def config_for(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
) -> RunnableConfig:
    """The config that addresses one checkpoint."""
    conf: dict[str, Any] = {
        CONFIG_KEY_THREAD_ID: thread_id,
        CONFIG_KEY_CHECKPOINT_NS: checkpoint_ns,
    }
    if checkpoint_id is not None:
        conf[CONFIG_KEY_CHECKPOINT_ID] = checkpoint_id
    return {CONF: conf}


def _with_id(config: RunnableConfig, checkpoint_id: str) -> RunnableConfig:
    return {CONF: {**config.get(CONF, {}), CONFIG_KEY_CHECKPOINT_ID: checkpoint_id}}


def _delta_node(saved: CheckpointTuple | None) -> DeltaNode | None:
    if saved is None:
        return None
    parent = saved.parent_config
    return DeltaNode(
        saved.checkpoint["id"],
        get_checkpoint_id(parent) if parent is not None else None,
        saved.checkpoint["channel_versions"],
        saved.checkpoint["channel_values"],
        saved.pending_writes or (),
    )


def ttl_deadline(ttl: timedelta | float | None) -> datetime | None:
    """Absolute expiry time for a TTL given in seconds or as a timedelta."""
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if seconds <= 0:
        raise ValueError(f"ttl must be positive, got {ttl!r}")
    return datetime.now(UTC) + timedelta(seconds=seconds)


def metadata_matches(
    metadata: Mapping[str, Any], filter: Mapping[str, Any] | None
) -> bool:
    """True when every filter key is in ``metadata`` with an equal value."""
    if not filter:
        return True
    return all(metadata.get(k) == v for k, v in filter.items())

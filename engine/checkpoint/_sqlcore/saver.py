"""SqlCheckpointSaver: the saver API of the SQL backends, over one driver method.

Every public method builds an operation (see ``dialect.Op``) and hands it to
``_run`` (sync) or ``_arun`` (async), which the backends implement with their
connection: one operation, one transaction, one commit. ``drive`` and
``adrive`` are the loops those drivers share.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
)
from engine._internal._typing import RunnableConfig
from engine.checkpoint._blobs import BlobRecord, inline_values
from engine.checkpoint._lease import ThreadLease
from engine.checkpoint._sqlcore import lease, reads, retention, saves
from engine.checkpoint._sqlcore.delta import delta_channel_history
from engine.checkpoint._sqlcore.dialect import Batch, Op, Rows, SqlDialect, Stmt
from engine.checkpoint._sqlcore.saves import TaskWrites
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointSummary,
    CheckpointTuple,
    DeltaChannelHistory,
    PruneStrategy,
    StepSave,
    lease_key_of,
    ttl_deadline,
)
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("SETUP_HINT", "SqlCheckpointSaver", "adrive", "drive", "run_each")

SETUP_HINT = (
    "The checkpoint tables do not exist in this database: call the saver's setup() "
    "once (it creates them, and upgrades them after an engine upgrade)."
)

T = TypeVar("T")


class _PageReader(Protocol[T]):
    """``reads.list_page`` or ``reads.summaries_page``: one page and the next cursor."""

    def __call__(
        self,
        d: SqlDialect,
        serde: SerializerProtocol,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
        cursor: reads.ListCursor | None,
        now: datetime,
    ) -> Op[tuple[builtins.list[T], reads.ListCursor | None]]: ...


def drive(
    op: Op[T],
    execute: Callable[[Stmt | Batch], Any],
    begin: Callable[[], None],
    end: Callable[[bool], None],
) -> T:
    """Run ``op``: prepare it, ``begin()``, execute its statements, ``end(ok)``.

    ``execute`` gets a statement (returns its rows, or None) or a batch (returns
    the list of their results). ``end(True)`` commits, ``end(False)`` rolls back
    (errors propagate after it). An operation that needs no statement never opens
    a transaction.
    """
    try:
        stmt = next(op)
    except StopIteration as done:
        result: T = done.value
        return result
    begin()
    ok = False
    try:
        while True:
            rows = execute(stmt)
            del stmt  # its parameters (payloads) need not live on while the op runs
            try:
                stmt = op.send(rows)
            except StopIteration as done:
                ok = True
                result = done.value
                return result
    finally:
        op.close()
        end(ok)


async def adrive(
    op: Op[T],
    execute: Callable[[Stmt | Batch], Awaitable[Any]],
    begin: Callable[[], Awaitable[None]],
    end: Callable[[bool], Awaitable[None]],
) -> T:
    """The async twin of :func:`drive`."""
    try:
        stmt = next(op)
    except StopIteration as done:
        result: T = done.value
        return result
    await begin()
    ok = False
    try:
        while True:
            rows = await execute(stmt)
            del stmt  # its parameters (payloads) need not live on while the op runs
            try:
                stmt = op.send(rows)
            except StopIteration as done:
                ok = True
                result = done.value
                return result
    finally:
        op.close()
        await end(ok)


def run_each(
    execute: Callable[[Stmt], Rows | None], stmt: Stmt | Batch
) -> Rows | None | builtins.list[Rows | None]:
    """For drivers without batching: a batch is its statements one by one."""
    if isinstance(stmt, Stmt):
        return execute(stmt)
    return [execute(one) for one in stmt]


def _now() -> datetime:
    return datetime.now(UTC)


_GUESSED_HEADS = 1024
"""Threads whose head a saver remembers as a guess (``guesses_heads``)."""

_GUESSED_HEAD_BYTES = 8 * 1024
"""Payload bytes of the values a guessed head keeps (``_remember_heads``): with
``_GUESSED_HEADS``, at most 8 MiB a saver."""


class SqlCheckpointSaver(BaseCheckpointSaver):
    """The checkpoint API on a SQL database; subclasses supply the driver.

    Args:
        serde: serializer (default: tagged JSON).
        default_ttl: seconds after its last checkpoint when a thread expires
            (None: never). Expired threads are invisible to reads at once and
            deleted by :meth:`sweep_expired`.
    """

    dialect: ClassVar[SqlDialect]

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        default_ttl: float | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.default_ttl = default_ttl
        self._chains = saves.ChainBook()
        self._heads: dict[tuple[str, str], reads.HeadGuess] = {}
        """Per (thread, namespace), the head this saver last saved there (see
        ``guesses_heads``); only a guess: a read checks it against the row."""
        self._heads_lock = threading.Lock()  # saves come from several threads

    guesses_heads: ClassVar[bool] = True
    """Whether taking a thread's lease also sends the reads of the head this
    saver last saved there, so that a resumed run's lease and state come in
    one round trip when no one else saved since (Postgres: one round trip
    fewer an invoke), and takes the head's small values from what it stored
    instead of reading them (both savers: a resumed SQLite run ~7% faster)."""

    def _keep(self, staged: saves.Staged, steps: Sequence[StepSave]) -> None:
        """After a committed save of ``steps``: keep what it staged."""
        self._chains.keep(staged.chains)
        self._remember_heads(steps, staged.values)

    def _remember_heads(
        self,
        steps: Sequence[StepSave],
        values: Mapping[reads.BlobKey, BlobRecord],
    ) -> None:
        """Keep the newest checkpoint each (thread, namespace) of ``steps``
        saved as the guess of its head (see ``guesses_heads``), with the records
        of its small values: those just stored (``values``) and those of the
        guess before that it still names (unchanged channels), up to
        ``_GUESSED_HEAD_BYTES`` of payload."""
        if not self.guesses_heads:
            return
        heads = self._heads
        done: set[tuple[str, str]] = set()
        for config, _writes, checkpoint, _metadata, _versions in reversed(steps):
            if checkpoint is None:
                continue
            conf = config.get(CONF, {})
            thread_id = str(conf.get(CONFIG_KEY_THREAD_ID))
            ns = conf.get(CONFIG_KEY_CHECKPOINT_NS) or ""
            if (thread_id, ns) in done:  # an older step of the batch
                continue
            done.add((thread_id, ns))
            inline = inline_values(checkpoint)  # in the row: no value to read
            ordered = [
                (thread_id, ns, channel, str(version))
                for channel, version in checkpoint["channel_versions"].items()
                if channel not in inline
            ]
            keys = frozenset(ordered)
            with self._heads_lock:
                before = heads.pop((thread_id, ns), None)  # newest last
                known = before[4] if before is not None else {}
                kept: dict[reads.BlobKey, BlobRecord] = {}
                room = _GUESSED_HEAD_BYTES
                for key in ordered:
                    record = values.get(key) or known.get(key)
                    if record is not None and len(record.payload) <= room:
                        kept[key] = record
                        room -= len(record.payload)
                heads[(thread_id, ns)] = (thread_id, ns, checkpoint["id"], keys, kept)
                if len(heads) > _GUESSED_HEADS:
                    del heads[next(iter(heads))]

    # -- drivers -------------------------------------------------------------------

    def _run(self, op: Op[T], *, write: bool) -> T:
        """Run one operation in one transaction (``write``: it changes data)."""
        raise NotImplementedError

    async def _arun(self, op: Op[T], *, write: bool) -> T:
        """Async driver; by default the sync one in a worker thread."""
        return await asyncio.to_thread(self._run, op, write=write)

    # -- paging (list, list_summaries and their async twins) ------------------------

    def _pages(
        self,
        read_page: _PageReader[T],
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[T]:
        """The items of ``read_page``'s pages, one transaction per page, until
        ``limit`` items or the last page."""
        remaining = limit
        cursor: reads.ListCursor | None = None
        while remaining is None or remaining > 0:
            op = read_page(
                self.dialect,
                self.serde,
                config,
                filter=filter,
                before=before,
                limit=remaining,
                cursor=cursor,
                now=_now(),
            )
            page, cursor = self._run(op, write=False)
            yield from page
            if remaining is not None:
                remaining -= len(page)
            if cursor is None:
                return

    async def _apages(
        self,
        read_page: _PageReader[T],
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> AsyncIterator[T]:
        """Async twin of :meth:`_pages`."""
        remaining = limit
        cursor: reads.ListCursor | None = None
        while remaining is None or remaining > 0:
            op = read_page(
                self.dialect,
                self.serde,
                config,
                filter=filter,
                before=before,
                limit=remaining,
                cursor=cursor,
                now=_now(),
            )
            page, cursor = await self._arun(op, write=False)
            for item in page:
                yield item
            if remaining is not None:
                remaining -= len(page)
            if cursor is None:
                return

    # -- reads -------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        op = reads.get_tuple(self.dialect, self.serde, config, _now())
        return self._run(op, write=False)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, read a page at a time (no connection is held
        between pages, so a caller may stop iterating at any point)."""
        yield from self._pages(reads.list_page, config, filter, before, limit)

    def list_summaries(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointSummary]:
        """Like :meth:`list`, from the checkpoint rows alone: one statement per
        page, no channel values, no pending writes, no checkpoint decoding."""
        yield from self._pages(reads.summaries_page, config, filter, before, limit)

    def stored_bytes(self, thread_id: str) -> int:
        return self._run(reads.stored_bytes(self.dialect, str(thread_id)), write=False)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        """See ``BaseCheckpointSaver``; one read transaction, two statements per
        ancestor, reading only the walked channels' values."""
        if not channels:
            return {}
        op = delta_channel_history(self.dialect, self.serde, config, channels, _now())
        return self._run(op, write=False)

    # -- writes ------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        staged = saves.Staged()
        op = self._put(config, checkpoint, metadata, new_versions, staged=staged)
        result = self._run(op, write=True)
        self._keep(staged, ((config, (), checkpoint, metadata, new_versions),))
        return result

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        op = _writes_op(self, config, writes, task_id, task_path)
        self._run(op, write=True)

    def put_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[TaskWrites],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """A step's last task writes and the checkpoint after it, in one commit.

        A fenced write that conflicts stores nothing, writes included.
        """
        staged = saves.Staged()
        op = self._put(config, checkpoint, metadata, new_versions, task_writes, staged)
        result = self._run(op, write=True)
        self._keep(staged, ((config, task_writes, checkpoint, metadata, new_versions),))
        return result

    releases_with_saves = True
    """``put_steps`` / ``aput_steps`` take ``release=``: see ``put_steps``."""

    def put_steps(
        self,
        steps: Sequence[StepSave],
        *,
        release: tuple[str, str, str] | None = None,
    ) -> builtins.list[RunnableConfig | None]:
        """Several steps (and writes-only entries) in order, in one transaction:
        one commit, and on Postgres one round trip when no delta base has to be
        read. Each entry's fencing is checked against the head the entries
        before it left. When one entry fails, nothing of the batch is kept.

        ``release``: ``(thread_id, checkpoint_ns, holder)`` of a lease to give
        back after the entries, in the same transaction (a run's last saves)."""
        if not steps:
            return []
        staged = saves.Staged()
        result = self._run(self._steps_op(steps, release, staged), write=True)
        self._keep(staged, steps)
        return result

    def _steps_op(
        self,
        steps: Sequence[StepSave],
        release: tuple[str, str, str] | None,
        staged: saves.Staged,
    ) -> Op[builtins.list[RunnableConfig | None]]:
        """The operation of ``put_steps`` / ``aput_steps``."""
        return saves.put_steps(
            self.dialect,
            self.serde,
            steps,
            default_ttl=self.default_ttl,
            book=self._chains,
            staged=staged,
            release=release,
        )

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        task_writes: Sequence[TaskWrites] = (),
        staged: saves.Staged | None = None,
    ) -> Op[RunnableConfig]:
        return saves.put(
            self.dialect,
            self.serde,
            config,
            checkpoint,
            metadata,
            new_versions,
            task_writes=task_writes,
            default_ttl=self.default_ttl,
            book=self._chains,
            staged=staged,
        )

    # -- retention ---------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        self._run(retention.delete_thread(self.dialect, str(thread_id)), write=True)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """See ``BaseCheckpointSaver``; one transaction."""
        op = retention.delete_for_runs(self.dialect, self.serde, run_ids)
        self._run(op, write=True)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        op = retention.copy_thread(
            self.dialect, str(source_thread_id), str(target_thread_id)
        )
        self._run(op, write=True)

    def prune(
        self, thread_ids: Sequence[str], *, strategy: PruneStrategy = "keep_latest"
    ) -> None:
        for op in self._prune_ops(thread_ids, strategy):
            self._run(op, write=True)

    def _prune_ops(
        self, thread_ids: Sequence[str], strategy: str
    ) -> builtins.list[Op[None]]:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(
                f"Unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'"
            )
        if strategy == "delete":
            return [retention.delete_thread(self.dialect, str(t)) for t in thread_ids]
        return [
            retention.prune_thread(self.dialect, self.serde, str(t)) for t in thread_ids
        ]

    def set_thread_ttl(self, thread_id: str, ttl: timedelta | float | None) -> None:
        op = retention.set_ttl(self.dialect, str(thread_id), ttl_deadline(ttl))
        self._run(op, write=True)

    def sweep_expired(self, now: datetime | None = None) -> builtins.list[str]:
        op = retention.sweep_expired(self.dialect, now or _now())
        return self._run(op, write=True)

    # -- thread leases (``lease``: rows of engine_thread_leases) --------------------

    supports_leases = True

    def acquire_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> ThreadLease:
        while True:  # again when the row was released between take and read
            op = lease.acquire(
                self.dialect, str(thread_id), checkpoint_ns, holder, seconds
            )
            if (taken := self._run(op, write=True)) is not None:
                return taken

    def acquire_lease_and_get_tuple(
        self, config: RunnableConfig, holder: str, seconds: float
    ) -> tuple[ThreadLease, CheckpointTuple | None]:
        while True:  # again when the row was released between take and read
            op = self._acquire_and_read(config, holder, seconds)
            try:
                taken, saved = self._run(op, write=True)
                if taken is not None and isinstance(saved, reads.Missed):
                    saved = self._run(self._read_missed(saved), write=False)
            except BaseException:
                # the take may have committed with the last read (Postgres sends
                # the commit in that round trip) before the rows failed to load
                with suppress(Exception):
                    self.release_lease(*lease_key_of(config), holder)
                raise
            if taken is not None:
                return taken, saved  # type: ignore[return-value]

    def renew_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> bool:
        op = lease.renew(self.dialect, str(thread_id), checkpoint_ns, holder, seconds)
        return self._run(op, write=True)

    def release_lease(self, thread_id: str, checkpoint_ns: str, holder: str) -> None:
        op = lease.release(self.dialect, str(thread_id), checkpoint_ns, holder)
        self._run(op, write=True)

    def get_lease(self, thread_id: str, checkpoint_ns: str) -> ThreadLease | None:
        op = lease.get(self.dialect, str(thread_id), checkpoint_ns)
        return self._run(op, write=False)

    async def aacquire_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> ThreadLease:
        while True:  # again when the row was released between take and read
            op = lease.acquire(
                self.dialect, str(thread_id), checkpoint_ns, holder, seconds
            )
            if (taken := await self._arun(op, write=True)) is not None:
                return taken

    async def aacquire_lease_and_get_tuple(
        self, config: RunnableConfig, holder: str, seconds: float
    ) -> tuple[ThreadLease, CheckpointTuple | None]:
        while True:  # again when the row was released between take and read
            op = self._acquire_and_read(config, holder, seconds)
            try:
                taken, saved = await self._arun(op, write=True)
                if taken is not None and isinstance(saved, reads.Missed):
                    saved = await self._arun(self._read_missed(saved), write=False)
            except BaseException:
                with suppress(Exception):  # as in the sync twin
                    await self.arelease_lease(*lease_key_of(config), holder)
                raise
            if taken is not None:
                return taken, saved  # type: ignore[return-value]

    def _read_missed(self, missed: reads.Missed) -> Op[CheckpointTuple | None]:
        """The values and writes of a head read with the lease that was not the
        guessed one (someone else saved it): one more statement batch."""
        return reads.tuple_of_row(self.dialect, self.serde, missed.rows, newest=True)

    def _acquire_and_read(
        self, config: RunnableConfig, holder: str, seconds: float
    ) -> Op[tuple[ThreadLease | None, CheckpointTuple | None | reads.Missed]]:
        """The operation taking ``config``'s thread lease and reading its
        checkpoint, with a guess of the head when the saver makes them
        (``guesses_heads``: the head it last saved there)."""
        guess = self._heads.get(lease_key_of(config)) if self.guesses_heads else None
        return lease.acquire_and_read(
            self.dialect, self.serde, config, holder, seconds, _now(), guess
        )

    async def arenew_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> bool:
        op = lease.renew(self.dialect, str(thread_id), checkpoint_ns, holder, seconds)
        return await self._arun(op, write=True)

    async def arelease_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str
    ) -> None:
        op = lease.release(self.dialect, str(thread_id), checkpoint_ns, holder)
        await self._arun(op, write=True)

    async def aget_lease(
        self, thread_id: str, checkpoint_ns: str
    ) -> ThreadLease | None:
        op = lease.get(self.dialect, str(thread_id), checkpoint_ns)
        return await self._arun(op, write=False)

    # -- async twins ---------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        op = reads.get_tuple(self.dialect, self.serde, config, _now())
        return await self._arun(op, write=False)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self._apages(reads.list_page, config, filter, before, limit):
            yield item

    async def alist_summaries(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointSummary]:
        async for item in self._apages(
            reads.summaries_page, config, filter, before, limit
        ):
            yield item

    async def astored_bytes(self, thread_id: str) -> int:
        return await self._arun(
            reads.stored_bytes(self.dialect, str(thread_id)), write=False
        )

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        if not channels:
            return {}
        op = delta_channel_history(self.dialect, self.serde, config, channels, _now())
        return await self._arun(op, write=False)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        staged = saves.Staged()
        op = self._put(config, checkpoint, metadata, new_versions, staged=staged)
        result = await self._arun(op, write=True)
        self._keep(staged, ((config, (), checkpoint, metadata, new_versions),))
        return result

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._arun(
            _writes_op(self, config, writes, task_id, task_path), write=True
        )

    async def aput_step(
        self,
        config: RunnableConfig,
        task_writes: Sequence[TaskWrites],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        staged = saves.Staged()
        op = self._put(config, checkpoint, metadata, new_versions, task_writes, staged)
        result = await self._arun(op, write=True)
        self._keep(staged, ((config, task_writes, checkpoint, metadata, new_versions),))
        return result

    async def aput_steps(
        self,
        steps: Sequence[StepSave],
        *,
        release: tuple[str, str, str] | None = None,
    ) -> builtins.list[RunnableConfig | None]:
        if not steps:
            return []
        staged = saves.Staged()
        result = await self._arun(self._steps_op(steps, release, staged), write=True)
        self._keep(staged, steps)
        return result

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(
            retention.delete_thread(self.dialect, str(thread_id)), write=True
        )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        op = retention.delete_for_runs(self.dialect, self.serde, run_ids)
        await self._arun(op, write=True)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        op = retention.copy_thread(
            self.dialect, str(source_thread_id), str(target_thread_id)
        )
        await self._arun(op, write=True)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: PruneStrategy = "keep_latest"
    ) -> None:
        for op in self._prune_ops(thread_ids, strategy):
            await self._arun(op, write=True)

    async def aset_thread_ttl(
        self, thread_id: str, ttl: timedelta | float | None
    ) -> None:
        op = retention.set_ttl(self.dialect, str(thread_id), ttl_deadline(ttl))
        await self._arun(op, write=True)

    async def asweep_expired(self, now: datetime | None = None) -> builtins.list[str]:
        op = retention.sweep_expired(self.dialect, now or _now())
        return await self._arun(op, write=True)


def _writes_op(
    saver: SqlCheckpointSaver,
    config: RunnableConfig,
    task_writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> Op[None]:
    return saves.put_writes(
        saver.dialect, saver.serde, config, task_writes, task_id, task_path
    )

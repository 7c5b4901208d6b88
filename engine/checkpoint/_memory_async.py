"""The in-memory saver's async methods: each one calls its sync twin.

Nothing the in-memory saver does waits on I/O, so its async API runs the sync
method in place (no thread hand-off). A mixin of
:class:`~engine.checkpoint.memory.InMemorySaver`.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from engine._internal._typing import RunnableConfig
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointSummary,
    CheckpointTuple,
    PruneStrategy,
    StepSave,
)

__all__ = ("MemoryAsyncMethods",)


class MemoryAsyncMethods(BaseCheckpointSaver):
    """Async twins of the in-memory saver's methods (see the module)."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def alist_summaries(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointSummary]:
        for item in self.list_summaries(
            config, filter=filter, before=before, limit=limit
        ):
            yield item

    async def aput_steps(
        self, steps: Sequence[StepSave]
    ) -> builtins.list[RunnableConfig | None]:
        return self.put_steps(steps)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: PruneStrategy = "keep_latest"
    ) -> None:
        self.prune(thread_ids, strategy=strategy)

    async def aset_thread_ttl(
        self, thread_id: str, ttl: timedelta | float | None
    ) -> None:
        self.set_thread_ttl(thread_id, ttl)

    async def asweep_expired(self, now: datetime | None = None) -> builtins.list[str]:
        return self.sweep_expired(now)

    async def astored_bytes(self, thread_id: str) -> int:
        return self.stored_bytes(thread_id)

"""The node cache: keys of tasks and ``@task`` calls with a ``CachePolicy``, cache
hits taken instead of running, and the writes to store after a step."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any

from engine._internal._constants import (
    CACHE_NS_WRITES,
    ERROR,
    INTERRUPT,
    NO_WRITES,
)
from engine._internal._typing import MISSING
from engine.constants import TAG_HIDDEN
from engine.pregel._algo import (
    PregelExecutableTask,
    task_path_str,
)
from engine.pregel._emit import LoopEmitter

__all__ = ("NodeCache",)


class NodeCache(LoopEmitter):
    """Reads and fills the graph's cache (``graph.cache``) for one run."""

    def call_cache_key(self, task: PregelExecutableTask, policy: Any) -> Any:
        if self.cache is None:
            return None
        policy = policy or self.graph.cache_policy  # the graph's default, if any
        if policy is None:
            return None
        return self._cache_key(task, policy)

    def _cache_key(
        self, task: PregelExecutableTask, policy: Any
    ) -> tuple[tuple[str, ...], str]:
        value = task.input
        if hasattr(value, "args") and hasattr(value, "kwargs"):
            raw = policy.key_func(*value.args, **value.kwargs)
        else:
            raw = policy.key_func(value)
        if isinstance(raw, bytes):
            raw = hashlib.blake2b(raw, digest_size=16).hexdigest()
        return ((CACHE_NS_WRITES, self.graph.name, task.name), str(raw))

    def cache_lookup(self, key: tuple[tuple[str, ...], str]) -> Any:
        assert self.cache is not None
        found = self.cache.get([key])
        return found.get(key, MISSING)

    def cache_store(
        self, key: tuple[tuple[str, ...], str], value: Any, policy: Any
    ) -> None:
        assert self.cache is not None
        policy = policy or self.graph.cache_policy
        self.cache.set({key: (value, policy.ttl)})

    def cache_probe(self) -> list[tuple[tuple[str, ...], str]]:
        """Cache keys of this step's tasks that have a CachePolicy (none without a cache)."""
        if self.cache is None:
            return []
        keys = []
        for task in self.tasks.values():
            policy = task.node.cache_policy or self.graph.cache_policy
            if policy is not None and not task.writes:
                task.cache_key = self._cache_key(task, policy)
                keys.append(task.cache_key)
        return keys

    def apply_cache_hits(self, hits: Mapping[Any, Any]) -> None:
        """Tasks whose writes are cached take them instead of running."""
        for task in self.tasks.values():
            if task.cache_key is None or task.writes or task.cache_key not in hits:
                continue
            task.writes.extend((chan, value) for chan, value in hits[task.cache_key])
            self._cached_task_ids.add(task.id)
            task.started = task.finished = time.time()
            self._save_writes(task.id, task_path_str(task.path), list(task.writes))
            if "events" in self.modes and TAG_HIDDEN not in task.node.tags:
                self._task_event(task, None, cached=True)
            self._emit_task_output(task, cached=True)

    def cache_updates(self) -> dict[Any, tuple[Any, int | None]]:
        """Writes of tasks that ran this step, to store under their cache keys."""
        updates: dict[Any, tuple[Any, int | None]] = {}
        for task in self.tasks.values():
            key = task.cache_key
            if (
                key is None
                or not task.writes
                or task.writes[0][0] in (ERROR, INTERRUPT)
            ):
                continue
            if task.id in self._cached_task_ids:
                continue
            writes = [(c, v) for c, v in task.writes if c != NO_WRITES]
            policy = task.node.cache_policy or self.graph.cache_policy
            updates[key] = (writes, policy.ttl)
        return updates

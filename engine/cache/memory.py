"""InMemoryCache: cached node results in process memory, stored serialized.

Thread-safe; not shared between processes. Expiry uses the monotonic clock, so
changing the wall clock never revives or kills entries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from engine.cache._keys import check_full_key, check_namespace, encode_pairs
from engine.cache.base import BaseCache, FullKey, Namespace, ValueT
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("InMemoryCache",)

_Entry = tuple[str, bytes, float | None]
"""(serializer tag, payload, monotonic deadline or None)."""


class InMemoryCache(BaseCache[ValueT]):
    """A dict of serialized entries per namespace.

    Args:
        serde: serializer for values (default: tagged JSON).
    """

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self._data: dict[Namespace, dict[str, _Entry]] = {}
        self._lock = threading.RLock()

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        wanted = [check_full_key(full_key) for full_key in keys]
        now = time.monotonic()
        found: dict[FullKey, ValueT] = {}
        with self._lock:
            for namespace, key in wanted:
                entries = self._data.get(namespace)
                if entries is None or (entry := entries.get(key)) is None:
                    continue
                tag, payload, deadline = entry
                if deadline is not None and deadline <= now:
                    del entries[key]
                    continue
                found[(namespace, key)] = self.serde.loads_typed((tag, payload))
        return found

    def set(self, keys: Mapping[FullKey, tuple[ValueT, int | float | None]]) -> None:
        rows = encode_pairs(self.serde, keys)
        now = time.monotonic()
        with self._lock:
            for namespace, key, tag, payload, ttl in rows:
                deadline = now + ttl if ttl is not None else None
                self._data.setdefault(namespace, {})[key] = (tag, payload, deadline)

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        with self._lock:
            if namespaces is None:
                self._data.clear()
                return
            for namespace in namespaces:
                self._data.pop(check_namespace(namespace), None)

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        return self.get(keys)

    async def aset(
        self, keys: Mapping[FullKey, tuple[ValueT, int | float | None]]
    ) -> None:
        self.set(keys)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        self.clear(namespaces)

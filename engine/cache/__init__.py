"""Node result caches used by ``CachePolicy``.

The contract and the in-memory cache are re-exported here; the SQL caches live in
``engine.cache.sqlite`` and ``engine.cache.postgres`` (as in ``langgraph.cache``).
"""

from __future__ import annotations

from engine.cache.base import BaseCache, FullKey, InvalidCacheKeyError, Namespace
from engine.cache.memory import InMemoryCache

__all__ = (
    "BaseCache",
    "FullKey",
    "InMemoryCache",
    "InvalidCacheKeyError",
    "Namespace",
)

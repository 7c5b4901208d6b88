"""RedisCache: cached node results in Redis (the ``redis`` client, an optional dependency).

Each entry is one Redis string under ``prefix + namespace + key``, labels joined
by ``:`` as in LangGraph (``langgraph:cache:writes:summarize:3f2a``), holding the
serializer's tag and payload (``b"json:..."``). Redis expires entries itself
(``PX``, so fractional TTLs in seconds keep their precision).

Decisions where LangGraph is loose (recorded here, tested by the conformance suite):

- ``:`` and ``\\`` inside labels and keys are escaped with ``\\``, so
  ``("a:b",)`` and ``("a", "b")`` are different namespaces;
- ``clear(namespaces)`` deletes exactly those namespaces (sub-namespaces stay),
  like every other backend; it walks keys with ``SCAN``, never ``KEYS``;
- ``set`` runs in one ``MULTI``/``EXEC``: all entries or none;
- as in LangGraph, ``get`` and ``set`` fail open when Redis cannot be reached (a
  cache miss, a write skipped, a warning logged), so an outage slows runs
  down but does not fail them; ``clear`` raises instead, since a caller who
  clears must know whether stale results are gone;
- the client may be sync (``redis.Redis``) or asyncio (``redis.asyncio.Redis``):
  a sync client serves the async methods from a worker thread; an asyncio client
  serves only the async ones (the sync ones raise ``TypeError``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.cache._keys import check_full_key, check_namespace, encode_pairs
from engine.cache.base import BaseCache, FullKey, Namespace, ValueT
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("RedisCache",)

logger = logging.getLogger(__name__)

_SEP = ":"
_DELETE_BATCH = 500


def _escape(label: str) -> str:
    return label.replace("\\", "\\\\").replace(_SEP, "\\" + _SEP)


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a ``SCAN ... MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _split(text: str) -> list[str]:
    """Labels of an escaped, ``:``-joined string."""
    parts: list[str] = []
    current: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            current.append(next(chars, ""))
        elif char == _SEP:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _is_asyncio_client(client: Any) -> bool:
    try:
        from redis.asyncio import Redis, RedisCluster  # noqa: PLC0415 - optional dependency
    except ImportError:
        return inspect.iscoroutinefunction(getattr(client, "execute_command", None))
    return isinstance(client, (Redis, RedisCluster))


def _redis_errors() -> tuple[type[BaseException], ...]:
    """What "Redis cannot be reached" raises: the client's errors and OS errors."""
    try:
        from redis.exceptions import RedisError  # noqa: PLC0415 - optional dependency
    except ImportError:
        return (OSError,)
    return (RedisError, OSError)


class RedisCache(BaseCache[ValueT]):
    """A cache in Redis, shared by every process that uses the same server and prefix.

    Args:
        redis: a ``redis.Redis`` client, or a ``redis.asyncio.Redis`` one for
            async runs. Create it with ``decode_responses=False`` (the default):
            payloads are bytes.
        serde: serializer for values (default: tagged JSON).
        prefix: put before every key; give each application its own.

    Example::

        import redis

        cache = RedisCache(redis.Redis.from_url("redis://localhost:6379/0"))
        graph = builder.compile(cache=cache)
    """

    def __init__(
        self,
        redis: Any,
        *,
        serde: SerializerProtocol | None = None,
        prefix: str = "langgraph:cache:",
    ) -> None:
        super().__init__(serde=serde)
        self.redis = redis
        self.prefix = prefix
        self._is_async = _is_asyncio_client(redis)
        self._errors = _redis_errors()

    # -- keys ------------------------------------------------------------------------

    def _redis_key(self, namespace: Namespace, key: str) -> str:
        return self.prefix + _SEP.join(_escape(part) for part in (*namespace, key))

    def _namespace_of(self, redis_key: bytes | str) -> Namespace | None:
        text = redis_key.decode() if isinstance(redis_key, bytes) else redis_key
        if not text.startswith(self.prefix):
            return None
        return tuple(_split(text[len(self.prefix) :])[:-1])

    def _pattern(self, namespace: Namespace | None) -> str:
        """A ``SCAN`` pattern covering ``namespace`` (a superset: callers filter)."""
        if not namespace:
            return _glob_escape(self.prefix) + "*"
        labels = _SEP.join(_escape(label) for label in namespace)
        return _glob_escape(self.prefix + labels + _SEP) + "*"

    def _doomed(
        self, keys: Iterable[bytes | str], namespaces: set[Namespace]
    ) -> list[Any]:
        return [key for key in keys if self._namespace_of(key) in namespaces]

    # -- values ----------------------------------------------------------------------

    def _decode(self, full_key: FullKey, raw: Any) -> tuple[bool, Any]:
        if raw is None:
            return False, None
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        tag, sep, payload = data.partition(b":")
        if not sep:
            logger.warning("RedisCache: skipping malformed entry for %r", full_key)
            return False, None
        try:
            return True, self.serde.loads_typed((tag.decode(), payload))
        except Exception:
            logger.warning(
                "RedisCache: skipping unreadable entry for %r", full_key, exc_info=True
            )
            return False, None

    def _decode_all(
        self, wanted: list[FullKey], raws: Sequence[Any]
    ) -> dict[FullKey, ValueT]:
        found: dict[FullKey, ValueT] = {}
        for full_key, raw in zip(wanted, raws, strict=True):
            ok, value = self._decode(full_key, raw)
            if ok:
                found[full_key] = value
        return found

    def _rows(
        self, pairs: Mapping[FullKey, tuple[ValueT, int | float | None]]
    ) -> list[tuple[str, bytes, int | None]]:
        """``(redis key, stored bytes, ttl in ms)``; every pair checked first."""
        return [
            (
                self._redis_key(namespace, key),
                tag.encode() + b":" + payload,
                None if ttl is None else max(1, round(ttl * 1000)),
            )
            for namespace, key, tag, payload, ttl in encode_pairs(self.serde, pairs)
        ]

    def _sync_client(self, method: str) -> Any:
        if self._is_async:
            raise TypeError(
                f"RedisCache.{method}() needs a sync client (redis.Redis); this cache "
                f"holds an asyncio client: call a{method}() instead."
            )
        return self.redis

    # -- sync ------------------------------------------------------------------------

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        wanted = [check_full_key(full_key) for full_key in keys]
        if not wanted:
            return {}
        client = self._sync_client("get")
        try:
            raws = client.mget([self._redis_key(ns, key) for ns, key in wanted])
        except self._errors:
            logger.warning(
                "RedisCache: Redis unavailable, reading a miss", exc_info=True
            )
            return {}
        return self._decode_all(wanted, raws)

    def set(self, mapping: Mapping[FullKey, tuple[ValueT, int | float | None]]) -> None:
        rows = self._rows(mapping)
        if not rows:
            return
        client = self._sync_client("set")
        try:
            with client.pipeline(transaction=True) as pipe:
                for redis_key, data, ttl_ms in rows:
                    pipe.set(redis_key, data, px=ttl_ms)
                pipe.execute()
        except self._errors:
            logger.warning("RedisCache: Redis unavailable, not caching", exc_info=True)

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        client = self._sync_client("clear")
        if namespaces is None:
            self._delete_sync(client, client.scan_iter(match=self._pattern(None)))
            return
        for namespace in {check_namespace(ns) for ns in namespaces}:
            found = client.scan_iter(match=self._pattern(namespace))
            self._delete_sync(client, self._doomed(found, {namespace}))

    @staticmethod
    def _delete_sync(client: Any, keys: Iterable[Any]) -> None:
        batch: list[Any] = []
        for key in keys:
            batch.append(key)
            if len(batch) >= _DELETE_BATCH:
                client.unlink(*batch)
                batch = []
        if batch:
            client.unlink(*batch)

    # -- async -----------------------------------------------------------------------

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        if not self._is_async:
            return await asyncio.to_thread(self.get, keys)
        wanted = [check_full_key(full_key) for full_key in keys]
        if not wanted:
            return {}
        try:
            raws = await self.redis.mget(
                [self._redis_key(ns, key) for ns, key in wanted]
            )
        except self._errors:
            logger.warning(
                "RedisCache: Redis unavailable, reading a miss", exc_info=True
            )
            return {}
        return self._decode_all(wanted, raws)

    async def aset(
        self, mapping: Mapping[FullKey, tuple[ValueT, int | float | None]]
    ) -> None:
        if not self._is_async:
            await asyncio.to_thread(self.set, mapping)
            return
        rows = self._rows(mapping)
        if not rows:
            return
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                for redis_key, data, ttl_ms in rows:
                    pipe.set(redis_key, data, px=ttl_ms)
                await pipe.execute()
        except self._errors:
            logger.warning("RedisCache: Redis unavailable, not caching", exc_info=True)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        if not self._is_async:
            await asyncio.to_thread(self.clear, namespaces)
            return
        if namespaces is None:
            await self._delete_async(
                [key async for key in self.redis.scan_iter(match=self._pattern(None))]
            )
            return
        for namespace in {check_namespace(ns) for ns in namespaces}:
            found = [
                key
                async for key in self.redis.scan_iter(match=self._pattern(namespace))
            ]
            await self._delete_async(self._doomed(found, {namespace}))

    async def _delete_async(self, keys: list[Any]) -> None:
        for start in range(0, len(keys), _DELETE_BATCH):
            await self.redis.unlink(*keys[start : start + _DELETE_BATCH])

"""The node-result cache contract (``langgraph.cache.base``), used by ``CachePolicy``.

A cache maps a full key, ``(namespace, key)`` with ``namespace`` a tuple of strings,
to a value with an optional TTL in **seconds** (unlike the store's minutes: this is
LangGraph's choice for each). Values go through the serializer (tagged JSON by
default, never pickle) on the way in, so a backend never holds caller objects and
what works in memory works in SQLite and Postgres. Expired entries are never returned.
Storage only: nothing here imports the runtime.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from engine.checkpoint.serde.base import SerializerProtocol
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = (
    "BaseCache",
    "FullKey",
    "InvalidCacheKeyError",
    "Namespace",
    "ValueT",
)

ValueT = TypeVar("ValueT")
Namespace = tuple[str, ...]
FullKey = tuple[Namespace, str]


class InvalidCacheKeyError(ValueError):
    """A cache key or TTL is malformed (not ``(tuple_of_str, str)``, or ttl <= 0)."""


class BaseCache(ABC, Generic[ValueT]):
    """Storage contract for cached values, shared by memory, SQLite and Postgres.

    Every backend must pass ``tests/conformance/store/test_cache.py``.

    Args:
        serde: serializer for values (default: tagged JSON).

    Example::

        cache = InMemoryCache()
        cache.set({(("node", "summarize"), "3f2a..."): ([("summary", "hi")], 60)})
        cache.get([(("node", "summarize"), "3f2a...")])
        # {(("node", "summarize"), "3f2a..."): [("summary", "hi")]}
    """

    serde: SerializerProtocol

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        self.serde = serde if serde is not None else JsonPlusSerializer()

    @abstractmethod
    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The live cached values among ``keys`` (missing and expired keys are absent).

        Raises:
            InvalidCacheKeyError: a key is not ``(tuple_of_str, str)``.
        """

    @abstractmethod
    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | float | None]]) -> None:
        """Store values: ``{(namespace, key): (value, ttl_seconds or None)}``.

        The parameter's name varies as in LangGraph (``pairs`` here, ``keys`` for
        :class:`~engine.cache.memory.InMemoryCache`, ``mapping`` for SQLite); pass
        it by position.

        Raises:
            InvalidCacheKeyError: a bad key, or a ttl that is not a positive number.
            SerializationError: a value cannot be stored; nothing was stored.
        """

    @abstractmethod
    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Delete the entries of exactly these namespaces (sub-namespaces are kept);
        ``None`` deletes everything."""

    @abstractmethod
    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """Async twin of :meth:`get`."""

    @abstractmethod
    async def aset(
        self, pairs: Mapping[FullKey, tuple[ValueT, int | float | None]]
    ) -> None:
        """Async twin of :meth:`set`."""

    @abstractmethod
    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Async twin of :meth:`clear`."""

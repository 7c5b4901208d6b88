"""Key, TTL and namespace helpers shared by the cache backends. Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from engine._internal._numbers import is_positive_number
from engine.cache.base import FullKey, InvalidCacheKeyError, Namespace
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = (
    "Row",
    "check_full_key",
    "check_namespace",
    "check_ttl",
    "encode_pairs",
    "namespace_from_text",
    "namespace_text",
)

Row = tuple[Namespace, str, str, bytes, float | None]
"""(namespace, key, serializer tag, payload, ttl seconds or None)."""


def namespace_text(namespace: Namespace) -> str:
    """How SQL backends store a namespace: a JSON array (unambiguous, readable)."""
    return orjson.dumps(list(namespace)).decode()


def namespace_from_text(text: str) -> Namespace:
    return tuple(orjson.loads(text))


def check_namespace(namespace: object) -> Namespace:
    """A namespace as a tuple of strings, or a clear error."""
    if isinstance(namespace, str) or not isinstance(namespace, (tuple, list)):
        raise InvalidCacheKeyError(
            f"A cache namespace must be a tuple of strings, got {namespace!r}."
        )
    if not all(isinstance(label, str) and "\x00" not in label for label in namespace):
        raise InvalidCacheKeyError(
            f"Cache namespace labels must be strings without NUL, got {namespace!r}."
        )
    return tuple(namespace)


def check_full_key(full_key: object) -> FullKey:
    """``(namespace, key)`` normalized (namespace as a tuple), or a clear error."""
    if not isinstance(full_key, tuple) or len(full_key) != 2:
        raise InvalidCacheKeyError(
            f"A cache key must be a (namespace, key) pair, got {full_key!r}."
        )
    namespace, key = full_key
    if not isinstance(key, str) or "\x00" in key:
        raise InvalidCacheKeyError(
            f"Cache keys must be strings without NUL, got {key!r}."
        )
    return check_namespace(namespace), key


def check_ttl(ttl: object) -> float | None:
    """A TTL in seconds: ``None`` or a positive finite number."""
    if ttl is None:
        return None
    if not is_positive_number(ttl):
        raise InvalidCacheKeyError(
            f"A cache ttl must be a positive number of seconds or None, got {ttl!r}."
        )
    return float(ttl)


def encode_pairs(
    serde: SerializerProtocol,
    pairs: Mapping[FullKey, tuple[Any, int | float | None]],
) -> list[Row]:
    """Validate and serialize every pair first: a bad one stores nothing."""
    rows: list[Row] = []
    for full_key, entry in pairs.items():
        namespace, key = check_full_key(full_key)
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise InvalidCacheKeyError(
                f"Cache entries must be (value, ttl_seconds) pairs, got {entry!r} "
                f"for {full_key!r}."
            )
        value, ttl = entry
        tag, payload = serde.dumps_typed(value)
        rows.append((namespace, key, tag, payload, check_ttl(ttl)))
    return rows

"""Default cache key for ``CachePolicy``: a stable hash of a node's input."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

__all__ = ("default_cache_key",)


def _fallback(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return {
            "__model__": type(obj).__qualname__,
            "data": obj.model_dump(mode="json"),
        }
    if isinstance(obj, (set, frozenset)):
        return sorted(repr(v) for v in obj)
    if isinstance(obj, bytes):
        return obj.hex()
    if hasattr(obj, "__dict__"):
        return {"__class__": type(obj).__qualname__, **vars(obj)}
    return repr(obj)


def default_cache_key(*args: Any, **kwargs: Any) -> str:
    """Hash of the positional and keyword arguments, independent of dict order."""
    payload = orjson.dumps(
        [args, kwargs],
        default=_fallback,
        option=orjson.OPT_SORT_KEYS
        | orjson.OPT_NON_STR_KEYS
        | orjson.OPT_SERIALIZE_NUMPY,
    )
    return hashlib.blake2b(payload, digest_size=16).hexdigest()

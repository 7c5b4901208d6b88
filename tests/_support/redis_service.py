"""Redis for tests: the URL from ``TEST_REDIS_URL``, checked once per process."""

from __future__ import annotations

import functools
import os

import redis

from tests._support.services import unavailable

__all__ = ("redis_url",)


def redis_url() -> str:
    """``TEST_REDIS_URL`` if that server answers; otherwise skip (locally) or fail (CI)."""
    url = os.environ.get("TEST_REDIS_URL", "").strip()
    if not url:
        unavailable("TEST_REDIS_URL is not set")
    if problem := _unreachable(url):
        unavailable(f"Redis at TEST_REDIS_URL is unreachable: {problem}")
    return url


@functools.cache
def _unreachable(url: str) -> str | None:
    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        return str(exc)
    finally:
        client.close()
    return None

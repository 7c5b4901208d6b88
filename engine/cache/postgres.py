"""PostgresCache: cached node results in Postgres (psycopg 3 + psycopg_pool).

One row per entry in ``engine_cache``: the namespace as a JSON-array text, the key,
the serializer's tag and payload (``bytea``), and ``expires_at`` on the database's
clock. Call :meth:`PostgresCache.setup` once per database: numbered migrations under an
advisory lock. Expired rows are never returned and are deleted by the next ``set``.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from psycopg import Connection, Cursor
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from engine._internal._postgres import open_pool, transaction_cursor
from engine.cache._keys import (
    check_full_key,
    check_namespace,
    encode_pairs,
    namespace_from_text,
    namespace_text,
)
from engine.cache.base import BaseCache, FullKey, Namespace, ValueT
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("PostgresCache",)

MIGRATIONS: tuple[str, ...] = (
    # v0: entries
    """
    CREATE TABLE IF NOT EXISTS engine_cache (
        ns text NOT NULL,
        key text NOT NULL,
        tag text NOT NULL,
        payload bytea NOT NULL,
        expires_at timestamptz,
        PRIMARY KEY (ns, key)
    )
    """,
    # v1: purging expired entries
    """
    CREATE INDEX IF NOT EXISTS engine_cache_expires_at_idx
        ON engine_cache (expires_at) WHERE expires_at IS NOT NULL
    """,
)
"""Index = version. Append only."""

LOCK_KEY = int.from_bytes(
    hashlib.blake2b(b"engine.cache.migrations", digest_size=8).digest(),
    "big",
    signed=True,
)

_SELECT = """
SELECT ns, key, tag, payload FROM engine_cache
WHERE (ns, key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
  AND (expires_at IS NULL OR expires_at > now())
"""
_UPSERT = """
INSERT INTO engine_cache (ns, key, tag, payload, expires_at)
VALUES (%s, %s, %s, %s, now() + %s::float8 * interval '1 second')
ON CONFLICT (ns, key) DO UPDATE SET
    tag = EXCLUDED.tag, payload = EXCLUDED.payload, expires_at = EXCLUDED.expires_at
"""

_PURGE = "DELETE FROM engine_cache WHERE expires_at IS NOT NULL AND expires_at <= now()"


class PostgresCache(BaseCache[ValueT]):
    """A cache on a psycopg connection pool (or one connection, behind a lock).

    Args:
        conn: a ``ConnectionPool`` or a ``Connection``, in autocommit mode: every
            call runs in its own transaction, which the cache begins and commits.
        serde: serializer for values (default: tagged JSON).

    Example::

        with PostgresCache.from_conn_string("postgresql://localhost/app") as cache:
            cache.setup()
            cache.set({(("node", "a"), "k"): ({"x": 1}, 60)})
    """

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
        *,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.conn = conn
        self.lock = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        max_size: int = 10,
    ) -> Iterator[PostgresCache[Any]]:
        """A cache on a new connection pool, closed when the block exits."""
        with open_pool(conn_string, max_size=max_size, name="engine-cache") as pool:
            yield cls(pool, serde=serde)

    @contextmanager
    def _cursor(self) -> Iterator[Cursor[TupleRow]]:
        with transaction_cursor(self.conn, self.lock, "Postgres caches") as cur:
            yield cur

    def setup(self) -> None:
        """Create or upgrade the tables (idempotent; safe to run concurrently)."""
        with self._cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            cur.execute(
                "CREATE TABLE IF NOT EXISTS engine_cache_migrations (v integer PRIMARY KEY)"
            )
            row = cur.execute(
                "SELECT coalesce(max(v), -1) FROM engine_cache_migrations"
            ).fetchone()
            current = row[0] if row is not None else -1
            for version in range(current + 1, len(MIGRATIONS)):
                cur.execute(MIGRATIONS[version])
                cur.execute(
                    "INSERT INTO engine_cache_migrations (v) VALUES (%s)", (version,)
                )

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        wanted = [check_full_key(full_key) for full_key in keys]
        if not wanted:
            return {}
        namespaces = [namespace_text(namespace) for namespace, _ in wanted]
        names = [key for _, key in wanted]
        with self._cursor() as cur:
            rows = cur.execute(_SELECT, (namespaces, names)).fetchall()
        return {
            (namespace_from_text(ns), key): self.serde.loads_typed(
                (tag, bytes(payload))
            )
            for ns, key, tag, payload in rows
        }

    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | float | None]]) -> None:
        # Sorted: concurrent multi-key sets lock rows in one order and cannot deadlock.
        rows = sorted(encode_pairs(self.serde, pairs), key=lambda row: (row[0], row[1]))
        with self._cursor() as cur:
            cur.execute(_PURGE)
            if rows:
                cur.executemany(
                    _UPSERT,
                    [
                        (namespace_text(namespace), key, tag, payload, ttl)
                        for namespace, key, tag, payload, ttl in rows
                    ],
                )

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        if namespaces is None:
            with self._cursor() as cur:
                cur.execute("DELETE FROM engine_cache")
            return
        texts = [namespace_text(check_namespace(ns)) for ns in namespaces]
        with self._cursor() as cur:
            cur.execute("DELETE FROM engine_cache WHERE ns = ANY(%s::text[])", (texts,))

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        return await asyncio.to_thread(self.get, keys)

    async def aset(
        self, pairs: Mapping[FullKey, tuple[ValueT, int | float | None]]
    ) -> None:
        await asyncio.to_thread(self.set, pairs)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        await asyncio.to_thread(self.clear, namespaces)

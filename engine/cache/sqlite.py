"""SqliteCache: cached node results in a SQLite file (sqlite3, one connection, a lock).

The file uses WAL so readers in other processes are not blocked by a writer. Tables
are created or upgraded on open by numbered migrations (``engine_cache_migrations``),
under ``BEGIN IMMEDIATE`` so two processes opening the same file migrate one at a time.
Expiry is wall-clock time (entries outlive the process). Expired rows are never
returned and are deleted by the next ``set``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from engine.cache._keys import (
    check_full_key,
    check_namespace,
    encode_pairs,
    namespace_from_text,
    namespace_text,
)
from engine.cache.base import BaseCache, FullKey, Namespace, ValueT
from engine.checkpoint.serde.base import SerializerProtocol

__all__ = ("SqliteCache",)

MIGRATIONS: tuple[str, ...] = (
    # v0: entries; ns is the namespace as a JSON array
    """
    CREATE TABLE IF NOT EXISTS engine_cache (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        tag TEXT NOT NULL,
        payload BLOB NOT NULL,
        expires_at REAL,
        PRIMARY KEY (ns, key)
    )
    """,
    # v1: purging expired entries
    """
    CREATE INDEX IF NOT EXISTS engine_cache_expires_at
        ON engine_cache (expires_at) WHERE expires_at IS NOT NULL
    """,
)
"""Index = version. Append only."""

_CHUNK = 400
"""Keys per SELECT (two parameters each; SQLite's limit is 32766 parameters)."""


class SqliteCache(BaseCache[ValueT]):
    """A cache in one SQLite file (or ``":memory:"``).

    Args:
        path: the database file; created if missing.
        serde: serializer for values (default: tagged JSON).

    Example::

        with SqliteCache("cache.sqlite") as cache:
            cache.set({(("node", "a"), "k"): ({"x": 1}, 60)})
    """

    def __init__(
        self, path: str | os.PathLike[str], *, serde: SerializerProtocol | None = None
    ) -> None:
        super().__init__(serde=serde)
        self.path = path
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self.setup()

    def __enter__(self) -> SqliteCache[ValueT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def setup(self) -> None:
        """Create or upgrade the tables (idempotent; runs on open)."""
        with self._transaction() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS engine_cache_migrations (v INTEGER PRIMARY KEY)"
            )
            row = conn.execute(
                "SELECT coalesce(max(v), -1) FROM engine_cache_migrations"
            ).fetchone()
            for version in range(int(row[0]) + 1, len(MIGRATIONS)):
                conn.execute(MIGRATIONS[version])
                conn.execute(
                    "INSERT INTO engine_cache_migrations (v) VALUES (?)", (version,)
                )

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        wanted = [check_full_key(full_key) for full_key in keys]
        found: dict[FullKey, ValueT] = {}
        now = time.time()
        with self._lock:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                pairs = ", ".join("(?, ?)" for _ in chunk)
                params: list[object] = []
                for namespace, key in chunk:
                    params += [namespace_text(namespace), key]
                rows = self._conn.execute(
                    "SELECT ns, key, tag, payload FROM engine_cache "
                    f"WHERE (ns, key) IN (VALUES {pairs}) "
                    "AND (expires_at IS NULL OR expires_at > ?)",
                    [*params, now],
                ).fetchall()
                for ns, key, tag, payload in rows:
                    found[(namespace_from_text(ns), key)] = self.serde.loads_typed(
                        (tag, payload)
                    )
        return found

    def set(self, mapping: Mapping[FullKey, tuple[ValueT, int | float | None]]) -> None:
        rows = encode_pairs(self.serde, mapping)
        now = time.time()
        with self._transaction() as conn:
            conn.execute(
                "DELETE FROM engine_cache WHERE expires_at IS NOT NULL AND expires_at <= ?",
                (now,),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO engine_cache (ns, key, tag, payload, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        namespace_text(namespace),
                        key,
                        tag,
                        payload,
                        now + ttl if ttl is not None else None,
                    )
                    for namespace, key, tag, payload, ttl in rows
                ],
            )

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        if namespaces is None:
            with self._transaction() as conn:
                conn.execute("DELETE FROM engine_cache")
            return
        texts = [(namespace_text(check_namespace(ns)),) for ns in namespaces]
        with self._transaction() as conn:
            conn.executemany("DELETE FROM engine_cache WHERE ns = ?", texts)

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        return await asyncio.to_thread(self.get, keys)

    async def aset(
        self, mapping: Mapping[FullKey, tuple[ValueT, int | float | None]]
    ) -> None:
        await asyncio.to_thread(self.set, mapping)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        await asyncio.to_thread(self.clear, namespaces)

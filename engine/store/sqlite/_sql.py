"""SQL for the SQLite store: numbered migrations and the few statements it runs.

Schema: one row per item in ``engine_store`` (namespace as text with ``"."`` between
labels, the value's tagged-JSON text, ISO timestamps, ``expires_at`` in Unix
seconds) and one row per embedded field in ``engine_store_vectors`` (float64s packed
as a blob). SQL selects the live rows under a namespace prefix; filters, queries,
ranking and paging run in Python (``engine.store._rank``) with the in-memory
store's rules, so both behave exactly alike. Table names are prefixed ``engine_``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

__all__ = (
    "CREATE_MIGRATIONS_TABLE",
    "DELETE",
    "DELETE_VECTORS",
    "GET",
    "INSERT_VECTOR",
    "LIST",
    "MIGRATIONS",
    "REFRESH",
    "SWEEP",
    "SWEEP_VECTORS",
    "UPSERT",
    "pack",
    "prefix_where",
    "search_sql",
    "unpack",
    "vectors_sql",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE IF NOT EXISTS engine_store (
            prefix TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            expires_at REAL,
            ttl_minutes REAL,
            PRIMARY KEY (prefix, key)
        )
        """,
        """
        CREATE INDEX IF NOT EXISTS engine_store_expires_at_idx
            ON engine_store (expires_at) WHERE expires_at IS NOT NULL
        """,
        """
        CREATE TABLE IF NOT EXISTS engine_store_vectors (
            prefix TEXT NOT NULL,
            key TEXT NOT NULL,
            field TEXT NOT NULL,
            embedding BLOB NOT NULL,
            PRIMARY KEY (prefix, key, field)
        )
        """,
    ),
)
"""Index = version; each holds its statements. Append only."""

CREATE_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS engine_store_migrations (v INTEGER PRIMARY KEY)"
)

_LIVE = "(expires_at IS NULL OR expires_at > ?)"
_COLUMNS = "prefix, key, value, created_at, updated_at, ttl_minutes"

GET = f"SELECT {_COLUMNS} FROM engine_store WHERE prefix = ? AND key = ? AND {_LIVE}"

UPSERT = """
INSERT INTO engine_store AS s
    (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)
ON CONFLICT (prefix, key) DO UPDATE SET
    value = excluded.value,
    created_at = CASE WHEN s.expires_at IS NOT NULL AND s.expires_at <= ?7
                      THEN excluded.created_at ELSE s.created_at END,
    updated_at = excluded.updated_at,
    expires_at = excluded.expires_at,
    ttl_minutes = excluded.ttl_minutes
"""
"""Params: prefix, key, value, stamp, expires_at, ttl_minutes, now (Unix seconds)."""

DELETE = "DELETE FROM engine_store WHERE prefix = ? AND key = ?"
DELETE_VECTORS = "DELETE FROM engine_store_vectors WHERE prefix = ? AND key = ?"
INSERT_VECTOR = (
    "INSERT INTO engine_store_vectors (prefix, key, field, embedding) "
    "VALUES (?, ?, ?, ?)"
)
REFRESH = (
    "UPDATE engine_store SET expires_at = ? + ttl_minutes * 60 "
    "WHERE prefix = ? AND key = ? AND ttl_minutes IS NOT NULL"
)
LIST = f"SELECT DISTINCT prefix FROM engine_store WHERE {_LIVE}"
_EXPIRED = "expires_at IS NOT NULL AND expires_at <= ?"
SWEEP_VECTORS = (
    "DELETE FROM engine_store_vectors WHERE (prefix, key) IN "
    f"(SELECT prefix, key FROM engine_store WHERE {_EXPIRED})"
)
SWEEP = f"DELETE FROM engine_store WHERE {_EXPIRED}"


def prefix_where(prefix: str) -> tuple[str, list[str]]:
    """A WHERE fragment for namespaces equal to or under ``prefix`` ("" for all)."""
    if not prefix:
        return "TRUE", []
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return "(prefix = ? OR prefix LIKE ? ESCAPE '\\')", [prefix, escaped + ".%"]


def search_sql(prefix: str) -> tuple[str, list[str]]:
    """Live rows under a prefix: ``prefix, key, value, created_at, updated_at, ttl``."""
    where, params = prefix_where(prefix)
    return f"SELECT {_COLUMNS} FROM engine_store WHERE {where} AND {_LIVE}", params


def vectors_sql(prefix: str) -> tuple[str, list[str]]:
    """Field vectors under a prefix: ``prefix, key, embedding``."""
    where, params = prefix_where(prefix)
    return (
        f"SELECT prefix, key, embedding FROM engine_store_vectors WHERE {where}",
        params,
    )


def pack(vector: Sequence[float]) -> bytes:
    return array("d", vector).tobytes()


def unpack(blob: bytes) -> list[float]:
    values = array("d")
    values.frombytes(blob)
    return values.tolist()

"""SQLite schema (numbered migrations) and dialect for SqliteSaver.

``MIGRATIONS[v]`` is migration version ``v``: a tuple of statements applied in
one transaction and recorded in ``engine_checkpoint_migrations``. Append new
versions; never edit a released one.

Payloads are stored as BLOBs exactly as the serializer produced them (with
their type tag in the neighbouring ``*type`` column). With the default
serializer they are JSON text, so SQL can read them, e.g.
``SELECT json_extract(CAST(metadata AS TEXT), '$.step') FROM engine_checkpoints``.
Deadlines are Unix timestamps (REAL seconds). The checkpoint payload's layout
(no ``id``/``ts``, scalar values inline since v1) is Postgres's: see
``engine.checkpoint.postgres._sql``. Packed structures and packed task writes
(Postgres's v2) need no schema change here: SQLite's rows are written packed
by the same code, and older rows read the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from engine.checkpoint._sqlcore.dialect import SqlDialect

__all__ = (
    "CREATE_MIGRATIONS_TABLE",
    "DIALECT",
    "LEASE_STATEMENTS",
    "MIGRATIONS",
    "SqliteDialect",
)

CREATE_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS engine_checkpoint_migrations ("
    "v INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
)

MIGRATIONS: list[tuple[str, ...]] = [
    # v0: checkpoints, channel values (full or delta), pending writes, deadlines.
    (
        """CREATE TABLE engine_checkpoints (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            checkpoint_id TEXT NOT NULL,
            parent_checkpoint_id TEXT,
            checkpoint_type TEXT NOT NULL,
            checkpoint BLOB NOT NULL,
            metadata_type TEXT NOT NULL,
            metadata BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        )""",
        "CREATE INDEX engine_checkpoints_thread_idx "
        "ON engine_checkpoints (thread_id, checkpoint_id)",
        "CREATE INDEX engine_checkpoints_id_idx ON engine_checkpoints (checkpoint_id)",
        """CREATE TABLE engine_checkpoint_blobs (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            channel TEXT NOT NULL,
            version TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('full', 'delta', 'empty')),
            type TEXT NOT NULL,
            blob BLOB NOT NULL,
            base_version TEXT,
            delta_start INTEGER,
            chain_len INTEGER NOT NULL DEFAULT 0,
            chain_bytes INTEGER NOT NULL DEFAULT 0,
            root_bytes INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )""",
        """CREATE TABLE engine_checkpoint_writes (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            channel TEXT NOT NULL,
            type TEXT NOT NULL,
            blob BLOB NOT NULL,
            task_path TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )""",
        """CREATE TABLE engine_checkpoint_ttl (
            thread_id TEXT PRIMARY KEY,
            expires_at REAL NOT NULL
        )""",
        "CREATE INDEX engine_checkpoint_ttl_expires_idx "
        "ON engine_checkpoint_ttl (expires_at)",
    ),
    # v1: the creation time in its own column, so a history is read without
    # decoding checkpoints; rows written from now on keep it out of the
    # checkpoint payload (older rows keep it there and leave the column NULL).
    ("ALTER TABLE engine_checkpoints ADD COLUMN ts TEXT",),
    # v2 (as Postgres' v3): the two secondary indexes on checkpoints go: every
    # query of a thread walks the primary key; only a list across all threads
    # (no thread_id) now reads the whole table. The regular writes ``put_step``
    # saves with a checkpoint live in its row (``parent_writes``).
    (
        "ALTER TABLE engine_checkpoints ADD COLUMN parent_writes BLOB",
        "DROP INDEX IF EXISTS engine_checkpoints_thread_idx",
        "DROP INDEX IF EXISTS engine_checkpoints_id_idx",
    ),
    # v3 (as Postgres' v4): thread leases, one row per thread and namespace a
    # run holds (see ``engine.checkpoint._lease``); expiry in Unix seconds.
    (
        """CREATE TABLE engine_thread_leases (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            holder TEXT NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns)
        )""",
    ),
]

_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
"""The database's clock as Unix seconds (works on every SQLite version)."""

LEASE_STATEMENTS = {
    "lease_acquire": (
        "INSERT INTO engine_thread_leases AS l "
        "(thread_id, checkpoint_ns, holder, expires_at) "
        f"VALUES (%s, %s, %s, {_NOW} + %s) "
        "ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE SET "
        "holder = excluded.holder, expires_at = excluded.expires_at "
        f"WHERE l.expires_at <= {_NOW} OR l.holder = excluded.holder "
        "RETURNING holder, expires_at"
    ),
    "lease_renew": (
        f"UPDATE engine_thread_leases SET expires_at = {_NOW} + %s "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND holder = %s "
        "RETURNING expires_at"
    ),
    "lease_release": (
        "DELETE FROM engine_thread_leases "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND holder = %s"
    ),
    "lease_get": (
        "SELECT holder, expires_at FROM engine_thread_leases "
        "WHERE thread_id = %s AND checkpoint_ns = %s"
    ),
    # A marker, never run: ``SqliteSaver._run`` lowers the connection's sync
    # level to NORMAL around a transaction that starts with it (SQLite changes
    # the level only outside a transaction), as Postgres commits a lease change
    # without waiting for durability. Harmless if it were run.
    "lease_commit_early": "SELECT 'a lease change: committed without a sync'",
    "lease_holder_and_head": (
        "SELECT (SELECT holder FROM engine_thread_leases "
        "WHERE thread_id = %s AND checkpoint_ns = %s), "
        "(SELECT checkpoint_id FROM engine_checkpoints "
        "WHERE thread_id = %s AND checkpoint_ns = %s "
        "ORDER BY checkpoint_id DESC LIMIT 1)"
    ),
}
"""Thread-lease statements (``engine.checkpoint._sqlcore.lease``). A fenced save
reads ``lease_get`` inside its ``BEGIN IMMEDIATE`` transaction, which no
takeover can interleave with; a run's step, fenced by its lease and on its
thread's head, reads both in one statement (``lease_holder_and_head``)."""


def _keys(width: int) -> str:
    columns = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(width))
    return f"SELECT {columns} FROM json_each(%s)"


_META = "CAST(c.metadata AS TEXT)"

_JSON_TESTS = {
    "absent_or_null": f"coalesce(json_type({_META}, ?), 'null') = 'null'",
    "null": f"json_type({_META}, ?) = 'null'",
    "string": f"(json_type({_META}, ?) = 'text' AND json_extract({_META}, ?) = ?)",
    "number": (
        f"(json_type({_META}, ?) IN ('integer', 'real') "
        f"AND json_extract({_META}, ?) = ?)"
    ),
    "bool": f"json_type({_META}, ?) = ?",
    "object": (
        f"(json_type({_META}, ?) = 'object' AND json_type({_META}, ?) IS NULL "
        f"AND (SELECT count(*) FROM json_each({_META}, ?)) = ?)"
    ),
    "array": (
        f"(json_type({_META}, ?) = 'array' AND json_array_length({_META}, ?) = ?)"
    ),
    "tagged": (
        f"(json_type({_META}, ?) = 'object' AND json_type({_META}, ?) IS NOT NULL)"
    ),
}

_UNQUOTABLE = frozenset('"\\') | frozenset(map(chr, range(32)))
"""Key characters a SQLite JSON path cannot name (quoted labels have no escapes,
and JSON escapes these characters in the stored text)."""


class SqliteDialect(SqlDialect):
    """Key sets travel as one JSON array parameter, read back with ``json_each``;
    metadata filters use SQLite's JSON functions on the payload as text."""

    def keys_param(
        self, keys: Sequence[tuple[str, ...]], width: int
    ) -> tuple[Any, ...]:
        return (orjson.dumps(keys).decode(),)

    def timestamp(self, moment: datetime) -> Any:
        return moment.timestamp()

    def json_inspectable(self) -> str:
        return f"c.metadata_type IN ('json', 'jsonraw') AND json_valid({_META})"

    def json_path(self, path: Sequence[str | int]) -> Any | None:
        parts = ["$"]
        for step in path:
            if isinstance(step, int):
                parts.append(f"[{step}]")
            elif _UNQUOTABLE.isdisjoint(step):
                parts.append(f'."{step}"')
            else:
                return None
        return "".join(parts)

    def json_test(
        self, test: str, path: Any, tag_path: Any, value: Any = None
    ) -> tuple[str, tuple[Any, ...]]:
        sql = _JSON_TESTS[test]
        if test in ("absent_or_null", "null"):
            return sql, (path,)
        if test in ("string", "number", "array"):
            return sql, (path, path, value)
        if test == "bool":
            return sql, (path, "true" if value else "false")
        if test == "object":
            return sql, (path, tag_path, path, value)
        return sql, (path, tag_path)


DIALECT = SqliteDialect(
    placeholder="?", keys3=_keys(3), keys4=_keys(4), overrides=LEASE_STATEMENTS
)
"""Writers are serialized by ``BEGIN IMMEDIATE``, so no per-thread lock statement."""

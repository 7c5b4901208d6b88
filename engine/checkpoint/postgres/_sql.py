"""Postgres schema (numbered migrations) and dialect for PostgresSaver.

``MIGRATIONS[v]`` is migration version ``v``: a tuple of statements applied in
one transaction and recorded in ``engine_checkpoint_migrations``; ``setup()``
holds ``pg_advisory_lock(MIGRATION_LOCK)`` meanwhile, so concurrent setups from
several processes apply each version once. Append new versions; never edit a
released one.

Storage choice: the checkpoint dict and the metadata are stored in ``JSON``
columns (not ``JSONB``): JSON keeps the serializer's text exactly, so reads get
back what was written, while SQL can still query it
(``metadata->>'source'``). JSONB would not be lossless for Python data: it
reorders keys, rejects ``\\u0000`` and turns ``1e16`` into an integer. A
serializer whose output is not JSON (type tag not ``json``/``jsonraw``) is stored
in the ``*_raw`` BYTEA column instead. Channel values and pending writes are
``(type, payload BYTEA)`` exactly as serialized (any tag, never re-encoded);
with the default serializer they are JSON too: ``convert_from(blob, 'UTF8')::json``.
Text key columns use the "C" collation, so SQL orders ids and task paths
exactly as Python does.

Since v1 the checkpoint JSON leaves out the checkpoint's ``id`` and ``ts`` (the
``checkpoint_id`` and ``ts`` columns hold them) and carries the checkpoint's
scalar channel values (None, booleans, numbers) under ``channel_values``;
other values are rows of ``engine_checkpoint_blobs``. Rows written before keep
their ``id`` and ``ts`` in the JSON and read the same.

Since v2 rows are smaller (same columns, read the same, older rows too): the
checkpoint JSON has its versions packed (``engine.checkpoint._blobs.
pack_structure``), a task's regular writes are one row (``engine.checkpoint.
_writes``), the creation time is a TIMESTAMPTZ (``created_at``) when it has the
engine's form, and columns holding their usual value are NULL (no space). SQL
reads the time as ``COALESCE(ts, to_char(created_at AT TIME ZONE 'UTC', ...))``
(``DIALECT.ts``) and a version as
``checkpoint->'V'->>((checkpoint->'cv'->>'channel')::int)``.

Since v3 the checkpoints table has its primary key only; the regular writes
``put_step`` saves with a checkpoint are in its ``parent_writes`` column; values
and pending writes stay in their row, compressed, up to a page (``STORAGE
MAIN``): only what does not fit a page goes to the TOAST table.

Since v5 those payloads are compressed with LZ4 where the server has it (pglz
otherwise, and for rows written before).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from engine.checkpoint._sqlcore.dialect import SqlDialect, Stmt

__all__ = (
    "BEGIN_READ",
    "CONFLICT_SQLSTATE",
    "BEGIN_WRITE",
    "CREATE_MIGRATIONS_TABLE",
    "DIALECT",
    "LEASE_LOST_SQLSTATE",
    "LEASE_STATEMENTS",
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "PLANNING",
    "PLANNING_FOR",
    "PostgresDialect",
)

MIGRATION_LOCK = 0x656E67696E65
"""``pg_advisory_lock`` key held by ``setup()`` (the bigint key space)."""

THREAD_LOCK_CLASS = 0x656E67
"""First key of the ``pg_advisory_xact_lock(int, int)`` a thread's fenced writes
and retention operations take; the second is ``hashtext(thread_id)`` (the
two-int key space does not overlap the bigint one)."""

LEASE_LOST_SQLSTATE = "EC410"
"""Raised by ``engine_thread_lease_check``; its DETAIL is a JSON object with
``thread_id``, ``checkpoint_ns`` and ``holder``."""

CONFLICT_SQLSTATE = "EC409"
"""Raised by ``engine_checkpoint_expect_head``; its DETAIL is a JSON object with
``thread_id``, ``checkpoint_ns``, ``expected`` and ``head``."""


def _storage_main(table: str, columns: str) -> str:
    """``SET STORAGE MAIN`` for the (space-separated) variable-length columns."""
    changes = ", ".join(f"ALTER COLUMN {c} SET STORAGE MAIN" for c in columns.split())
    return f"ALTER TABLE {table} {changes}"


CREATE_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS engine_checkpoint_migrations ("
    "v INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
)

MIGRATIONS: list[tuple[str, ...]] = [
    # v0: checkpoints, channel values (full or delta), pending writes, deadlines.
    (
        """CREATE TABLE engine_checkpoints (
            thread_id TEXT COLLATE "C" NOT NULL,
            checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
            checkpoint_id TEXT COLLATE "C" NOT NULL,
            parent_checkpoint_id TEXT COLLATE "C",
            checkpoint_type TEXT NOT NULL,
            checkpoint JSON,
            checkpoint_raw BYTEA,
            metadata_type TEXT NOT NULL,
            metadata JSON,
            metadata_raw BYTEA,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id),
            CHECK ((checkpoint IS NULL) <> (checkpoint_raw IS NULL)),
            CHECK ((metadata IS NULL) <> (metadata_raw IS NULL))
        )""",
        "CREATE INDEX engine_checkpoints_thread_idx "
        "ON engine_checkpoints (thread_id, checkpoint_id)",
        "CREATE INDEX engine_checkpoints_id_idx ON engine_checkpoints (checkpoint_id)",
        """CREATE TABLE engine_checkpoint_blobs (
            thread_id TEXT COLLATE "C" NOT NULL,
            checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
            channel TEXT COLLATE "C" NOT NULL,
            version TEXT COLLATE "C" NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('full', 'delta', 'empty')),
            type TEXT NOT NULL,
            blob BYTEA NOT NULL,
            base_version TEXT COLLATE "C",
            delta_start INTEGER,
            chain_len INTEGER NOT NULL DEFAULT 0,
            chain_bytes BIGINT NOT NULL DEFAULT 0,
            root_bytes BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )""",
        """CREATE TABLE engine_checkpoint_writes (
            thread_id TEXT COLLATE "C" NOT NULL,
            checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
            checkpoint_id TEXT COLLATE "C" NOT NULL,
            task_id TEXT COLLATE "C" NOT NULL,
            idx INTEGER NOT NULL,
            channel TEXT NOT NULL,
            type TEXT NOT NULL,
            blob BYTEA NOT NULL,
            task_path TEXT COLLATE "C" NOT NULL DEFAULT '',
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )""",
        """CREATE TABLE engine_checkpoint_ttl (
            thread_id TEXT COLLATE "C" PRIMARY KEY,
            expires_at TIMESTAMPTZ NOT NULL
        )""",
        "CREATE INDEX engine_checkpoint_ttl_expires_idx "
        "ON engine_checkpoint_ttl (expires_at)",
        # Fencing in one statement, so a fenced put needs no round trip of its own:
        # lock the thread, compare its newest checkpoint, fail the transaction.
        f"""CREATE FUNCTION engine_checkpoint_expect_head(
            p_thread_id TEXT, p_checkpoint_ns TEXT, p_expected TEXT
        ) RETURNS VOID LANGUAGE plpgsql AS $$
        DECLARE
            newest TEXT;
        BEGIN
            PERFORM pg_advisory_xact_lock({THREAD_LOCK_CLASS}, hashtext(p_thread_id));
            SELECT checkpoint_id INTO newest FROM engine_checkpoints
            WHERE thread_id = p_thread_id AND checkpoint_ns = p_checkpoint_ns
            ORDER BY checkpoint_id DESC LIMIT 1;
            IF newest IS DISTINCT FROM p_expected THEN
                RAISE EXCEPTION USING
                    ERRCODE = '{CONFLICT_SQLSTATE}',
                    MESSAGE = 'checkpoint conflict',
                    DETAIL = json_build_object(
                        'thread_id', p_thread_id, 'checkpoint_ns', p_checkpoint_ns,
                        'expected', p_expected, 'head', newest
                    )::text;
            END IF;
        END
        $$""",
    ),
    # v1: the creation time in its own column, so a history is read without
    # decoding checkpoints; rows written from now on keep it out of the
    # checkpoint JSON (older rows keep it there and leave the column NULL).
    ("ALTER TABLE engine_checkpoints ADD COLUMN ts TEXT",),
    # v2: smaller rows. The creation time as a TIMESTAMPTZ (8 bytes instead of 33
    # of text) when it is in the form the engine writes (UTC, microseconds; else
    # it stays text in ``ts``). Columns whose value is the usual one may be NULL,
    # which costs no space: a checkpoint's ``checkpoint_type`` (``jsonraw``) and
    # ``metadata_type`` (``json``); a value's ``type`` (``json``), its ``kind``
    # (``delta`` when it has a base version, ``full`` otherwise) and the chain
    # bookkeeping of values that are not deltas (0, 0 and the payload's size).
    # Rows written before read the same.
    (
        "ALTER TABLE engine_checkpoints ADD COLUMN created_at TIMESTAMPTZ, "
        "ALTER COLUMN checkpoint_type DROP NOT NULL, "
        "ALTER COLUMN metadata_type DROP NOT NULL",
        "ALTER TABLE engine_checkpoint_blobs "
        "ALTER COLUMN kind DROP NOT NULL, ALTER COLUMN type DROP NOT NULL, "
        "ALTER COLUMN chain_len DROP NOT NULL, ALTER COLUMN chain_len DROP DEFAULT, "
        "ALTER COLUMN chain_bytes DROP NOT NULL, "
        "ALTER COLUMN chain_bytes DROP DEFAULT, "
        "ALTER COLUMN root_bytes DROP NOT NULL, ALTER COLUMN root_bytes DROP DEFAULT",
    ),
    # v3: less on disk per step. (1) The two secondary indexes on checkpoints go:
    # every query of a thread (its history, its head, one checkpoint, retention)
    # walks the primary key (thread_id, checkpoint_ns, checkpoint_id), and a
    # thread's history over all its namespaces is that key's thread prefix, sorted.
    # Only a list across all threads (no thread_id) now reads the whole table; it
    # is an administrator's query, not a run's. (2) Values and pending writes are
    # kept in their row, compressed, up to a page (STORAGE MAIN): a value over
    # ~2 KB is compressed as before, and goes to the TOAST table only when it
    # still does not fit a page, instead of always. A delta chain's full value,
    # read with its deltas, is then in the same heap as they are, and the TOAST
    # table (with its index and free-space map) stays empty for most threads.
    # (3) The regular writes ``put_step`` saves with a checkpoint (its parent's
    # last task's) live in that checkpoint's row (``parent_writes``), not in a row
    # of engine_checkpoint_writes with its own keys and index entry.
    # Rows written before keep their layout and read the same.
    (
        "ALTER TABLE engine_checkpoints ADD COLUMN parent_writes BYTEA",
        "ALTER TABLE engine_checkpoints ALTER COLUMN parent_writes SET STORAGE MAIN",
        "DROP INDEX IF EXISTS engine_checkpoints_thread_idx",
        "DROP INDEX IF EXISTS engine_checkpoints_id_idx",
        _storage_main(
            "engine_checkpoint_blobs",
            "thread_id checkpoint_ns channel version kind type blob base_version",
        ),
        _storage_main(
            "engine_checkpoint_writes",
            "thread_id checkpoint_ns checkpoint_id task_id channel type blob task_path",
        ),
    ),
    # v4: thread leases, one row per thread and namespace a run holds (see
    # ``engine.checkpoint._lease``), timed by the database's clock; and the check
    # a fenced save runs first, in one statement so it costs no round trip: it
    # share-locks the holder's row (a takeover waits for the save, or the save
    # sees the new holder) and fails the transaction when the row is not its.
    (
        """CREATE TABLE engine_thread_leases (
            thread_id TEXT COLLATE "C" NOT NULL,
            checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
            holder TEXT NOT NULL,
            expires_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (thread_id, checkpoint_ns)
        )""",
        f"""CREATE FUNCTION engine_thread_lease_check(
            p_thread_id TEXT, p_checkpoint_ns TEXT, p_holder TEXT
        ) RETURNS VOID LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM 1 FROM engine_thread_leases
            WHERE thread_id = p_thread_id AND checkpoint_ns = p_checkpoint_ns
            AND holder = p_holder FOR SHARE;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING
                    ERRCODE = '{LEASE_LOST_SQLSTATE}',
                    MESSAGE = 'thread lease lost',
                    DETAIL = json_build_object(
                        'thread_id', p_thread_id, 'checkpoint_ns', p_checkpoint_ns,
                        'holder', p_holder
                    )::text;
            END IF;
        END
        $$""",
    ),
    # v5: large payloads compressed with LZ4 instead of pglz where the server has
    # it (PostgreSQL 14 and newer built with LZ4, as the Debian and official
    # packages are): a 270 KB value is stored in 0.7 ms instead of 2.8, read as
    # fast, ~18% larger once compressed. Values written before keep pglz and read
    # the same; a server without LZ4 keeps pglz.
    (
        """DO $$
        BEGIN
            IF EXISTS (
                SELECT 1 FROM pg_settings
                WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)
            ) THEN
                ALTER TABLE engine_checkpoint_blobs
                    ALTER COLUMN blob SET COMPRESSION lz4;
                ALTER TABLE engine_checkpoint_writes
                    ALTER COLUMN blob SET COMPRESSION lz4;
                ALTER TABLE engine_checkpoints
                    ALTER COLUMN parent_writes SET COMPRESSION lz4;
            END IF;
        END
        $$""",
    ),
]

_LEASE_END = "clock_timestamp() + make_interval(secs => %s::float8)"

LEASE_STATEMENTS = {
    "lease_acquire": (
        "INSERT INTO engine_thread_leases AS l "
        "(thread_id, checkpoint_ns, holder, expires_at) "
        f"VALUES (%s, %s, %s, {_LEASE_END}) "
        "ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE SET "
        "holder = excluded.holder, expires_at = excluded.expires_at "
        "WHERE l.expires_at <= clock_timestamp() OR l.holder = excluded.holder "
        "RETURNING holder, expires_at"
    ),
    "lease_renew": (
        f"UPDATE engine_thread_leases SET expires_at = {_LEASE_END} "
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
    "lease_check": "SELECT engine_thread_lease_check(%s, %s, %s)",
    # A run's step: the lease checked first, then the head (a select list is
    # evaluated in order, and the first function that raises ends it).
    "lease_check_and_head": (
        "SELECT engine_thread_lease_check(%s, %s, %s), "
        "engine_checkpoint_expect_head(%s, %s, %s)"
    ),
    # A run's last save, which gives its lease back in the same transaction: the
    # lease row is deleted first (a takeover waits for the commit, as it waits for
    # the check's share lock), then the head is checked; when the row is not this
    # holder's, the check reports the lost lease. One statement, and no row lock
    # taken only to be followed by the delete.
    "lease_end_and_head": (
        "WITH ended AS (DELETE FROM engine_thread_leases "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND holder = %s RETURNING 1) "
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM ended) "
        "THEN engine_checkpoint_expect_head(%s, %s, %s) "
        "ELSE engine_thread_lease_check(%s, %s, %s) END"
    ),
    # A lease change lost in a database crash is harmless (a lost take makes the
    # run's saves refused, a lost renewal or release ends at expiry), so its
    # commit does not wait for the WAL flush.
    "lease_commit_early": "SET LOCAL synchronous_commit TO OFF",
}
"""Thread-lease statements (``engine.checkpoint._sqlcore.lease``)."""


def _keys(width: int) -> str:
    arrays = ", ".join(["%s::text[]"] * width)
    return f"SELECT * FROM unnest({arrays})"


JSON_TAGS = frozenset({"json", "jsonraw"})
"""Serializer type tags whose payload is JSON text (stored in the JSON columns)."""


def _default_none(type_tag: str) -> str | None:
    return None if type_tag == _DEFAULT_BLOB_TYPE else type_tag


def _json_or_raw(type_tag: str, payload: bytes) -> tuple[str | None, bytes | None]:
    """(JSON text, None) for JSON payloads, (None, bytes) for anything else."""
    if type_tag in JSON_TAGS:
        return payload.decode(), None
    return None, payload


_ENGINE_TS = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\+00:00"
)


def split_ts(ts: str | None) -> tuple[str | None, datetime | None]:
    """``(ts, created_at)`` column values of a creation time: a TIMESTAMPTZ when
    reading it back as text (``_TS``) gives exactly ``ts``, text otherwise."""
    if ts is None or len(ts) != 32 or not _ENGINE_TS.fullmatch(ts):
        return ts, None
    try:
        moment = datetime.fromisoformat(ts)
    except ValueError:
        return ts, None
    if moment.isoformat() != ts:
        return ts, None
    return None, moment.astimezone(UTC)


_TS = (
    "COALESCE(ts, to_char(created_at AT TIME ZONE 'UTC', "
    '\'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"\'))'
)
"""A checkpoint row's creation time as text (see ``split_ts``)."""

_DEFAULT_CHECKPOINT_TYPE = "jsonraw"
_DEFAULT_METADATA_TYPE = "json"
_DEFAULT_BLOB_TYPE = "json"


MERGED_ROWS = 8
"""Rows one insert statement carries at most (see ``PostgresDialect.inserts``)."""

MERGED_BYTES = 64 * 1024
"""Payload bytes past which a merged insert takes no further row."""

_MERGEABLE = frozenset({"insert_blob", "insert_write_keep"})
"""Inserts whose rows may go in one statement: ``ON CONFLICT DO NOTHING``, under
which a key met twice keeps its first row, in one statement as in one per row
(an upsert's ``DO UPDATE`` refuses to meet a key twice in one statement)."""

_ONE_ROW = re.compile(r"VALUES (\((?:%s, )*%s\))")


@lru_cache(maxsize=64)
def merged_insert(sql: str, rows: int) -> str:
    """``sql`` (an insert of one row of ``%s`` placeholders) inserting ``rows``."""
    one = _ONE_ROW.search(sql)
    assert one is not None, sql
    values = ", ".join([one.group(1)] * rows)
    return f"{sql[: one.start()]}VALUES {values}{sql[one.end() :]}"


def _merged_stmt(sql: str, count: int, params: list[Any]) -> Stmt:
    if count == 1:
        return Stmt(sql, params)
    return Stmt(merged_insert(sql, count), params)


def _payload_bytes(row: Sequence[Any]) -> int:
    return sum(len(p) for p in row if isinstance(p, (bytes, str)))


class PostgresDialect(SqlDialect):
    """Key sets travel as one text array per column, joined back by ``unnest``."""

    def inserts(self, name: str, rows: Sequence[Sequence[Any]]) -> Iterator[Stmt]:
        """Up to ``MERGED_ROWS`` rows (or ``MERGED_BYTES`` of payload) a statement,
        for the inserts that allow it (``_MERGEABLE``): each execution costs the
        server ~10 µs beyond its rows, and a step stores a few small values (three
        rows a step: ~45 µs less an invoke of the interrupt/resume cycle). At most
        ``MERGED_ROWS`` statement shapes each, prepared once per connection."""
        if name not in _MERGEABLE or len(rows) < 2:
            yield from super().inserts(name, rows)
            return
        sql = self[name]
        group: list[Any] = []
        count = size = 0
        for row in rows:
            # Integers as text, which the server reads as its column's type: a
            # parameter's type then never depends on its value (psycopg sends
            # an int as int2, int4 or int8 by its size, None untyped), so the
            # statement has one prepared form per row count, not one per mix.
            group.extend([str(p) if type(p) is int else p for p in row])
            count += 1
            size += _payload_bytes(row)
            if count == MERGED_ROWS or size >= MERGED_BYTES:
                yield _merged_stmt(sql, count, group)
                group, count, size = [], 0, 0
        if count:
            yield _merged_stmt(sql, count, group)

    def keys_param(
        self, keys: Sequence[tuple[str, ...]], width: int
    ) -> tuple[Any, ...]:
        return tuple([key[i] for key in keys] for i in range(width))

    def checkpoint_params(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return (
            *row[:4],
            None if row[4] == _DEFAULT_CHECKPOINT_TYPE else row[4],
            *_json_or_raw(row[4], row[5]),
            None if row[6] == _DEFAULT_METADATA_TYPE else row[6],
            *_json_or_raw(row[6], row[7]),
            *split_ts(row[8]),
            row[9],
        )

    def blob_params(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        kind, type_tag = row[4], row[5]
        if kind == "delta":
            return (*row[:4], None, _default_none(type_tag), *row[6:])
        if kind == "full":
            return (
                *row[:4],
                None,
                _default_none(type_tag),
                *row[6:8],
                None,
                None,
                None,
                None,
            )
        return (*row[:8], None, None, None, None)

    def json_inspectable(self) -> str:
        # JSON text holding \u0000 cannot become text (->>, #>> fail on it), and
        # raw payloads (another serializer) are not JSON: such rows pass.
        return "c.metadata IS NOT NULL AND strpos(c.metadata::text, '\\u0000') = 0"

    def json_path(self, path: Sequence[str | int]) -> Any | None:
        steps = [str(step) for step in path]
        if any("\x00" in step for step in steps):
            return None
        return steps

    def json_test(
        self, test: str, path: Any, tag_path: Any, value: Any = None
    ) -> tuple[str, tuple[Any, ...]]:
        if test == "number":
            kind = "float8" if isinstance(value, float) else "numeric"
            sql = _NUMBER.format(kind=kind)
        else:
            sql = _JSON_TESTS[test]
        if test in ("absent_or_null", "null"):
            return sql, (path,)
        if test in ("string", "number", "array"):
            return sql, (path, path, value)
        if test == "bool":
            return sql, (path, path, "true" if value else "false")
        if test == "object":
            return sql, (path, tag_path, path, value)
        return sql, (path, tag_path)


_AT = "(c.metadata #> %s::text[])"
_TEXT_AT = "(c.metadata #>> %s::text[])"
# CASE where the test's second half could fail on another type (casts, key sets).
_NUMBER = (
    f"CASE WHEN json_typeof({_AT}) = 'number' "
    f"THEN {_TEXT_AT}::{{kind}} = %s::{{kind}} ELSE FALSE END"
)
_JSON_TESTS = {
    "absent_or_null": f"coalesce(json_typeof({_AT}), 'null') = 'null'",
    "null": f"json_typeof({_AT}) = 'null'",
    "string": f"(json_typeof({_AT}) = 'string' AND {_TEXT_AT} = %s)",
    "bool": f"(json_typeof({_AT}) = 'boolean' AND {_TEXT_AT} = %s)",
    "object": (
        f"CASE WHEN json_typeof({_AT}) = 'object' THEN {_AT} IS NULL "
        f"AND (SELECT count(*) FROM json_object_keys({_AT})) = %s ELSE FALSE END"
    ),
    "array": (
        f"CASE WHEN json_typeof({_AT}) = 'array' "
        f"THEN json_array_length({_AT}) = %s ELSE FALSE END"
    ),
    "tagged": f"(json_typeof({_AT}) = 'object' AND {_AT} IS NOT NULL)",
}


_CHECKPOINT_PAYLOAD = "COALESCE(convert_to(checkpoint::text, 'UTF8'), checkpoint_raw)"
_METADATA_PAYLOAD = "COALESCE(convert_to(metadata::text, 'UTF8'), metadata_raw)"

_ALL_CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, "
    "checkpoint, checkpoint_raw, metadata_type, metadata, metadata_raw, ts, created_at, "
    "parent_writes"
)

_INSERT_CHECKPOINT = (
    f"INSERT INTO engine_checkpoints ({_ALL_CHECKPOINT_COLUMNS}) "
    "VALUES (%s, %s, %s, %s, %s, %s::json, %s, %s, %s::json, %s, %s, %s, %s) "
    "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
    "parent_checkpoint_id = excluded.parent_checkpoint_id, "
    "checkpoint_type = excluded.checkpoint_type, checkpoint = excluded.checkpoint, "
    "checkpoint_raw = excluded.checkpoint_raw, metadata_type = excluded.metadata_type, "
    "metadata = excluded.metadata, metadata_raw = excluded.metadata_raw, "
    "ts = excluded.ts, created_at = excluded.created_at, "
    "parent_writes = excluded.parent_writes"
)

_COPY_CHECKPOINTS = (
    f"INSERT INTO engine_checkpoints ({_ALL_CHECKPOINT_COLUMNS}) "
    "SELECT %s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, "
    "checkpoint, checkpoint_raw, metadata_type, metadata, metadata_raw, ts, "
    "created_at, parent_writes FROM engine_checkpoints WHERE thread_id = %s"
)

_STORED_BYTES = (
    "SELECT "
    "(SELECT COALESCE(SUM(COALESCE(octet_length(checkpoint::text), 0) "
    "+ COALESCE(octet_length(checkpoint_raw), 0) "
    "+ COALESCE(octet_length(metadata::text), 0) "
    "+ COALESCE(octet_length(metadata_raw), 0) "
    "+ COALESCE(octet_length({ts}), 0) + COALESCE(octet_length(parent_writes), 0)), 0) "
    "FROM engine_checkpoints WHERE thread_id = %s), "
    "(SELECT COALESCE(SUM(octet_length(blob)), 0) "
    "FROM engine_checkpoint_blobs WHERE thread_id = %s), "
    "(SELECT COALESCE(SUM(octet_length(blob)), 0) "
    "FROM engine_checkpoint_writes WHERE thread_id = %s)"
)

_KIND = (
    "COALESCE(x.kind, CASE WHEN x.base_version IS NULL THEN 'full' ELSE 'delta' END)"
)
"""A value row's kind (NULL since v2: ``delta`` with a base version, else ``full``)."""
_CHAIN = (
    "COALESCE(x.chain_len, 0), COALESCE(x.chain_bytes, 0), "
    "COALESCE(x.root_bytes, octet_length(x.blob))"
)
"""A value row's chain bookkeeping (NULL since v2 for values that are not deltas)."""

_BLOB_COLUMNS = (
    f"x.thread_id, x.checkpoint_ns, x.channel, x.version, {_KIND}, "
    f"COALESCE(x.type, '{_DEFAULT_BLOB_TYPE}'), x.blob, x.base_version, "
    f"x.delta_start, {_CHAIN}"
)

# Lateral lookups: one primary-key probe per wanted version and per delta base,
# whatever the planner thinks of the table's size (LIMIT 1 keeps the planner from
# flattening them into hash joins over the whole table).
_BLOBS_FOR_KEYS = (
    "WITH RECURSIVE wanted (thread_id, checkpoint_ns, channel, version) AS "
    "({keys4}), "
    "chain (thread_id, checkpoint_ns, channel, version, base_version) AS ("
    "SELECT x.thread_id, x.checkpoint_ns, x.channel, x.version, x.base_version "
    "FROM wanted w CROSS JOIN LATERAL (SELECT * FROM engine_checkpoint_blobs b "
    "WHERE b.thread_id = w.thread_id AND b.checkpoint_ns = w.checkpoint_ns "
    "AND b.channel = w.channel AND b.version = w.version LIMIT 1) x "
    "UNION "
    "SELECT x.thread_id, x.checkpoint_ns, x.channel, x.version, x.base_version "
    "FROM chain k CROSS JOIN LATERAL (SELECT * FROM engine_checkpoint_blobs b "
    "WHERE b.thread_id = k.thread_id AND b.checkpoint_ns = k.checkpoint_ns "
    "AND b.channel = k.channel AND b.version = k.base_version LIMIT 1) x) "
    f"SELECT {_BLOB_COLUMNS} FROM chain k CROSS JOIN LATERAL "
    "(SELECT * FROM engine_checkpoint_blobs b WHERE b.thread_id = k.thread_id "
    "AND b.checkpoint_ns = k.checkpoint_ns AND b.channel = k.channel "
    "AND b.version = k.version LIMIT 1) x"
)

_BLOB_BASES = (
    f"SELECT x.thread_id, x.checkpoint_ns, x.channel, x.version, {_KIND}, {_CHAIN} "
    "FROM ({keys4}) w (thread_id, checkpoint_ns, channel, version) "
    "CROSS JOIN LATERAL (SELECT * FROM engine_checkpoint_blobs b "
    "WHERE b.thread_id = w.thread_id AND b.checkpoint_ns = w.checkpoint_ns "
    "AND b.channel = w.channel AND b.version = w.version LIMIT 1) x"
)

# A value sent in parts (``saves._send_in_parts``): each part a row of its own
# under a throwaway version, numbered in chain_len; then one statement deletes
# the parts and inserts the value's row from them, in order, as insert_blob
# would (nothing when the key is stored already).
_INSERT_BLOB_PART = (
    "INSERT INTO engine_checkpoint_blobs "
    "(thread_id, checkpoint_ns, channel, version, blob, chain_len) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_JOIN_BLOB_PARTS = (
    "WITH parts AS (DELETE FROM engine_checkpoint_blobs "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s "
    "AND version = ANY(%s::text[]) RETURNING chain_len, blob) "
    "INSERT INTO engine_checkpoint_blobs (thread_id, checkpoint_ns, channel, "
    "version, kind, type, blob, base_version, delta_start, chain_len, chain_bytes, "
    "root_bytes) VALUES (%s, %s, %s, %s, %s, %s, "
    "(SELECT string_agg(blob, ''::bytea ORDER BY chain_len) FROM parts), "
    "%s, %s, %s, %s, %s) "
    "ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING"
)

DIALECT = PostgresDialect(
    placeholder="%s",
    keys3=_keys(3),
    keys4=_keys(4),
    length="octet_length",
    checkpoint_payload=_CHECKPOINT_PAYLOAD,
    metadata_payload=_METADATA_PAYLOAD,
    checkpoint_type=f"COALESCE(checkpoint_type, '{_DEFAULT_CHECKPOINT_TYPE}')",
    metadata_type=f"COALESCE(metadata_type, '{_DEFAULT_METADATA_TYPE}')",
    ts=_TS,
    lock_thread=f"SELECT pg_advisory_xact_lock({THREAD_LOCK_CLASS}, hashtext(%s))",
    expect_head="SELECT engine_checkpoint_expect_head(%s, %s, %s)",
    drain="SELECT 1",
    pipelines=True,
    overrides={
        **LEASE_STATEMENTS,
        "insert_checkpoint": _INSERT_CHECKPOINT,
        "copy_checkpoints": _COPY_CHECKPOINTS,
        "stored_bytes": _STORED_BYTES,
        "blobs_for_keys": _BLOBS_FOR_KEYS,
        "blob_bases": _BLOB_BASES,
        "insert_blob_part": _INSERT_BLOB_PART,
        "join_blob_parts": _JOIN_BLOB_PARTS,
        "thread_blob_keys": (
            f"SELECT checkpoint_ns, channel, version, {_KIND}, base_version "
            "FROM engine_checkpoint_blobs x WHERE thread_id = %s"
        ),
    },
)

BEGIN_WRITE = "BEGIN"
"""Writes run in READ COMMITTED: after the thread lock, the head check must see
the commit of the writer that held it."""

BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
"""Reads see one snapshot across their statements (row, values, writes)."""

PLANNING = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), "
    "set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
)
"""Sent after every ``BEGIN`` of a saver's transaction (its settings end with it).

Every statement a saver runs on its hot paths looks rows up by key, so one plan
serves all its runs: the statement is planned once per connection (its generic
plan) instead of at each run (a custom plan: Postgres planned the values read
anew every time, 0.2 ms, and the writes read, never prepared, 0.15 ms). The
plan is made without sequential scans (``enable_seqscan`` only makes them the
last resort): otherwise the plan chosen while a table is nearly empty scans it
whole, and is kept while the table grows (0.35 ms a read at 2,400 writes) until
the table is analyzed again. Plans are made and remade (after the table's
statistics change) only under these settings, since every transaction that runs
the statements has them.

The few statements that do read a whole table (``delete_for_runs``' metadata
search, ``list`` across all threads, the TTL sweep) still scan it, as their only
plan, but not in parallel: ~1.4x slower on a 300,000-row table. ``jit`` is off:
a plan's cost, raised by a disabled scan, would otherwise cross the JIT
thresholds and compile each time (50-90 ms), and lookups by key never gain from
it."""

PLANNING_FOR = {
    LEASE_STATEMENTS["lease_commit_early"]: (
        f"{PLANNING}, set_config('synchronous_commit', 'off', true)"
    )
}
"""The settings statement of a transaction whose first statement is a key here,
which it then stands for (``LibpqTransaction``'s ``planning_for``): a lease
change's transaction sets ``synchronous_commit`` off in it, one statement fewer
a lease taken."""

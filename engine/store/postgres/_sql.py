"""SQL for the Postgres store: numbered migrations and pure builders for each operation.

Schema: one row per item in ``engine_store``. The namespace is stored as text with
``"."`` between labels (labels never contain one) and indexed with
``text_pattern_ops``, so a prefix search is ``prefix = 'a.b' OR prefix LIKE 'a.b.%'``
(LIKE metacharacters in labels are escaped). Values are JSONB in the tagged-JSON form
made by ``jsonplus``; filters compare that form in SQL. ``expires_at``/``ttl_minutes``
carry TTLs. Semantic search keeps one row per embedded field in
``engine_store_vectors`` (a ``float8[]`` and its norm; deleted with the item by a
foreign key) and ranks in SQL with exact arithmetic over the rows under the
namespace prefix: no pgvector extension is needed, and no approximate index is
used. Table names are prefixed ``engine_`` so LangGraph's own ``store`` tables
can live in the same database.

Builders return ``(sql, params)`` and are shared by the sync and async stores. Pure:
no I/O; the clock is the database's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from engine.store._index import FieldVector, norm, unit
from engine.store._ops import SERDE, Condition, GetPlan, ListPlan, PutPlan, SearchPlan
from engine.store.base import Item, MatchCondition, SearchItem
from engine.store.base._types import WILDCARD, DistanceType

__all__ = (
    "CREATE_MIGRATIONS_TABLE",
    "CURRENT_VERSION",
    "INSERT_MIGRATION",
    "LOCK_KEY",
    "MIGRATIONS",
    "REFRESH_ONE",
    "SELECT_VERSION",
    "SWEEP",
    "delete_query",
    "get_query",
    "item_from_row",
    "list_query",
    "make_loader",
    "namespace_from_text",
    "namespace_text",
    "put_query",
    "put_vectors_query",
    "refresh_many",
    "STORE_USERS",
    "search_item_from_row",
    "search_query",
)

Query = tuple[str, list[Any]]
Loader = Callable[[Any], dict[str, Any]]
"""Turns a stored JSONB document (as psycopg parsed it) into an item's value."""


def make_loader(deserializer: Callable[[bytes], dict[str, Any]] | None) -> Loader:
    """How rows' JSONB documents become values: tagged JSON, or ``deserializer``
    given the document's JSON text as bytes."""
    if deserializer is None:
        return SERDE.decode
    return lambda document: deserializer(orjson.dumps(document))


STORE_USERS = "Postgres stores"
"""Who needs autocommit connections, in ``require_autocommit``'s refusal."""


MIGRATIONS: tuple[str, ...] = (
    # v0: items
    """
    CREATE TABLE IF NOT EXISTS engine_store (
        prefix text NOT NULL,
        key text NOT NULL,
        value jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz,
        ttl_minutes double precision,
        PRIMARY KEY (prefix, key)
    )
    """,
    # v1: prefix search (LIKE 'a.b.%') and namespace listing
    """
    CREATE INDEX IF NOT EXISTS engine_store_prefix_idx
        ON engine_store USING btree (prefix text_pattern_ops)
    """,
    # v2: TTL sweeps
    """
    CREATE INDEX IF NOT EXISTS engine_store_expires_at_idx
        ON engine_store (expires_at) WHERE expires_at IS NOT NULL
    """,
    # v3: field vectors for semantic search
    """
    CREATE TABLE IF NOT EXISTS engine_store_vectors (
        prefix text NOT NULL,
        key text NOT NULL,
        field text NOT NULL,
        embedding double precision[] NOT NULL,
        norm double precision NOT NULL,
        PRIMARY KEY (prefix, key, field),
        FOREIGN KEY (prefix, key) REFERENCES engine_store (prefix, key) ON DELETE CASCADE
    )
    """,
)
"""Index = version. Append only; never edit a released migration."""

CURRENT_VERSION = len(MIGRATIONS) - 1

LOCK_KEY = int.from_bytes(
    hashlib.blake2b(b"engine.store.migrations", digest_size=8).digest(),
    "big",
    signed=True,
)
"""``pg_advisory_xact_lock`` key: concurrent ``setup()`` calls migrate one at a time."""

CREATE_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS engine_store_migrations (v integer PRIMARY KEY)"
)
SELECT_VERSION = "SELECT coalesce(max(v), -1) FROM engine_store_migrations"
INSERT_MIGRATION = "INSERT INTO engine_store_migrations (v) VALUES (%s)"

_LIVE = "(expires_at IS NULL OR expires_at > now())"
_COLUMNS = "prefix, key, value, created_at, updated_at"
_ORDER = 'updated_at DESC, prefix COLLATE "C", key COLLATE "C"'
_LABELS = "string_to_array(prefix, '.')"

REFRESH_ONE = (
    "UPDATE engine_store SET expires_at = now() + ttl_minutes * interval '1 minute' "
    "WHERE prefix = %s AND key = %s AND ttl_minutes IS NOT NULL"
)
_REFRESH_MANY = (
    "UPDATE engine_store AS s SET expires_at = now() + s.ttl_minutes * interval '1 minute' "
    "FROM unnest(%s::text[], %s::text[]) AS hit(prefix, key) "
    "WHERE s.prefix = hit.prefix AND s.key = hit.key AND s.ttl_minutes IS NOT NULL"
)
SWEEP = "DELETE FROM engine_store WHERE expires_at IS NOT NULL AND expires_at <= now()"

_UPSERT = """
WITH old_vectors AS (
    DELETE FROM engine_store_vectors WHERE prefix = %s AND key = %s
)
INSERT INTO engine_store AS s
    (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
SELECT %s, %s, %s::jsonb, clock.t, clock.t,
       clock.t + %s::float8 * interval '1 minute', %s::float8
FROM (SELECT clock_timestamp() AS t) AS clock
ON CONFLICT (prefix, key) DO UPDATE SET
    value = EXCLUDED.value,
    created_at = CASE WHEN s.expires_at IS NOT NULL AND s.expires_at <= EXCLUDED.updated_at
                      THEN EXCLUDED.created_at ELSE s.created_at END,
    updated_at = EXCLUDED.updated_at,
    expires_at = EXCLUDED.expires_at,
    ttl_minutes = EXCLUDED.ttl_minutes
"""


def namespace_text(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def namespace_from_text(text: str) -> tuple[str, ...]:
    return tuple(text.split("."))


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# -- operations ----------------------------------------------------------------------------


def get_query(plan: GetPlan) -> Query:
    sql = (
        f"SELECT {_COLUMNS}, ttl_minutes FROM engine_store "
        f"WHERE prefix = %s AND key = %s AND {_LIVE}"
    )
    return sql, [namespace_text(plan.namespace), plan.key]


def put_query(plan: PutPlan) -> Query:
    """Upsert; keeps ``created_at`` unless the previous version had expired.

    Also deletes the item's field vectors: :func:`put_vectors_query` adds the new
    ones, if any.
    """
    prefix = namespace_text(plan.namespace)
    return _UPSERT, [prefix, plan.key, prefix, plan.key, plan.text, plan.ttl, plan.ttl]


_INSERT_VECTORS = """
INSERT INTO engine_store_vectors (prefix, key, field, embedding, norm)
SELECT %s, %s, v.field,
       ARRAY(SELECT jsonb_array_elements_text(v.embedding)::float8), v.norm
FROM jsonb_to_recordset(%s::jsonb) AS v(field text, embedding jsonb, norm float8)
"""


def put_vectors_query(plan: PutPlan, vectors: Sequence[FieldVector]) -> Query:
    """Insert an item's field vectors (after :func:`put_query`)."""
    rows = [
        {"field": field, "embedding": vector, "norm": norm(vector)}
        for field, vector in vectors
    ]
    prefix = namespace_text(plan.namespace)
    return _INSERT_VECTORS, [prefix, plan.key, orjson.dumps(rows).decode()]


def refresh_many(rows: list[tuple[Any, ...]]) -> Query:
    """Push back the expiry of search rows (``prefix, key, ...``) that have a TTL."""
    return _REFRESH_MANY, [[row[0] for row in rows], [row[1] for row in rows]]


def delete_query(plan: PutPlan) -> Query:
    sql = "DELETE FROM engine_store WHERE prefix = %s AND key = %s"
    return sql, [namespace_text(plan.namespace), plan.key]


def search_query(
    plan: SearchPlan,
    query_vector: Sequence[float] | None = None,
    distance_type: DistanceType = "cosine",
) -> Query:
    """Select ``prefix, key, value, created_at, updated_at, ttl_minutes, score``.

    With ``query_vector`` (a store with an index), items rank by their best field
    vector, then items without vectors follow with a NULL score. Otherwise
    ``plan.terms`` must not be ``()`` (a query without words matches nothing).
    """
    where = [_LIVE]
    where_params: list[Any] = []
    if plan.namespace_prefix:
        text = namespace_text(plan.namespace_prefix)
        where.append("(prefix = %s OR prefix LIKE %s)")
        where_params += [text, _like_escape(text) + ".%"]
    for condition in plan.conditions:
        sql, params = _filter_sql(condition)
        where.append(sql)
        where_params += params
    filtered = (
        f"SELECT {_COLUMNS}, ttl_minutes FROM engine_store WHERE {' AND '.join(where)}"
    )
    page = [plan.limit, plan.offset]
    if query_vector is not None:
        score, score_params = _score_sql(query_vector, distance_type)
        sql = (
            f"WITH f AS ({filtered}), "
            f"s AS (SELECT v.prefix, v.key, max({score}) AS score "
            "FROM engine_store_vectors AS v JOIN f ON f.prefix = v.prefix AND f.key = v.key "
            "GROUP BY v.prefix, v.key) "
            f"SELECT f.prefix, f.key, f.value, f.created_at, f.updated_at, f.ttl_minutes, s.score "
            "FROM f LEFT JOIN s ON s.prefix = f.prefix AND s.key = f.key "
            'ORDER BY s.score DESC NULLS LAST, f.updated_at DESC, f.prefix COLLATE "C", '
            'f.key COLLATE "C" LIMIT %s OFFSET %s'
        )
        return sql, [*where_params, *score_params, *page]
    if plan.terms is None:
        sql = f"SELECT *, NULL::float8 AS score FROM ({filtered}) AS f ORDER BY {_ORDER} LIMIT %s OFFSET %s"
        return sql, where_params + page
    matched = " + ".join("(doc LIKE %s)::int" for _ in plan.terms)
    sql = (
        f"SELECT {_COLUMNS}, ttl_minutes, score FROM ("
        f"SELECT *, ({matched})::float8 / %s AS score FROM ("
        f"SELECT *, lower(value::text) AS doc FROM ({filtered}) AS f) AS d) AS scored "
        f"WHERE score > 0 ORDER BY score DESC, {_ORDER} LIMIT %s OFFSET %s"
    )
    term_params = [f"%{_like_escape(term)}%" for term in plan.terms]
    return sql, [*term_params, len(plan.terms), *where_params, *page]


def _score_sql(query: Sequence[float], distance_type: DistanceType) -> Query:
    """The score of vector row ``v`` against the query, as ``_index.similarity``."""
    pairs = "unnest(v.embedding, %s::float8[]) AS t(a, b)"
    if distance_type == "l2":
        return f"-sqrt((SELECT sum((a - b) * (a - b)) FROM {pairs}))", [list(query)]
    if distance_type == "inner_product":
        return f"(SELECT sum(a * b) FROM {pairs})", [list(query)]
    dot = f"(SELECT sum(a * b) FROM {pairs})"
    return f"CASE WHEN v.norm = 0 THEN 0 ELSE {dot} / v.norm END", [unit(query)]


def _filter_sql(condition: Condition) -> Query:
    field = "value -> %s::text"
    if condition.op == "$eq":
        return f"{field} = %s::jsonb", [condition.key, _json(condition.operand)]
    if condition.op == "$ne":
        return (
            f"({field}) IS DISTINCT FROM %s::jsonb",
            [condition.key, _json(condition.operand)],
        )
    compare = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[condition.op]
    if isinstance(condition.operand, str):
        sql = (
            f"(jsonb_typeof({field}) = 'string' AND "
            f'(value ->> %s::text) COLLATE "C" {compare} %s::text)'
        )
        return sql, [condition.key, condition.key, condition.operand]
    sql = f"(jsonb_typeof({field}) = 'number' AND {field} {compare} %s::jsonb)"
    return sql, [condition.key, condition.key, _json(condition.operand)]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def list_query(plan: ListPlan) -> Query:
    where = [_LIVE]
    where_params: list[Any] = []
    for condition in plan.conditions:
        sql, params = _match_sql(condition)
        where.append(sql)
        where_params += params
    if plan.max_depth is None:
        namespace, head = "prefix", []
    else:
        namespace, head = f"array_to_string(({_LABELS})[1:%s], '.')", [plan.max_depth]
    sql = (
        f"SELECT ns FROM (SELECT DISTINCT {namespace} AS ns FROM engine_store "
        f"WHERE {' AND '.join(where)}) AS t "
        "ORDER BY string_to_array(ns, '.') COLLATE \"C\" LIMIT %s OFFSET %s"
    )
    return sql, [*head, *where_params, plan.limit, plan.offset]


def _match_sql(condition: MatchCondition) -> Query:
    """A prefix or suffix condition; the leading literal labels of a prefix use the index."""
    path = condition.path
    size = len(path)
    if not size:
        return "TRUE", []
    parts: list[str] = []
    params: list[Any] = []
    if condition.match_type == "prefix":
        lead = 0
        while lead < size and path[lead] != WILDCARD:
            lead += 1
        text = _like_escape(namespace_text(path[:lead]))
        if lead == size:
            return "(prefix = %s OR prefix LIKE %s)", [
                namespace_text(path),
                text + ".%",
            ]
        if lead:
            parts.append("prefix LIKE %s")
            params.append(text + ".%")
        parts.append(f"cardinality({_LABELS}) >= {size}")
        for i in range(lead, size):
            if path[i] != WILDCARD:
                parts.append(f"({_LABELS})[{i + 1}] = %s")
                params.append(path[i])
    else:
        parts.append(f"cardinality({_LABELS}) >= {size}")
        for i, label in enumerate(path):
            if label != WILDCARD:
                back = size - 1 - i
                parts.append(f"({_LABELS})[cardinality({_LABELS}) - {back}] = %s")
                params.append(label)
    return "(" + " AND ".join(parts) + ")", params


# -- rows ----------------------------------------------------------------------------------


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def item_from_row(
    namespace: tuple[str, ...],
    key: str,
    row: tuple[Any, ...],
    load: Loader = SERDE.decode,
) -> Item:
    """From a ``get_query`` row (``prefix, key, value, created_at, updated_at, ...``)."""
    return Item(
        value=load(row[2]),
        key=key,
        namespace=namespace,
        created_at=_utc(row[3]),
        updated_at=_utc(row[4]),
    )


def search_item_from_row(
    row: tuple[Any, ...], load: Loader = SERDE.decode
) -> SearchItem:
    """From a ``search_query`` row."""
    return SearchItem(
        namespace_from_text(row[0]),
        row[1],
        load(row[2]),
        _utc(row[3]),
        _utc(row[4]),
        row[6],
    )

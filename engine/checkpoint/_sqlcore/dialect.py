"""The SQL both backends run, written once, and what each dialect changes in it.

Statements are templates with ``%s`` placeholders (psycopg's style; SQLite's
``?`` is substituted) and fragments a dialect supplies: how a list of key
tuples is passed as one parameter (``{keys3}``/``{keys4}``), how payload columns
are read, and the JSON tests metadata filters are made of (see ``filters``).
Table layout (see the backends' ``_sql.py`` migrations):

* ``engine_checkpoints``: one row per checkpoint; the checkpoint dict without
  its values, id and creation time, its versions packed
  (``_blobs.pack_structure``), and the metadata, both as ``(type, payload)``
  from the serializer; the creation time in ``ts`` (on Postgres, since v2,
  ``created_at``: see the ``ts`` fragment); and, in ``parent_writes``, the
  regular writes of its parent's tasks that were saved with it (``put_step``),
  packed by ``_writes.pack_task_writes``.
* ``engine_checkpoint_blobs``: one row per (thread, namespace, channel,
  version): a full value, an append delta on a base version, or ``empty``.
* ``engine_checkpoint_writes``: pending writes, per (checkpoint, task): its
  regular writes in one row at index 0 (``_writes.pack_writes``), kept from the
  first save; each special write in a row at its fixed negative index, replaced
  by a later save. Rows stored one per write (before packing) read the same.
* ``engine_checkpoint_ttl``: per-thread expiry deadlines.

Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

__all__ = ("Batch", "Op", "Rows", "SqlDialect", "Stmt", "is_last")

T = TypeVar("T")

Rows = list[tuple[Any, ...]]
"""What a driver sends back for a ``fetch`` statement."""


@dataclass(frozen=True, slots=True)
class Stmt:
    """One statement an operation wants run, and whether it wants the rows back."""

    sql: str
    params: Sequence[Any] = ()
    fetch: bool = False
    """Send back every row (a list of tuples); otherwise ``None`` is sent back."""
    many: Sequence[Sequence[Any]] | None = None
    """Run ``sql`` once per parameter tuple (``executemany``); ``params`` unused."""
    last: bool = False
    """The operation yields nothing after this statement (or the batch it ends),
    whatever its rows: a driver may commit in the same round trip (Postgres)."""


def is_last(stmt: Stmt | Batch) -> bool:
    """Whether ``stmt`` (a statement or a batch) is its operation's last."""
    if isinstance(stmt, Stmt):
        return stmt.last
    return bool(stmt) and stmt[-1].last


Batch = tuple[Stmt, ...]
"""Statements that do not depend on each other's rows; a driver may send them in
one round trip (Postgres pipeline mode). Their results come back as a list."""

Op = Generator[Stmt | Batch, Any, T]
"""A saver operation: yields statements (or batches), receives their rows,
returns a result.

Drivers run one operation in one transaction. Everything an operation computes
before its first ``yield`` (serializing values) runs before the transaction
opens, so locks are held only for the statements themselves.
"""


_COLS_BLOB = (
    "thread_id, checkpoint_ns, channel, version, kind, type, blob, base_version, "
    "delta_start, chain_len, chain_bytes, root_bytes"
)
_COLS_CHECKPOINT = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "checkpoint_type, checkpoint, metadata_type, metadata, ts, parent_writes"
)
CHILD_WINDOW = 8
"""How many checkpoints after a checkpoint are searched for the child row that
keeps its writes: the child was the very next one when stored; the window
tolerates a few inserted in between later (ids from a skewed clock)."""

_SELECT_CHECKPOINT = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, {payloads}, {ts}"
)
# What a history needs of a checkpoint: ids, metadata and creation time. The
# checkpoint payload comes along only for rows stored before the ``ts`` column.
_SELECT_SUMMARY = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "{metadata_type}, {metadata_payload}, {ts}, "
    "CASE WHEN {ts} IS NULL THEN {checkpoint_type} END, "
    "CASE WHEN {ts} IS NULL THEN {checkpoint_payload} END"
)
_NOT_EXPIRED = (
    "NOT EXISTS (SELECT 1 FROM engine_checkpoint_ttl x "
    "WHERE x.thread_id = c.thread_id AND x.expires_at <= %s)"
)
# For one named thread: a condition on parameters only, checked once, so the
# planner still walks the primary key backwards and stops at the first row.
_THREAD_NOT_EXPIRED = (
    "NOT EXISTS (SELECT 1 FROM engine_checkpoint_ttl x "
    "WHERE x.thread_id = %s AND x.expires_at <= %s)"
)

_TEMPLATES: dict[str, str] = {
    "head": (
        "SELECT checkpoint_id FROM engine_checkpoints "
        "WHERE thread_id = %s AND checkpoint_ns = %s "
        "ORDER BY checkpoint_id DESC LIMIT 1"
    ),
    "blob_bases": (
        "SELECT thread_id, checkpoint_ns, channel, version, kind, chain_len, "
        "chain_bytes, root_bytes "
        "FROM engine_checkpoint_blobs "
        "WHERE (thread_id, checkpoint_ns, channel, version) IN ({keys4})"
    ),
    "insert_blob": (
        f"INSERT INTO engine_checkpoint_blobs ({_COLS_BLOB}) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING"
    ),
    "insert_checkpoint": (
        f"INSERT INTO engine_checkpoints ({_COLS_CHECKPOINT}) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
        "parent_checkpoint_id = excluded.parent_checkpoint_id, "
        "checkpoint_type = excluded.checkpoint_type, checkpoint = excluded.checkpoint, "
        "metadata_type = excluded.metadata_type, metadata = excluded.metadata, "
        "ts = excluded.ts, parent_writes = excluded.parent_writes"
    ),
    "insert_write_keep": (
        "INSERT INTO engine_checkpoint_writes (thread_id, checkpoint_ns, "
        "checkpoint_id, task_id, idx, channel, type, blob, task_path) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING"
    ),
    "insert_write_replace": (
        "INSERT INTO engine_checkpoint_writes (thread_id, checkpoint_ns, "
        "checkpoint_id, task_id, idx, channel, type, blob, task_path) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) "
        "DO UPDATE SET channel = excluded.channel, type = excluded.type, "
        "blob = excluded.blob, task_path = excluded.task_path"
    ),
    "upsert_ttl": (
        "INSERT INTO engine_checkpoint_ttl (thread_id, expires_at) VALUES (%s, %s) "
        "ON CONFLICT (thread_id) DO UPDATE SET expires_at = excluded.expires_at"
    ),
    "delete_ttl": "DELETE FROM engine_checkpoint_ttl WHERE thread_id = %s",
    "get_latest": (
        f"SELECT {_SELECT_CHECKPOINT} FROM engine_checkpoints c "
        f"WHERE thread_id = %s AND checkpoint_ns = %s AND {_THREAD_NOT_EXPIRED} "
        "ORDER BY checkpoint_id DESC LIMIT 1"
    ),
    "get_by_id": (
        f"SELECT {_SELECT_CHECKPOINT} FROM engine_checkpoints c "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s "
        f"AND {_THREAD_NOT_EXPIRED}"
    ),
    "list_select": f"SELECT {_SELECT_CHECKPOINT} FROM engine_checkpoints c",
    "summary_select": f"SELECT {_SELECT_SUMMARY} FROM engine_checkpoints c",
    "not_expired": _NOT_EXPIRED,
    "thread_not_expired": _THREAD_NOT_EXPIRED,
    # The wanted versions and, recursively, the bases of those that are deltas;
    # keys first (small rows), payloads joined once at the end.
    "blobs_for_keys": (
        "WITH RECURSIVE wanted (thread_id, checkpoint_ns, channel, version) AS "
        "({keys4}), "
        "chain (thread_id, checkpoint_ns, channel, version, base_version) AS ("
        "SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.base_version "
        "FROM engine_checkpoint_blobs b JOIN wanted w "
        "ON b.thread_id = w.thread_id AND b.checkpoint_ns = w.checkpoint_ns "
        "AND b.channel = w.channel AND b.version = w.version "
        "UNION "
        "SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.base_version "
        "FROM engine_checkpoint_blobs b JOIN chain k "
        "ON b.thread_id = k.thread_id AND b.checkpoint_ns = k.checkpoint_ns "
        "AND b.channel = k.channel AND b.version = k.base_version) "
        f"SELECT {_COLS_BLOB} FROM engine_checkpoint_blobs "
        "WHERE (thread_id, checkpoint_ns, channel, version) IN "
        "(SELECT thread_id, checkpoint_ns, channel, version FROM chain)"
    ),
    "writes_for_checkpoints": (
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, channel, type, blob, "
        "task_path, idx FROM engine_checkpoint_writes "
        "WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ({keys3})"
    ),
    # A checkpoint's writes kept in its child's row (``put_step``): that child was
    # the next checkpoint of the namespace when it was stored (its put was fenced
    # on it), so it is found among the next few; at most one child carries them.
    # One row per key, NULL when there are none (filtering them here would run
    # the lookup twice).
    "child_writes_for_checkpoints": (
        "WITH k (thread_id, checkpoint_ns, checkpoint_id) AS ({keys3}) "
        "SELECT k.thread_id, k.checkpoint_ns, k.checkpoint_id, "
        "(SELECT s.parent_writes FROM (SELECT c.checkpoint_id, "
        "c.parent_checkpoint_id, c.parent_writes FROM engine_checkpoints c "
        "WHERE c.thread_id = k.thread_id AND c.checkpoint_ns = k.checkpoint_ns "
        "AND c.checkpoint_id > k.checkpoint_id ORDER BY c.checkpoint_id "
        f"LIMIT {CHILD_WINDOW}) s "
        "WHERE s.parent_checkpoint_id = k.checkpoint_id "
        "AND s.parent_writes IS NOT NULL ORDER BY s.checkpoint_id LIMIT 1) "
        "FROM k"
    ),
    "thread_exists": ("SELECT 1 FROM engine_checkpoints WHERE thread_id = %s LIMIT 1"),
    # Checkpoints with their metadata, for a condition appended by the caller
    # (``delete_for_runs``: the rows whose metadata may name a run).
    "metadata_select": (
        "SELECT thread_id, checkpoint_ns, checkpoint_id, {metadata_type}, "
        "{metadata_payload} FROM engine_checkpoints c"
    ),
    "copy_checkpoints": (
        f"INSERT INTO engine_checkpoints ({_COLS_CHECKPOINT}) "
        "SELECT %s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
        "checkpoint_type, checkpoint, metadata_type, metadata, ts, parent_writes "
        "FROM engine_checkpoints WHERE thread_id = %s"
    ),
    "copy_blobs": (
        f"INSERT INTO engine_checkpoint_blobs ({_COLS_BLOB}) "
        "SELECT %s, checkpoint_ns, channel, version, kind, type, blob, base_version, "
        "delta_start, chain_len, chain_bytes, root_bytes "
        "FROM engine_checkpoint_blobs WHERE thread_id = %s"
    ),
    "copy_writes": (
        "INSERT INTO engine_checkpoint_writes (thread_id, checkpoint_ns, "
        "checkpoint_id, task_id, idx, channel, type, blob, task_path) "
        "SELECT %s, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, "
        "task_path FROM engine_checkpoint_writes WHERE thread_id = %s"
    ),
    "delete_checkpoints": "DELETE FROM engine_checkpoints WHERE thread_id = %s",
    "delete_blobs": "DELETE FROM engine_checkpoint_blobs WHERE thread_id = %s",
    "delete_writes": "DELETE FROM engine_checkpoint_writes WHERE thread_id = %s",
    "thread_tree": (
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id "
        "FROM engine_checkpoints WHERE thread_id = %s"
    ),
    "thread_parent_writes": (
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, parent_writes "
        "FROM engine_checkpoints WHERE thread_id = %s AND parent_writes IS NOT NULL"
    ),
    "thread_write_channels": (
        "SELECT checkpoint_ns, checkpoint_id, task_id, channel "
        "FROM engine_checkpoint_writes WHERE thread_id = %s"
    ),
    "thread_checkpoints": (
        "SELECT checkpoint_ns, {payloads} FROM engine_checkpoints WHERE thread_id = %s"
    ),
    "thread_blob_keys": (
        "SELECT checkpoint_ns, channel, version, kind, base_version "
        "FROM engine_checkpoint_blobs WHERE thread_id = %s"
    ),
    "delete_checkpoint": (
        "DELETE FROM engine_checkpoints "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
    ),
    "delete_checkpoint_writes": (
        "DELETE FROM engine_checkpoint_writes "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
    ),
    "reparent": (  # the writes it kept belonged to the old parent
        "UPDATE engine_checkpoints SET parent_checkpoint_id = %s, parent_writes = NULL "
        "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
    ),
    "delete_blob": (
        "DELETE FROM engine_checkpoint_blobs WHERE thread_id = %s "
        "AND checkpoint_ns = %s AND channel = %s AND version = %s"
    ),
    "expired_threads": (
        "SELECT thread_id FROM engine_checkpoint_ttl WHERE expires_at <= %s "
        "ORDER BY thread_id"
    ),
    "stored_bytes": (
        "SELECT "
        "(SELECT COALESCE(SUM({length}(checkpoint) + {length}(metadata) "
        "+ COALESCE({length}(ts), 0) + COALESCE({length}(parent_writes), 0)), 0) "
        "FROM engine_checkpoints WHERE thread_id = %s), "
        "(SELECT COALESCE(SUM({length}(blob)), 0) "
        "FROM engine_checkpoint_blobs WHERE thread_id = %s), "
        "(SELECT COALESCE(SUM({length}(blob)), 0) "
        "FROM engine_checkpoint_writes WHERE thread_id = %s)"
    ),
}


@dataclass(frozen=True)
class SqlDialect:
    """A backend's SQL: the shared templates rendered with its fragments.

    Subclasses set the class attributes below and may override the hooks.
    """

    placeholder: str = "%s"
    """``%s`` (psycopg) or ``?`` (sqlite3)."""
    keys3: str = ""
    """A query yielding rows of 3 text columns from one parameter."""
    keys4: str = ""
    """A query yielding rows of 4 text columns from one parameter."""
    length: str = "length"
    """The byte-length function for payload columns."""
    checkpoint_payload: str = "checkpoint"
    """An expression giving a checkpoint row's checkpoint payload as bytes."""
    metadata_payload: str = "metadata"
    """An expression giving a checkpoint row's metadata payload as bytes."""
    checkpoint_type: str = "checkpoint_type"
    """An expression giving a checkpoint row's checkpoint type tag."""
    metadata_type: str = "metadata_type"
    """An expression giving a checkpoint row's metadata type tag."""
    ts: str = "ts"
    """An expression giving a checkpoint row's creation time as ISO 8601 text
    (NULL for rows that keep it in their checkpoint payload)."""
    lock_thread: str | None = None
    """A statement taking (thread_id,) that serializes, until the transaction ends,
    every writer and every retention operation of that thread; None when the
    transaction itself already does (SQLite's ``BEGIN IMMEDIATE``)."""
    expect_head: str | None = None
    """A statement taking (thread_id, checkpoint_ns, expected_head) that takes the
    thread lock and fails the transaction unless the newest checkpoint is the
    expected one (the driver turns that failure into CheckpointConflictError).
    None: the head is fetched and compared in Python."""
    drain: str | None = None
    """A statement (no parameters) whose rows a write fetches, after sending the
    rows of large values, so that a pipelining driver lets go of them before more
    are serialized (see ``saves.FLUSH_BYTES``); None where the driver sends each
    statement at once (SQLite)."""
    pipelines: bool = False
    """Whether the driver sends a batch's statements together, in one round trip
    (Postgres): a read that may be needed costs less sent along than asked for
    later. False where each statement runs when sent (SQLite)."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    """Statements this dialect writes differently, by template name."""
    sql: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        rendered: dict[str, str] = {}
        for name, template in {**_TEMPLATES, **self.overrides}.items():
            text = template.replace("{keys3}", self.keys3)
            text = text.replace("{keys4}", self.keys4)
            text = text.replace("{length}", self.length)
            text = text.replace(
                "{payloads}",
                f"{self.checkpoint_type}, {self.checkpoint_payload}, "
                f"{self.metadata_type}, {self.metadata_payload}",
            )
            text = text.replace("{checkpoint_payload}", self.checkpoint_payload)
            text = text.replace("{metadata_payload}", self.metadata_payload)
            text = text.replace("{checkpoint_type}", self.checkpoint_type)
            text = text.replace("{metadata_type}", self.metadata_type)
            text = text.replace("{ts}", self.ts)
            if self.placeholder != "%s":
                text = text.replace("%s", self.placeholder)
            rendered[name] = text
        object.__setattr__(self, "sql", rendered)

    def __getitem__(self, name: str) -> str:
        return self.sql[name]

    # -- hooks ---------------------------------------------------------------------

    def keys_param(
        self, keys: Sequence[tuple[str, ...]], width: int
    ) -> tuple[Any, ...]:
        """Parameters for a ``{keys3}``/``{keys4}`` fragment holding ``keys``."""
        raise NotImplementedError

    def timestamp(self, moment: datetime) -> Any:
        """A parameter for a stored deadline (``expires_at``)."""
        return moment

    def checkpoint_params(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """Parameters of ``insert_checkpoint`` for a row in ``_COLS_CHECKPOINT`` order."""
        return row

    def blob_params(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """Parameters of ``insert_blob`` for a row in ``_COLS_BLOB`` order."""
        return row

    def inserts(self, name: str, rows: Sequence[Sequence[Any]]) -> Iterator[Stmt]:
        """The statements that insert ``rows`` (parameter tuples of the
        statement ``name``), in order: here one execution per row."""
        yield Stmt(self[name], many=rows)

    # -- metadata filters (see ``filters``): JSON tests on ``c.metadata`` --------------

    def json_inspectable(self) -> str:
        """A condition under which the row's metadata can be inspected as JSON;
        rows where it is false pass the SQL filter (and are checked in Python)."""
        raise NotImplementedError

    def json_path(self, path: Sequence[str | int]) -> Any | None:
        """The parameter addressing ``path`` inside the metadata; None when this
        dialect cannot express it (the condition is then left to Python)."""
        raise NotImplementedError

    def json_test(
        self, test: str, path: Any, tag_path: Any, value: Any = None
    ) -> tuple[str, tuple[Any, ...]]:
        """One test on the metadata value at ``path`` (a ``json_path``), as SQL
        and its parameters. ``tag_path`` addresses that value's ``"__t"`` key.

        Tests: ``absent_or_null``, ``null``, ``string`` (equal to ``value``),
        ``number`` (numerically equal), ``bool`` (``value`` is True or False),
        ``object`` (a plain object with ``value`` keys), ``array`` (of length
        ``value``), ``tagged`` (a serializer-tagged object).
        """
        raise NotImplementedError

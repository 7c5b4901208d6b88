"""setup(): numbered migrations, recorded, idempotent, safe from several processes."""

from __future__ import annotations

import multiprocessing
import random
import sqlite3

import orjson
import psycopg
import pytest

from engine.checkpoint._blobs import unpack_structure
from engine.checkpoint._pending_writes import (
    WRITES_CHANNEL,
    WRITES_TAG,
    unpack_task_writes,
    unpack_writes,
)
from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.postgres import migrate as pg_migrate
from engine.checkpoint.postgres._sql import DIALECT as PG_DIALECT
from engine.checkpoint.postgres._sql import MIGRATIONS as PG_MIGRATIONS
from engine.checkpoint.sqlite import migrate as sqlite_migrate
from engine.checkpoint.sqlite._sql import MIGRATIONS as SQLITE_MIGRATIONS
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
    put_first,
    save_chain,
    save_steps,
)
from tests._support.savers import SaverSpec
from tests._support.workers import run_setup


@pytest.fixture
def sql_spec(saver_spec: SaverSpec) -> SaverSpec:
    if not saver_spec.shared:
        pytest.skip("the memory saver has no schema")
    return saver_spec


def _versions(spec: SaverSpec) -> list[int]:
    rows = spec.execute("SELECT v FROM engine_checkpoint_migrations ORDER BY v")
    return [row[0] for row in rows]


def _migrate(spec: SaverSpec) -> list[int]:
    if spec.kind == "sqlite":
        conn = sqlite3.connect(spec.target, isolation_level=None)
        try:
            return sqlite_migrate(conn)
        finally:
            conn.close()
    with psycopg.connect(spec.target, autocommit=True) as pg_conn:
        return pg_migrate(pg_conn)


def _all_versions(spec: SaverSpec) -> list[int]:
    migrations = SQLITE_MIGRATIONS if spec.kind == "sqlite" else PG_MIGRATIONS
    return list(range(len(migrations)))


def test_setup_records_every_version(sql_spec: SaverSpec) -> None:
    with sql_spec.open() as saver:
        save_chain(saver, "t1", 2)

    assert _versions(sql_spec) == _all_versions(sql_spec)


def test_setup_twice_is_a_no_op(sql_spec: SaverSpec) -> None:
    assert _migrate(sql_spec) == _all_versions(sql_spec)
    with sql_spec.open() as saver:
        save_chain(saver, "t1", 2)

    assert _migrate(sql_spec) == []
    with sql_spec.open() as again:  # a second process starting up
        assert len(list(again.list(make_config("t1")))) == 2
    assert _versions(sql_spec) == _all_versions(sql_spec)


@pytest.mark.slow
def test_concurrent_setup_from_processes(sql_spec: SaverSpec) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    processes = [
        ctx.Process(target=run_setup, args=(sql_spec, barrier)) for _ in range(3)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)

    assert [p.exitcode for p in processes] == [0, 0, 0]
    assert _versions(sql_spec) == _all_versions(sql_spec)
    with sql_spec.open(setup=False) as saver:
        save_chain(saver, "t1", 2)
        assert len(list(saver.list(make_config("t1")))) == 2


def test_using_a_postgres_saver_before_setup_says_to_call_setup(
    sql_spec: SaverSpec,
) -> None:
    if sql_spec.kind != "postgres":
        pytest.skip("SQLite savers set up on first use (test_setup_on_first_use.py)")
    with sql_spec.open(setup=False) as saver:
        with pytest.raises(Exception, match=r"call the saver's setup\(\)"):
            saver.get_tuple(make_config("t1"))
        with pytest.raises(Exception, match=r"call the saver's setup\(\)"):
            save_chain(saver, "t1", 1)


_OLD_INDEXES = (
    "CREATE INDEX engine_checkpoints_thread_idx "
    "ON engine_checkpoints (thread_id, checkpoint_id)",
    "CREATE INDEX engine_checkpoints_id_idx ON engine_checkpoints (checkpoint_id)",
)


_LZ4_COLUMNS = (
    ("engine_checkpoint_blobs", "blob"),
    ("engine_checkpoint_writes", "blob"),
    ("engine_checkpoints", "parent_writes"),
)


def _downgrade_before_lz4(spec: SaverSpec) -> None:
    """Undo Postgres v5 (new payloads compressed with LZ4); SQLite has none."""
    if spec.kind != "postgres":
        return
    for table, column in _LZ4_COLUMNS:
        spec.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION pglz")
    spec.execute("DELETE FROM engine_checkpoint_migrations WHERE v = 5")


def _downgrade_before_leases(spec: SaverSpec) -> int:
    """Undo Postgres v4 / SQLite v3 (thread leases), and what came after; the
    version undone."""
    _downgrade_before_lz4(spec)
    spec.execute("DROP TABLE engine_thread_leases")
    if spec.kind == "postgres":
        spec.execute("DROP FUNCTION engine_thread_lease_check(TEXT, TEXT, TEXT)")
    leases = 4 if spec.kind == "postgres" else 3
    spec.execute("DELETE FROM engine_checkpoint_migrations WHERE v = %s", (leases,))
    return leases


def _downgrade_before_parent_writes(spec: SaverSpec) -> None:
    """Put the rows back in the layout before Postgres v3 / SQLite v2: writes
    kept in a child's row become rows of engine_checkpoint_writes, the column
    goes, the two secondary checkpoint indexes come back."""
    leases = _downgrade_before_leases(spec)
    for thread_id, ns, parent_id, payload in spec.execute(
        "SELECT thread_id, checkpoint_ns, parent_checkpoint_id, parent_writes "
        "FROM engine_checkpoints WHERE parent_writes IS NOT NULL"
    ):
        for task_id, path, entry in unpack_task_writes(bytes(payload)):
            spec.execute(
                "INSERT INTO engine_checkpoint_writes (thread_id, checkpoint_ns, "
                "checkpoint_id, task_id, idx, channel, type, blob, task_path) "
                "VALUES (%s, %s, %s, %s, 0, %s, %s, %s, %s)",
                (thread_id, ns, parent_id, task_id, WRITES_CHANNEL, WRITES_TAG)
                + (entry, path),
            )
    spec.execute("ALTER TABLE engine_checkpoints DROP COLUMN parent_writes")
    for statement in _OLD_INDEXES:
        spec.execute(statement)
    spec.execute("DELETE FROM engine_checkpoint_migrations WHERE v = %s", (leases - 1,))


def _downgrade_to_v1(spec: SaverSpec) -> None:
    """Put the rows back in v1's layout, as a database written before v2 has
    them: checkpoint structures stored whole (not packed), one row per pending
    write, and on Postgres the creation time as text and every type, kind and
    chain column filled in (then v2's schema changes undone)."""
    _downgrade_before_parent_writes(spec)
    pg = spec.kind == "postgres"
    text = "checkpoint::text" if pg else "CAST(checkpoint AS TEXT)"
    cast = "%s::json" if pg else "%s"
    for thread_id, ns, checkpoint_id, payload in spec.execute(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id, {text} "
        "FROM engine_checkpoints"
    ):
        whole = unpack_structure(orjson.loads(payload))
        encoded = orjson.dumps(whole)
        spec.execute(
            f"UPDATE engine_checkpoints SET checkpoint = {cast} WHERE thread_id = %s "
            "AND checkpoint_ns = %s AND checkpoint_id = %s",
            (encoded.decode() if pg else encoded, thread_id, ns, checkpoint_id),
        )
    packed = spec.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, blob, task_path "
        "FROM engine_checkpoint_writes WHERE type = %s AND channel = %s",
        (WRITES_TAG, WRITES_CHANNEL),
    )
    for thread_id, ns, checkpoint_id, task_id, blob, path in packed:
        key = (thread_id, ns, checkpoint_id, task_id)
        spec.execute(
            "DELETE FROM engine_checkpoint_writes WHERE thread_id = %s "
            "AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s "
            "AND idx = 0",
            key,
        )
        for idx, (channel, tag, payload) in enumerate(unpack_writes(bytes(blob))):
            spec.execute(
                "INSERT INTO engine_checkpoint_writes (thread_id, checkpoint_ns, "
                "checkpoint_id, task_id, idx, channel, type, blob, task_path) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (*key, idx, channel, tag, payload, path),
            )
    if pg:
        spec.execute(
            f"UPDATE engine_checkpoints SET ts = {PG_DIALECT.ts}, created_at = NULL, "
            f"checkpoint_type = {PG_DIALECT.checkpoint_type}, "
            f"metadata_type = {PG_DIALECT.metadata_type}"
        )
        spec.execute(
            "ALTER TABLE engine_checkpoints DROP COLUMN created_at, "
            "ALTER COLUMN checkpoint_type SET NOT NULL, "
            "ALTER COLUMN metadata_type SET NOT NULL"
        )
        spec.execute(
            "UPDATE engine_checkpoint_blobs x SET "
            "kind = COALESCE(kind, CASE WHEN base_version IS NULL THEN 'full' "
            "ELSE 'delta' END), type = COALESCE(type, 'json'), "
            "chain_len = COALESCE(chain_len, 0), "
            "chain_bytes = COALESCE(chain_bytes, 0), "
            "root_bytes = COALESCE(root_bytes, octet_length(blob))"
        )
        spec.execute(
            "ALTER TABLE engine_checkpoint_blobs "
            "ALTER COLUMN kind SET NOT NULL, ALTER COLUMN type SET NOT NULL, "
            "ALTER COLUMN chain_len SET NOT NULL, ALTER COLUMN chain_len SET DEFAULT 0, "
            "ALTER COLUMN chain_bytes SET NOT NULL, "
            "ALTER COLUMN chain_bytes SET DEFAULT 0, "
            "ALTER COLUMN root_bytes SET NOT NULL, ALTER COLUMN root_bytes SET DEFAULT 0"
        )
    spec.execute("DELETE FROM engine_checkpoint_migrations WHERE v >= 2")


def _downgrade_to_v0(spec: SaverSpec) -> None:
    """Put the rows back in v0's layout (the checkpoint's id and ts inside its
    JSON, no ts column), as a database written before v1 has them."""
    _downgrade_to_v1(spec)
    text = "checkpoint::text" if spec.kind == "postgres" else "CAST(checkpoint AS TEXT)"
    cast = "%s::json" if spec.kind == "postgres" else "%s"
    rows = spec.execute(f"SELECT checkpoint_id, ts, {text} FROM engine_checkpoints")
    for checkpoint_id, ts, payload in rows:
        stored = orjson.loads(payload)
        whole = {"v": stored.pop("v"), "id": checkpoint_id, "ts": ts, **stored}
        spec.execute(
            f"UPDATE engine_checkpoints SET checkpoint = {cast} "
            "WHERE checkpoint_id = %s",
            (
                orjson.dumps(whole).decode()
                if spec.kind == "postgres"
                else orjson.dumps(whole),
                checkpoint_id,
            ),
        )
    spec.execute("ALTER TABLE engine_checkpoints DROP COLUMN ts")
    spec.execute("DELETE FROM engine_checkpoint_migrations WHERE v >= 1")


def test_rows_written_before_the_ts_column_read_the_same(sql_spec: SaverSpec) -> None:
    with sql_spec.open() as saver:
        save_chain(saver, "t1", 3)
        tuples = list(saver.list(make_config("t1")))
        summaries = list(saver.list_summaries(make_config("t1")))
    _downgrade_to_v0(sql_spec)

    with sql_spec.open() as upgraded:  # setup() applies v1 again
        assert list(upgraded.list(make_config("t1"))) == tuples
        assert list(upgraded.list_summaries(make_config("t1"))) == summaries
        assert upgraded.get_tuple(make_config("t1")) == tuples[0]
        save_chain(upgraded, "t2", 2)  # new rows beside old ones
        assert len(list(upgraded.list_summaries(None))) == 5
    assert _versions(sql_spec) == _all_versions(sql_spec)
    assert [s.created_at for s in summaries] == [t.checkpoint["ts"] for t in tuples]


def _history(saver: BaseCheckpointSaver) -> list[tuple[str, str, str]]:
    """Two threads with values, list deltas, a fork, writes of every kind."""
    checkpoint = make_checkpoint({"n": 0, "log": ["a"], "flag": None})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    first = config
    for step in range(3):
        saver.put_writes(
            config,
            [("n", step), ("__error__", "boom"), ("log", [step]), ("x", b"\x00")],
            f"task-{step}",
            "~pull, a",
        )
        saver.put_writes(config, [("__interrupt__", ["ask"])], "task-i", "~pull, b")
        checkpoint, changed = next_checkpoint(
            checkpoint, {"n": step + 1}, append={"log": [step]}, step=step
        )
        config = saver.put(config, checkpoint, make_metadata(step, "loop"), changed)
    fork, changed = next_checkpoint(checkpoint, {"n": 99}, step=9)
    saver.put(first, fork, make_metadata(9, "fork"), changed)
    save_chain(saver, "t2", 3, checkpoint_ns="sub:1")
    return [("t1", "", first["configurable"]["checkpoint_id"])]


def test_rows_written_before_v2_read_the_same(sql_spec: SaverSpec) -> None:
    """v2 packs structures and a task's writes and (Postgres) moves the creation
    time and usual column values into smaller forms: v1 rows still read alike."""
    with sql_spec.open() as saver:
        ((thread_id, ns, first_id),) = _history(saver)
        everything = list(saver.list(None))
        summaries = list(saver.list_summaries(None))
        latest = saver.get_tuple(make_config("t1"))
        sizes = {t: saver.stored_bytes(t) for t in ("t1", "t2")}
    _downgrade_to_v1(sql_spec)
    assert sql_spec.execute(
        "SELECT count(*) FROM engine_checkpoint_writes WHERE type = %s",
        (WRITES_TAG,),
    ) == [(0,)]

    with sql_spec.open() as upgraded:  # setup() applies v2 again
        assert list(upgraded.list(None)) == everything
        assert list(upgraded.list_summaries(None)) == summaries
        assert upgraded.get_tuple(make_config("t1")) == latest
        # regular writes already stored one per row are kept as a whole
        first = make_config(thread_id, first_id, ns)
        upgraded.put_writes(first, [("n", -5)], "task-0", "~pull, a")
        assert upgraded.get_tuple(first) == everything[-1]
        # retention sees the old rows too
        upgraded.copy_thread("t1", "t1-copy")
        assert [t.checkpoint for t in upgraded.list(make_config("t1-copy"))] == [
            t.checkpoint for t in upgraded.list(make_config("t1"))
        ]
        upgraded.prune(["t1"])
        kept = list(upgraded.list(make_config("t1")))
        assert {t.checkpoint["id"] for t in kept} <= {
            t.checkpoint["id"] for t in everything
        }
        for t in kept:
            assert t in everything
        save_chain(upgraded, "t3", 2)  # new rows beside old ones
        assert upgraded.stored_bytes("t2") > sizes["t2"]  # v1's layout is bigger
    assert _versions(sql_spec) == _all_versions(sql_spec)


def _secondary_checkpoint_indexes(spec: SaverSpec) -> set[str]:
    if spec.kind == "sqlite":
        rows = spec.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'engine_checkpoints' AND sql IS NOT NULL"
        )
    else:
        rows = spec.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'engine_checkpoints' "
            "AND indexname <> 'engine_checkpoints_pkey'"
        )
    return {row[0] for row in rows}


def test_rows_written_before_parent_writes_read_the_same(sql_spec: SaverSpec) -> None:
    """Postgres v3 / SQLite v2 keep a step's writes in the next checkpoint's row
    and drop the (thread_id, checkpoint_id) and (checkpoint_id) indexes: a
    database in the layout before is upgraded, and every kind of read (one
    checkpoint, one namespace, all namespaces of a thread, all threads, retention)
    gives what it gave before."""
    with sql_spec.open() as saver:
        _history(saver)
        ids = save_steps(saver, "t3", 4)
        assert sql_spec.execute(
            "SELECT count(*) FROM engine_checkpoints WHERE parent_writes IS NOT NULL"
        ) == [(4,)]
        by_thread = list(saver.list({"configurable": {"thread_id": "t2"}}))
        everything = list(saver.list(None))
        page = list(saver.list(None, before=everything[2].config, limit=3))
        sizes = {t: saver.stored_bytes(t) for t in ("t1", "t2")}
    _downgrade_before_parent_writes(sql_spec)
    assert len(_secondary_checkpoint_indexes(sql_spec)) == 2
    assert sql_spec.execute(
        "SELECT count(*) FROM engine_checkpoint_writes WHERE thread_id = 't3'"
    ) == [(4,)]

    with sql_spec.open() as upgraded:
        assert _secondary_checkpoint_indexes(sql_spec) == set()
        assert list(upgraded.list({"configurable": {"thread_id": "t2"}})) == by_thread
        assert list(upgraded.list(None)) == everything
        assert list(upgraded.list(None, before=everything[2].config, limit=3)) == page
        # (t3's count differs: a writes row's task id and path are keys, not payload)
        assert {t: upgraded.stored_bytes(t) for t in ("t1", "t2")} == sizes
        # new steps beside the old rows keep their writes in row again
        config = make_config("t3", ids[-1])
        latest = upgraded.get_tuple(config)
        assert latest is not None
        second, changed = next_checkpoint(latest.checkpoint, {"n": 99}, step=9)
        upgraded.put_step(
            fenced(config, ids[-1]),
            [("task-9", "~pull, a", [("n", 99)])],
            second,
            make_metadata(9, "loop"),
            changed,
        )
        assert upgraded.get_tuple(config).pending_writes == [("task-9", "n", 99)]
    assert sql_spec.execute(
        "SELECT count(*) FROM engine_checkpoints WHERE parent_writes IS NOT NULL"
    ) == [(1,)]
    assert _versions(sql_spec) == _all_versions(sql_spec)


def test_postgres_keeps_values_and_writes_in_their_row(saver_spec: SaverSpec) -> None:
    """v3: values and writes are compressed in place up to a page (STORAGE MAIN),
    so a chain's full value does not go to the TOAST table; bigger ones still do."""
    if saver_spec.kind != "postgres":
        pytest.skip("a Postgres storage setting")
    with saver_spec.open() as saver:
        rng = random.Random(7)
        # ~10 KB that compresses to ~2.6 KB: over the 2 KB at which Postgres moves
        # a compressed value out of line by default, within a page
        words = " ".join(f"word{rng.randrange(97)}" for _ in range(1500))
        noise = rng.randbytes(40_000)  # does not shrink: too big to keep in place
        checkpoint = make_checkpoint({"doc": words, "raw": noise})
        saver.put(
            make_config("t1"),
            checkpoint,
            make_metadata(),
            checkpoint["channel_versions"],
        )
        assert saver.get_tuple(make_config("t1")).checkpoint["channel_values"] == {
            "doc": words,
            "raw": noise,
        }
    storage = saver_spec.execute(
        "SELECT a.attname, a.attstorage FROM pg_attribute a "
        "WHERE a.attrelid = 'engine_checkpoint_blobs'::regclass AND a.attnum > 0 "
        "AND NOT a.attisdropped AND a.attlen = -1"
    )
    assert {mode for _name, mode in storage} == {"m"}
    compressed = saver_spec.execute(
        "SELECT channel, pg_column_size(blob) < octet_length(blob) "
        "FROM engine_checkpoint_blobs ORDER BY channel"
    )
    assert compressed == [("doc", True), ("raw", False)]
    ((toast,),) = saver_spec.execute(
        "SELECT reltoastrelid::regclass::text FROM pg_class "
        "WHERE relname = 'engine_checkpoint_blobs'"
    )
    ((out_of_line,),) = saver_spec.execute(
        f"SELECT count(DISTINCT chunk_id) FROM {toast}"
    )
    assert out_of_line == 1  # "raw" only


def test_v5_compresses_new_large_payloads_with_lz4_where_the_server_has_it(
    sql_spec: SaverSpec,
) -> None:
    """Values stored before v5 keep pglz and read the same; values stored after
    are compressed with LZ4 when the server offers it (pglz otherwise)."""
    if sql_spec.kind != "postgres":
        pytest.skip("SQLite does not compress values")
    has_lz4 = sql_spec.execute(
        "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
        "WHERE name = 'default_toast_compression'"
    ) == [(True,)]
    big = " ".join(f"word{i % 97}" for i in range(30_000))  # ~200 KB, compressible
    with sql_spec.open():
        pass
    _downgrade_before_lz4(sql_spec)
    with sql_spec.open(setup=False) as before_v5:  # a database at v4
        before = put_first(before_v5, "old", {"big": big})[1]

    with sql_spec.open() as upgraded:  # setup() applies v5
        after = put_first(upgraded, "new", {"big": big})[1]
        assert _versions(sql_spec) == _all_versions(sql_spec)
        rows = dict(
            sql_spec.execute(
                "SELECT thread_id, pg_column_compression(blob) "
                "FROM engine_checkpoint_blobs WHERE channel = 'big'"
            )
        )
        assert rows == {"old": "pglz", "new": "lz4" if has_lz4 else "pglz"}
        for config in (before, after):
            saved = upgraded.get_tuple(config)
            assert saved is not None
            assert saved.checkpoint["channel_values"]["big"] == big

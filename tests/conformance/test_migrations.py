"""setup(): numbered migrations, recorded, idempotent, safe from several processes."""

from __future__ import annotations

import multiprocessing
import sqlite3

import orjson
import psycopg
import pytest

from engine.checkpoint.postgres import migrate as pg_migrate
from engine.checkpoint.postgres._sql import MIGRATIONS as PG_MIGRATIONS
from engine.checkpoint.sqlite import migrate as sqlite_migrate
from engine.checkpoint.sqlite._sql import MIGRATIONS as SQLITE_MIGRATIONS
from tests._support.builders import make_config, save_chain
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


def test_using_a_saver_before_setup_says_to_call_setup(sql_spec: SaverSpec) -> None:
    with sql_spec.open(setup=False) as saver:
        with pytest.raises(Exception, match=r"call the saver's setup\(\)"):
            saver.get_tuple(make_config("t1"))
        with pytest.raises(Exception, match=r"call the saver's setup\(\)"):
            save_chain(saver, "t1", 1)


def _downgrade_to_v0(spec: SaverSpec) -> None:
    """Put the rows back in v0's layout (the checkpoint's id and ts inside its
    JSON, no ts column), as a database written before v1 has them."""
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

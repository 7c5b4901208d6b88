"""Real services from the test settings: Postgres and Redis (skip locally, fail in CI)."""

from __future__ import annotations

import psycopg
import pytest
from channels_redis.core import RedisChannelLayer

from tests._support.postgres import fresh_database, pg_dsn
from tests._support.redis_service import redis_url


@pytest.mark.postgres
def test_postgres_answers_on_the_test_dsn() -> None:
    with psycopg.connect(pg_dsn()) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()

    assert version is not None
    assert int(version[0]) >= 130000


@pytest.mark.postgres
def test_fresh_database_is_created_empty_and_dropped() -> None:
    dsn = pg_dsn()

    with fresh_database(dsn) as fresh, psycopg.connect(fresh) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()

    assert name is not None
    assert name[0].startswith("test_")
    assert tables == (0,)
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (name[0],)
        ).fetchone()
    assert left is None


@pytest.mark.redis
async def test_redis_channel_layer_round_trip() -> None:
    layer = RedisChannelLayer(hosts=[redis_url()], prefix="studio-tests")
    channel = await layer.new_channel()
    await layer.group_add("thread-t1", channel)

    await layer.group_send("thread-t1", {"type": "run.event", "id": 1})
    message = await layer.receive(channel)

    assert message == {"type": "run.event", "id": 1}
    await layer.group_discard("thread-t1", channel)
    await layer.flush()
    await layer.close_pools()

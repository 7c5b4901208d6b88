"""Open SSE streams and many requests do not use up Postgres's connections.

Daphne runs each request on a thread of its own. With persistent connections
(``CONN_MAX_AGE``) every request left a connection behind until the garbage
collector found it, and every open SSE stream held one for its whole life: the
issue-12 benchmark (100 runs queued through the API, 100 SSE viewers) got
"FATAL: sorry, too many clients already" from a default Postgres
(``max_connections`` 100) and the API answered 500. In scale-out the studio now
uses Django's connection pool (``STUDIO_DB_POOL_SIZE`` per process), and a stream
gives its connection back after each read of the event table.

Here the pool is 3 connections a process: thirty streams wait for a queued run
while forty requests come, and all of them are served at once, not when the run
is over and the streams let go of their connections.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client
from psycopg.conninfo import conninfo_to_dict

from tests._support.postgres import pg_dsn
from tests._support.redis_service import redis_url
from tests._support.topology import Topology, topology

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.timeout(150),
]

STREAMS = 30
REQUESTS = 40
POOL = 3
HOLD = 8
"""Seconds the run waits in the queue (``after_seconds``) while streams and requests come."""


def test_thirty_streams_and_forty_requests_on_a_pool_of_three(tmp_path: Path) -> None:
    with topology(
        tmp_path,
        pg_dsn=pg_dsn(),
        redis_url=redis_url(),
        graphs={"topology": "tests.topology.graphs:build"},
        daphnes=1,
        workers=1,
        extra_env={"STUDIO_DB_POOL_SIZE": str(POOL)},
        tokens=("requester",),
    ) as deploy:
        try:
            seen = asyncio.run(
                asyncio.wait_for(follow(deploy, deploy.tokens["requester"]), 90)
            )
        except BaseException:
            print(deploy.diagnostics())
            raise

    # while the run waits in the queue, every stream is served and holds no connection
    assert max(seen["first part"]) < HOLD - 2, seen["first part"]
    assert seen["answers"] == [200] * REQUESTS
    assert seen["requests took"] < HOLD - 2, seen["requests took"]
    # one Daphne and one worker: their pools and the checkpointer's, not one a stream
    assert seen["connections"] < STREAMS, seen["connections"]
    ids = [[part.id for part in parts] for parts in seen["streams"]]
    assert ids[0][0] is None and len(ids[0]) > 5  # the metadata, then the events
    assert all(one == ids[0] for one in ids)


async def follow(deploy: Topology, token: str) -> dict[str, Any]:
    client = get_client(url=f"{deploy.urls[0]}/api", api_key=token)
    database = conninfo_to_dict(deploy.database_dsn)["dbname"]
    loop = asyncio.get_running_loop()
    seen: dict[str, Any] = {"first part": []}
    try:
        thread = await client.threads.create()
        run = await client.runs.create(
            thread["thread_id"],
            "topology",
            input={"label": "pool"},
            stream_mode=["updates"],
            after_seconds=HOLD,  # the streams are open while the run waits
        )
        started = loop.time()

        async def stream() -> list[Any]:
            parts = []
            async for part in client.runs.join_stream(
                thread["thread_id"], run["run_id"]
            ):
                if not parts:
                    seen["first part"].append(loop.time() - started)
                parts.append(part)
            return parts

        followers = [asyncio.create_task(stream()) for _ in range(STREAMS)]
        await asyncio.sleep(1)
        asked = loop.time()
        async with httpx.AsyncClient(
            base_url=deploy.urls[0], headers={"x-api-key": token}, timeout=30
        ) as plain:
            answers = await asyncio.gather(
                *(
                    plain.post("/api/threads/search", json={"limit": 5})
                    for _ in range(REQUESTS)
                )
            )
        seen["requests took"] = loop.time() - asked
        seen["answers"] = [answer.status_code for answer in answers]
        seen["connections"] = await asyncio.to_thread(
            _connections, deploy.database_dsn, database
        )
        seen["streams"] = await asyncio.gather(*followers)
    finally:
        await client.aclose()
    return seen


def _connections(dsn: str, database: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) - 1 FROM pg_stat_activity WHERE datname = %s", (database,)
        ).fetchone()
    return int(row[0]) if row else 0

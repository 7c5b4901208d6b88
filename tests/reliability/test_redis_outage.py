"""Redis goes away for a minute while runs and viewers go on.

Two Daphnes and two ``studio_worker`` processes on Postgres and on a private
``redis-server`` of this test's own (the shared Redis is never stopped). Four
threads each get one run after another (``tick`` twelve times, 0.25 s apart, a
custom event each time), queued through the API with the official SDK. Every
thread is watched by a signed-in WebSocket viewer on each Daphne, and every run
by an SSE viewer (``runs.join_stream``) on the Daphne that did not start it.
Once every thread finished a run, Redis is stopped for :data:`OUTAGE_SECONDS`,
then started again, empty.

The viewers behave as their real clients do: the browser's socket reconnects
and resumes after the last event it shows (``?after=``, static/studio/threads.js);
the SSE client reconnects with ``Last-Event-ID``. Then:

- runs keep being queued and executed during the outage (the event log is in
  Postgres): runs started and finished while Redis was down;
- ``/readyz`` answers 503 on both Daphnes while it lasts, naming the channel
  layer (the database still answers), and 200 again afterwards;
- the thread page loads during the outage, and afterwards shows the thread's
  last event;
- every WebSocket viewer ends with every activity event of its thread, in
  order, none twice (what a client sees: the frames it got, over all its
  connections), and every SSE viewer with every stream event of its run;
- no run is left pending or running, and the SQL invariants hold.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client
from psycopg.rows import dict_row

from tests._support.invariants import check_saver, check_studio
from tests._support.postgres import pg_dsn
from tests._support.private_redis import PrivateRedis, private_redis
from tests._support.topology import Topology, topology

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(300)]

GRAPH = "ticks"
GRAPHS = {GRAPH: "tests.reliability.outage_graphs:build"}
OUTAGE_SECONDS = 60.0
"""How long Redis stays down (the issue's "for a minute")."""
THREADS = 4
TICKS = 12
PAUSE = 0.25
MODES = ["custom", "updates"]
SETTLE_SECONDS = 60.0
"""After Redis is back: the longest the last runs and the viewers may take."""
READY_GRACE = 10.0
"""Seconds after the stop before ``/readyz`` must say so (its checks time out in 2 s)."""


@dataclass
class SocketLog:
    """What one browser-like WebSocket viewer saw, over all its connections."""

    url: str
    thread_id: str
    frames: list[dict[str, Any]] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    """``time.time()`` of each frame."""
    connects: int = 0
    drops: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return [int(frame["id"]) for frame in self.frames]


@dataclass
class SseLog:
    run_id: str
    thread_id: str
    parts: list[tuple[int, str]] = field(default_factory=list)
    reconnects: int = 0


@dataclass
class Outage:
    down_at: float = 0.0
    up_at: float = 0.0
    readyz: list[tuple[float, str, int, dict[str, Any]]] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)


def test_runs_and_viewers_survive_a_minute_without_redis(tmp_path: Path) -> None:
    with (
        private_redis() as redis_server,
        topology(
            tmp_path / "deploy",
            pg_dsn=pg_dsn(),
            redis_url=redis_server.url,
            graphs=GRAPHS,
            daphnes=2,
            workers=2,
            extra_env={"STUDIO_READYZ_TIMEOUT": "2"},
            tokens=("requester",),
        ) as deploy,
    ):
        session = deploy.session_cookie("requester", "requester")
        try:
            sockets, streams, outage, pages = asyncio.run(
                drive(deploy, redis_server, session)
            )
            runs, events = read_back(deploy.database_dsn)
            with psycopg.connect(deploy.database_dsn, autocommit=True) as conn:
                broken = check_saver(deploy.database_dsn) + check_studio(conn)
        except BaseException:
            print(deploy.diagnostics(60))
            raise
        logs = deploy.diagnostics(40)

    # runs went on while Redis was down
    assert all(r["status"] == "success" for r in runs.values()), (runs, logs)
    during = [
        r
        for r in runs.values()
        if outage.down_at < r["started_at"].timestamp()
        and r["finished_at"].timestamp() < outage.up_at
    ]
    assert len(during) >= THREADS, (len(during), outage, logs)

    # /readyz said so while it lasted, and recovered
    down = [
        answer
        for at, _, status, answer in outage.readyz
        if outage.down_at + READY_GRACE < at < outage.up_at
    ]
    assert down, outage.readyz
    for answer in down:
        assert answer["checks"]["channel_layer"]["ok"] is False, answer
        assert answer["checks"]["database"]["ok"] is True, answer
        assert answer["status"] == "not ready", answer
    assert all(
        status == 503
        for at, _, status, _ in outage.readyz
        if outage.down_at + READY_GRACE < at < outage.up_at
    )
    for url in deploy.urls:
        last = [s for at, u, s, _ in outage.readyz if u == url and at > outage.up_at]
        assert last and last[-1] == 200, outage.readyz

    # pages load during the outage and show the last event afterwards
    assert outage.pages and set(outage.pages) == {200}, outage.pages
    by_thread: dict[str, list[int]] = collections.defaultdict(list)
    for event in events:
        if event["kind"] != "stream":
            by_thread[event["thread_id"]].append(event["id"])
    for thread_id, shown in pages.items():
        assert shown == by_thread[thread_id][-1], (thread_id, shown)

    # every viewer got every event once, in order; the sockets stayed open and
    # read the table while Redis was away
    for log in sockets:
        want = by_thread[log.thread_id]
        assert (log.connects, log.drops) == (1, []), (log.url, log.drops)
        assert any(outage.down_at < at < outage.up_at for at in log.received), log
        assert log.ids == want, (
            log.url,
            log.thread_id,
            _diff(log.ids, want),
            log.drops,
        )
    stored: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for event in events:
        name = event["payload"].get("event", "") if event["kind"] == "stream" else ""
        if name.split("|", 1)[0] in MODES:  # what join_stream(stream_mode=MODES) asks
            stored[event["run_id"]].append((event["id"], name))
    assert {s.run_id for s in streams} == set(runs)
    for stream in streams:
        assert stream.parts == stored[stream.run_id], (
            stream.run_id,
            _diff(stream.parts, stored[stream.run_id]),
        )
    assert not [r for r in runs.values() if r["status"] in ("pending", "running")]
    assert broken == [], broken

    print(
        f"Redis down {outage.up_at - outage.down_at:.0f} s: {len(runs)} runs "
        f"({len(during)} wholly during the outage), {len(sockets)} sockets open "
        f"throughout, {len(streams)} SSE streams (reconnected "
        f"{sum(s.reconnects for s in streams)}); nothing lost, nothing twice"
    )


async def drive(
    deploy: Topology, redis_server: PrivateRedis, session: str
) -> tuple[list[SocketLog], list[SseLog], Outage, dict[str, int]]:
    timeout = httpx.Timeout(30.0, connect=10.0)
    clients = [
        get_client(
            url=f"{url}/api", api_key=deploy.tokens["requester"], timeout=timeout
        )
        for url in deploy.urls
    ]
    try:
        threads = [
            (await clients[0].threads.create(metadata={"outage": i}))["thread_id"]
            for i in range(THREADS)
        ]
        targets: dict[str, int] = {}
        sockets = [SocketLog(url, tid) for tid in threads for url in deploy.urls]
        socket_tasks = [
            asyncio.create_task(browser_viewer(log, session, targets))
            for log in sockets
        ]
        outage = Outage()
        up = asyncio.Event()
        first_done = [asyncio.Event() for _ in threads]
        drivers = [
            asyncio.create_task(run_thread(i, tid, clients, first_done[i], up))
            for i, tid in enumerate(threads)
        ]
        await asyncio.wait_for(
            asyncio.gather(*(e.wait() for e in first_done)), SETTLE_SECONDS
        )
        await cut_redis(deploy, redis_server, outage, threads[0], session, up)
        streams = [
            s
            for group in await asyncio.wait_for(
                asyncio.gather(*drivers), SETTLE_SECONDS
            )
            for s in group
        ]
        targets.update(await asyncio.to_thread(last_activity, deploy.database_dsn))
        _, late = await asyncio.wait(socket_tasks, timeout=SETTLE_SECONDS)
        for task in late:
            task.cancel()
        for log in sockets:
            print(
                f"{log.url} {log.thread_id}: {len(log.frames)} frames, "
                f"{log.connects} connects, drops {log.drops}"
            )
        pages = {
            tid: await page_last_event(deploy.urls[1], tid, session) for tid in threads
        }
    finally:
        for client in clients:
            await client.aclose()
    return sockets, streams, outage, pages


async def run_thread(
    index: int,
    thread_id: str,
    clients: list[Any],
    first_done: asyncio.Event,
    up: asyncio.Event,
) -> list[SseLog]:
    """Runs on one thread, one after another, until one started after Redis came back
    has finished; each followed over SSE on the other Daphne."""
    streams: list[SseLog] = []
    turn = 0
    while True:
        after_outage = up.is_set()
        host, other = clients[(index + turn) % 2], clients[(index + turn + 1) % 2]
        run = await host.runs.create(
            thread_id,
            GRAPH,
            input={"n": 0, "target": TICKS, "pause": PAUSE},
            stream_mode=MODES,
        )
        streams.append(await sse_viewer(other, thread_id, run["run_id"]))
        first_done.set()
        turn += 1
        if after_outage:
            return streams


async def sse_viewer(client: Any, thread_id: str, run_id: str) -> SseLog:
    """``runs.join_stream`` until the run ended, reconnecting with ``Last-Event-ID``."""
    log = SseLog(run_id, thread_id)
    last: str | None = None
    deadline = time.monotonic() + OUTAGE_SECONDS + SETTLE_SECONDS
    while time.monotonic() < deadline:
        try:
            async for part in client.runs.join_stream(
                thread_id, run_id, stream_mode=MODES, last_event_id=last
            ):
                if part.event in ("metadata", "error") or part.id is None:
                    continue
                last = part.id
                log.parts.append((int(part.id), part.event))
            run = await client.runs.get(thread_id, run_id)
            if run["status"] not in ("pending", "running"):
                return log
        except httpx.HTTPError:
            pass
        log.reconnects += 1
        await asyncio.sleep(0.5)
    raise AssertionError(f"SSE viewer of {run_id} did not see its end")


async def browser_viewer(log: SocketLog, session: str, targets: dict[str, int]) -> None:
    """``/ws/threads/<id>/?format=json``, as threads.js drives it: after a drop, a new
    socket resumes after the last event received (``?after=``), a second later."""
    from websockets.asyncio.client import connect  # noqa: PLC0415 - test-only dep
    from websockets.typing import Origin  # noqa: PLC0415

    url, thread_id = log.url, log.thread_id
    ws_url = url.replace("http://", "ws://", 1)
    deadline = time.monotonic() + 3 * OUTAGE_SECONDS + SETTLE_SECONDS
    while time.monotonic() < deadline:
        after = log.ids[-1] if log.frames else 0
        try:
            async with connect(
                f"{ws_url}/ws/threads/{thread_id}/?format=json&after={after}",
                origin=Origin(url),
                additional_headers={"Cookie": f"sessionid={session}"},
                open_timeout=10,
                max_size=None,
            ) as socket_:
                log.connects += 1
                while True:
                    target = targets.get(thread_id)
                    if target is not None and log.frames and log.ids[-1] >= target:
                        await _grace(socket_, log)
                        return
                    try:
                        raw = await asyncio.wait_for(socket_.recv(), 0.5)
                    except TimeoutError:
                        continue
                    message = json.loads(raw)
                    if message.get("type") == "event":
                        log.frames.append(message)
                        log.received.append(time.time())
        except Exception as exc:  # a drop: the browser makes a new socket
            log.drops.append(f"{time.time():.1f} {exc!r}"[:200])
        await asyncio.sleep(1.0)


async def _grace(socket_: Any, log: SocketLog) -> None:
    """Half a second more: a duplicate would show up here."""
    end = time.monotonic() + 0.5
    while (left := end - time.monotonic()) > 0:
        try:
            message = json.loads(await asyncio.wait_for(socket_.recv(), left))
        except Exception:
            return
        if message.get("type") == "event":
            log.frames.append(message)


async def cut_redis(
    deploy: Topology,
    redis_server: PrivateRedis,
    outage: Outage,
    thread_id: str,
    session: str,
    up: asyncio.Event,
) -> None:
    """Stop Redis for :data:`OUTAGE_SECONDS`, asking ``/readyz`` (and loading a thread
    page) every second meanwhile; start it again and wait for ready."""
    async with httpx.AsyncClient(timeout=10, cookies={"sessionid": session}) as http:

        async def probe() -> None:
            for url in deploy.urls:
                try:
                    answer = await http.get(f"{url}/readyz")
                    outage.readyz.append(
                        (time.time(), url, answer.status_code, answer.json())
                    )
                except httpx.HTTPError as exc:
                    outage.readyz.append((time.time(), url, 0, {"error": repr(exc)}))

        await asyncio.to_thread(redis_server.stop)
        outage.down_at = time.time()
        while time.time() < outage.down_at + OUTAGE_SECONDS:
            await probe()
            page = await http.get(f"{deploy.urls[0]}/threads/{thread_id}/")
            outage.pages.append(page.status_code)
            await asyncio.sleep(1.0)
        await asyncio.to_thread(redis_server.start)
        outage.up_at = time.time()
        up.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            await probe()
            if all(
                any(
                    u == url and s == 200 and at > outage.up_at
                    for at, u, s, _ in outage.readyz
                )
                for url in deploy.urls
            ):
                return
            await asyncio.sleep(0.5)


async def page_last_event(url: str, thread_id: str, session: str) -> int:
    async with httpx.AsyncClient(timeout=30, cookies={"sessionid": session}) as http:
        page = await http.get(f"{url}/threads/{thread_id}/")
    page.raise_for_status()
    found = re.search(r'id="last-event-id" data-last-event="(\d+)"', page.text)
    assert found is not None, page.text[:500]
    return int(found.group(1))


def last_activity(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT thread_id, max(id) FROM studio_runevent WHERE kind <> 'stream' "
            "GROUP BY thread_id"
        ).fetchall()
    return {str(thread_id): int(last) for thread_id, last in rows}


def read_back(dsn: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        runs = {
            row["run_id"]: row
            for row in conn.execute(
                "SELECT run_id, status, attempt, started_at, finished_at FROM studio_run"
            )
        }
        events = list(
            conn.execute(
                "SELECT id, run_id, thread_id, kind, payload FROM studio_runevent "
                "ORDER BY id"
            )
        )
    return runs, events


def _diff(got: list[Any], want: list[Any]) -> str:
    missing = [x for x in want if x not in got]
    extra = [x for x in got if x not in want]
    twice = [x for x, n in collections.Counter(got).items() if n > 1]
    return f"missing {missing[:10]}, unexpected {extra[:10]}, twice {twice[:10]}"

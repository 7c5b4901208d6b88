"""Load (issue 18): many runs with live viewers on the scaled-out studio, and a thread
of 10,000 checkpoints browsed page by page. Reported, never asserted.

    .venv/bin/python -m benchmarks.studio_load [--round RUNS:IN_FLIGHT:VIEWERS ...]
        [--checkpoints N] [--no-pages]

Runs in the project's own venv, like ``benchmarks/studio_api.py`` (whose graphs,
services and helpers it reuses): one deployment on loopback
(``tests._support.topology``): a fresh database on the Postgres of ``BENCH_PG_DSN``,
Redis at ``BENCH_REDIS_URL``, two Daphne processes and two ``studio_worker``
processes, for every round in turn. Everything goes through the API with the
official ``langgraph-sdk`` and through the pages' own WebSocket.

Rounds (default ``200:20:20`` then ``2000:200:200``, the issue's): RUNS runs of
``bench_tick`` (3 steps, 50 ms each) with IN_FLIGHT of them under way at any time:
IN_FLIGHT threads, each running its share of the runs one after another
(``runs.create``, then ``runs.join``). VIEWERS live viewers are spread over those
threads, half signed-in WebSocket viewers of the thread (``/ws/threads/<id>/``,
connected before the first run), half SSE viewers of each of the thread's runs
(``runs.join_stream``), on both Daphnes. Reported per round:

- runs/s: runs divided by the time from the first run queued to the last finished
  (from the ``Run`` rows);
- run latency, p50 / p99: ``runs.create`` called -> ``runs.join`` answered;
- event delay to viewers, p50 / p99: a task's own end time (``time.time()`` in its
  update) -> the viewer has its event (one machine, one clock);
- lost / twice: event ids a viewer missed or got more than once, against the
  ``RunEvent`` table; errors: runs that did not succeed, API calls and viewers
  that failed;
- the SQL invariants (``tests._support.invariants``) on the whole database at the
  end of the round: the number broken (none expected);
- the machine's load average (1 min) at the start, the highest seen, and at the
  end: the machine is shared.

Pages: a thread of ``--checkpoints`` (default 10,000) checkpoints, stored as a
worker stores a run (``benchmarks.studio_pages.make_thread``), in the same
Postgres database, read by this process's own Django (a test client, signed in)
through a relay that counts round trips to Postgres
(``tests._support.pg_round_trips``): the thread's timeline browsed page by page
to its oldest checkpoint (htmx's ``?before=``, as the "Older checkpoints" link
asks), and the history API page by page (``before``, 50 a page). Per page: the
SQL queries Django ran and the round trips to Postgres of Django and the
checkpointer together (min / median / max: constant is the goal), and the time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._harness import Skip, Table, fmt_ms
from benchmarks.studio_api import _percentile, _services

DEFAULT_ROUNDS = ("200:20:20", "2000:200:200")
TICKS = 3
PAUSE = 0.05
MODES = ["updates"]
LEASE_SECONDS = 30.0
HISTORY_PAGE = 50
OLDER = re.compile(r'hx-get="[^"]*\?before=([^"&]+)[^"]*" hx-target="#timeline"')
GRAPHS = {
    "bench_tick": "benchmarks.studio_api:tick_graph",
    "bench_loop": "benchmarks.studio_pages:loop_graph",
}


@dataclass(frozen=True)
class Size:
    runs: int
    in_flight: int
    viewers: int

    @classmethod
    def parse(cls, text: str) -> Size:
        try:
            runs, in_flight, viewers = (int(part) for part in text.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected RUNS:IN_FLIGHT:VIEWERS, e.g. 200:20:20"
            ) from None
        if runs < 1 or not 1 <= in_flight <= runs or viewers < 0:
            raise argparse.ArgumentTypeError(f"{text!r}: sizes out of range")
        return cls(runs, in_flight, viewers)

    def __str__(self) -> str:
        return f"{self.runs}:{self.in_flight}:{self.viewers}"


@dataclass
class RoundResult:
    size: Size
    run_ids: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    ws_delays: list[float] = field(default_factory=list)
    sse_delays: list[float] = field(default_factory=list)
    lost: int = 0
    twice: int = 0
    errors: list[str] = field(default_factory=list)
    failed_runs: int = 0
    rate: float = 0.0
    span: float = 0.0
    broken: list[str] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    load_line: str = ""


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--round",
        dest="rounds",
        action="append",
        type=Size.parse,
        metavar="RUNS:IN_FLIGHT:VIEWERS",
        help=f"a load round (repeatable; default {' then '.join(DEFAULT_ROUNDS)})",
    )
    parser.add_argument(
        "--checkpoints",
        type=int,
        default=10_000,
        help="checkpoints of the thread browsed page by page (default 10,000)",
    )
    parser.add_argument(
        "--no-pages", action="store_true", help="skip browsing the long thread"
    )
    args = parser.parse_args()
    args.rounds = args.rounds or [Size.parse(text) for text in DEFAULT_ROUNDS]
    return args


# --- the load rounds ------------------------------------------------------------------


def _client(url: str, token: str) -> Any:
    import httpx  # noqa: PLC0415
    from langgraph_sdk import get_client  # noqa: PLC0415

    return get_client(
        url=f"{url}/api", api_key=token, timeout=httpx.Timeout(600.0, connect=30.0)
    )


async def _sse(client: Any, thread_id: str, run_id: str) -> list[tuple[float, Any]]:
    got: list[tuple[float, Any]] = []
    async for part in client.runs.join_stream(thread_id, run_id, stream_mode=MODES):
        got.append((time.time(), part))
    return got


async def _slot(
    index: int,
    thread_id: str,
    runs: int,
    host: Any,
    sse_clients: list[Any],
    result: RoundResult,
    streams: list[tuple[str, list[tuple[float, Any]]]],
) -> None:
    """One thread's runs, one after another; each followed by the thread's SSE viewers."""
    for turn in range(runs):
        started = time.time()
        try:
            run = await host.runs.create(
                thread_id,
                "bench_tick",
                input={"n": 0, "target": TICKS, "pause": PAUSE},
                stream_mode=MODES,
            )
            run_id = str(run["run_id"])
            result.run_ids.append(run_id)
            viewers = [
                asyncio.create_task(_sse(client, thread_id, run_id))
                for client in sse_clients
            ]
            await host.runs.join(thread_id, run_id)
            result.latencies.append(time.time() - started)
            for task in viewers:
                try:
                    streams.append((run_id, await task))
                except Exception as exc:
                    result.errors.append(f"SSE viewer of {run_id}: {exc!r}"[:300])
        except Exception as exc:
            result.errors.append(f"slot {index} run {turn}: {exc!r}"[:300])


async def _sample_load(result: RoundResult, stop: asyncio.Event) -> None:
    while not stop.is_set():
        result.load.append(os.getloadavg()[0])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 2.0)


async def _round(
    deploy: Any, token: str, session: str, size: Size
) -> tuple[RoundResult, list[Any], list[tuple[str, list[tuple[float, Any]]]]]:
    from tests._support.topology import watch_thread  # noqa: PLC0415

    result = RoundResult(size)
    urls = deploy.urls
    hosts = [_client(urls[i % 2], token) for i in range(size.in_flight)]
    share = [
        size.runs // size.in_flight + (1 if i < size.runs % size.in_flight else 0)
        for i in range(size.in_flight)
    ]
    sse_clients: list[list[Any]] = [[] for _ in range(size.in_flight)]
    ws_plan: list[tuple[int, str]] = []
    for viewer in range(size.viewers):
        slot = viewer % size.in_flight
        if viewer % 2 == 0:  # half WebSocket, half SSE, both on both Daphnes
            ws_plan.append((slot, urls[(viewer // 2) % 2]))
        else:
            sse_clients[slot].append(_client(urls[(slot + 1) % 2], token))
    streams: list[tuple[str, list[tuple[float, Any]]]] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_load(result, stop))
    try:
        gate = asyncio.Semaphore(20)

        async def new_thread(i: int) -> str:
            async with gate:
                thread = await hosts[i].threads.create(metadata={"load": i})
                return str(thread["thread_id"])

        threads = list(
            await asyncio.gather(*(new_thread(i) for i in range(size.in_flight)))
        )
        ready: list[asyncio.Event] = []
        sockets = []
        for slot, url in ws_plan:
            connected = asyncio.Event()
            ready.append(connected)
            sockets.append(
                asyncio.create_task(
                    watch_thread(
                        url,
                        threads[slot],
                        session,
                        connected=connected,
                        runs=share[slot],
                        timeout=3600,
                        grace=0.3,
                    )
                )
            )
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 120)
        await asyncio.gather(
            *(
                _slot(
                    i, threads[i], share[i], hosts[i], sse_clients[i], result, streams
                )
                for i in range(size.in_flight)
            )
        )
        logs = []
        for task in sockets:
            try:
                logs.append(await asyncio.wait_for(task, 120))
            except Exception as exc:
                result.errors.append(f"WebSocket viewer: {exc!r}"[:300])
    finally:
        stop.set()
        await sampler
        for client in [*hosts, *(c for group in sse_clients for c in group)]:
            await client.aclose()
    return result, logs, streams


def _score(
    deploy: Any,
    result: RoundResult,
    logs: list[Any],
    streams: list[tuple[str, list[tuple[float, Any]]]],
) -> None:
    """Throughput, lost / twice and delays against the tables; the invariants."""
    import psycopg  # noqa: PLC0415

    from tests._support.invariants import check_saver, check_studio  # noqa: PLC0415

    with psycopg.connect(deploy.database_dsn, autocommit=True) as conn:
        runs = conn.execute(
            "SELECT status, extract(epoch FROM created_at), "
            "extract(epoch FROM finished_at) FROM studio_run WHERE run_id = ANY(%s)",
            (result.run_ids,),
        ).fetchall()
        events = conn.execute(
            "SELECT e.id, e.run_id, e.thread_id, e.kind, e.payload->>'event' "
            "FROM studio_runevent e JOIN studio_run r ON r.run_id = e.run_id "
            "WHERE r.run_id = ANY(%s) ORDER BY e.id",
            (result.run_ids,),
        ).fetchall()
        result.broken = check_saver(deploy.database_dsn) + check_studio(conn)
    result.failed_runs = sum(1 for status, *_ in runs if status != "success")
    finished = [float(end) for _, _, end in runs if end is not None]
    if finished:
        result.span = max(finished) - min(float(start) for _, start, _ in runs)
        result.rate = len(finished) / result.span
    activity: dict[str, list[int]] = {}
    stream: dict[str, list[int]] = {}
    for event_id, run_id, thread_id, kind, name in events:
        if kind != "stream":
            activity.setdefault(thread_id, []).append(event_id)
        elif name in MODES:
            stream.setdefault(run_id, []).append(event_id)
    for log in logs:
        want = activity.get(log.thread_id, [])
        result.lost += len(set(want) - set(log.ids))
        result.twice += len(log.ids) - len(set(log.ids))
        for arrived, frame in zip(log.received, log.frames, strict=True):
            if frame.get("kind") == "task.end":
                update = (frame.get("payload") or {}).get("update") or {}
                if "t" in update:
                    result.ws_delays.append(arrived - float(update["t"]))
    for run_id, parts in streams:
        ids = [int(p.id) for _, p in parts if p.id is not None]
        result.lost += len(set(stream.get(run_id, [])) - set(ids))
        result.twice += len(ids) - len(set(ids))
        for arrived, part in parts:
            if part.event == "updates" and isinstance(part.data, dict):
                tick = part.data.get("tick") or {}
                if "t" in tick:
                    result.sse_delays.append(arrived - float(tick["t"]))


def load_round(deploy: Any, token: str, session: str, size: Size) -> RoundResult:
    print(f"round {size}: {time.strftime('%H:%M:%S')} ...", flush=True)
    result, logs, streams = asyncio.run(_round(deploy, token, session, size))
    _score(deploy, result, logs, streams)
    result.load_line = _uptime()
    print(f"round {size}: done at {time.strftime('%H:%M:%S')}", flush=True)
    return result


def load_table(results: list[RoundResult]) -> Table:
    table = Table(
        f"Load: runs of bench_tick ({TICKS} steps of {PAUSE * 1000:.0f} ms) through the "
        "API, 2 Daphnes, 2 workers, Postgres, Redis; viewers half WebSocket, half SSE",
        (
            "runs:in flight:viewers",
            "runs/s",
            "latency p50",
            "p99",
            "WS delay p50",
            "p99",
            "SSE delay p50",
            "p99",
            "lost",
            "twice",
            "errors",
            "invariants broken",
            "load 1m start/max/end",
        ),
    )
    for r in results:
        load = f"{r.load[0]:.1f}/{max(r.load):.1f}/{r.load[-1]:.1f}" if r.load else "-"
        table.add(
            str(r.size),
            f"{r.rate:.1f}",
            fmt_ms(statistics.median(r.latencies)) if r.latencies else "-",
            fmt_ms(_percentile(r.latencies, 0.99)),
            fmt_ms(statistics.median(r.ws_delays)) if r.ws_delays else "-",
            fmt_ms(_percentile(r.ws_delays, 0.99)),
            fmt_ms(statistics.median(r.sse_delays)) if r.sse_delays else "-",
            fmt_ms(_percentile(r.sse_delays, 0.99)),
            str(r.lost),
            str(r.twice),
            str(r.failed_runs + len(r.errors)),
            str(len(r.broken)),
            load,
        )
    for r in results:
        table.note(
            f"{r.size}: {len(r.run_ids)} runs queued, {r.failed_runs} did not succeed, "
            f"{len(r.errors)} client errors; first queued -> last finished "
            f"{r.span:.1f} s; delays over {len(r.ws_delays)} WebSocket and "
            f"{len(r.sse_delays)} SSE events; at the end: {r.load_line}"
        )
        for error in r.errors[:5]:
            table.note(f"  error: {error}")
        for problem in r.broken[:5]:
            table.note(f"  invariant: {problem}")
    return table


# --- the long thread, page by page ------------------------------------------------------


def setup_django(deploy: Any, dsn: str) -> None:
    """This process's Django on the deployment's database, through ``dsn`` (the relay)."""
    from tests._support.topology import database_url  # noqa: PLC0415

    for key, value in deploy.env.items():
        os.environ.setdefault(key, value)
    os.environ["DATABASE_URL"] = database_url(dsn)
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.pop("REDIS_URL", None)  # pages only: no channel layer needed
    import django  # noqa: PLC0415

    django.setup()


@dataclass
class PageWalk:
    name: str
    ms: list[float] = field(default_factory=list)
    queries: list[int] = field(default_factory=list)
    trips: list[int] = field(default_factory=list)
    rows: int = 0


def _timed(relay: Any, request: Any) -> tuple[Any, float, int, int]:
    from django.db import connection  # noqa: PLC0415
    from django.test.utils import CaptureQueriesContext  # noqa: PLC0415

    relay.reset()
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = request()
        seconds = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code}: {response.content[:300]!r}")
    return response, seconds, len(queries), relay.round_trips


def walk_pages(relay: Any, checkpoints: int) -> tuple[list[PageWalk], float, int]:
    from django.contrib.auth import get_user_model  # noqa: PLC0415
    from django.test import Client  # noqa: PLC0415

    from benchmarks.studio_pages import make_thread  # noqa: PLC0415

    user = get_user_model().objects.get(username="requester")
    started = time.perf_counter()
    thread = make_thread(user, checkpoints)
    built = time.perf_counter() - started
    client = Client()
    client.force_login(user)
    base = f"/threads/{thread.thread_id}/"

    timeline = PageWalk("timeline, older pages (htmx ?before=)")
    before = ""  # the first page: the newest checkpoints
    seen: set[str] = set()
    while before not in seen:
        seen.add(before)
        response, seconds, queries, trips = _timed(
            relay,
            lambda before=before: client.get(
                f"{base}?before={before}" if before else base,
                HTTP_HX_REQUEST="true",
                HTTP_HX_TARGET="timeline",
            ),
        )
        timeline.ms.append(seconds)
        timeline.queries.append(queries)
        timeline.trips.append(trips)
        html = response.content.decode()
        timeline.rows += len(set(re.findall(r'data-checkpoint="([^"]+)"', html)))
        found = OLDER.search(html)  # the "Older checkpoints" link
        if found is None:
            break
        before = found.group(1)

    history = PageWalk(f"history API, {HISTORY_PAGE} a page (before=)")
    body: dict[str, Any] = {"limit": HISTORY_PAGE}
    while True:
        response, seconds, queries, trips = _timed(
            relay,
            lambda body=body: client.post(
                f"/api/threads/{thread.thread_id}/history",
                json.dumps(body),
                content_type="application/json",
            ),
        )
        items = response.json()
        history.ms.append(seconds)
        history.queries.append(queries)
        history.trips.append(trips)
        history.rows += len(items)
        if len(items) < HISTORY_PAGE:
            break
        # the oldest item's checkpoint, as the SDK's get_history(before=...) sends it
        body = {"limit": HISTORY_PAGE, "before": items[-1]["checkpoint"]}
    return [timeline, history], built, thread.checkpoints


def pages_table(walks: list[PageWalk], built: float, checkpoints: int) -> Table:
    table = Table(
        f"A thread of {checkpoints:,} checkpoints browsed page by page (Postgres; "
        "Django's test client in this process; min / median / max per page)",
        (
            "walk",
            "pages",
            "rows",
            "SQL queries",
            "Postgres round trips",
            "ms p50",
            "ms p99",
        ),
    )
    for walk in walks:
        table.add(
            walk.name,
            str(len(walk.ms)),
            f"{walk.rows:,}",
            _spread(walk.queries),
            _spread(walk.trips),
            fmt_ms(statistics.median(walk.ms)),
            fmt_ms(_percentile(walk.ms, 0.99)),
        )
    table.note(
        f"set-up: the thread was stored in {built:.0f} s (a worker's run, "
        "durability=async, every event in the run log)"
    )
    table.note(
        "SQL queries: Django's, per page; round trips: every exchange with Postgres "
        "on the wire (Django and the checkpointer), counted by a relay"
    )
    return table


def _spread(values: list[int]) -> str:
    if not values:
        return "-"
    return f"{min(values)} / {statistics.median(values):g} / {max(values)}"


def _uptime() -> str:
    try:
        return subprocess.run(
            ["uptime"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


# --- main -----------------------------------------------------------------------------


def main() -> None:
    args = parse()
    from tests._support.pg_round_trips import RoundTripRelay  # noqa: PLC0415
    from tests._support.topology import topology  # noqa: PLC0415

    try:
        dsn, url = _services()
    except Skip as exc:
        raise SystemExit(f"studio_load: {exc}") from None
    print(
        "studio load: 2 Daphne processes, 2 workers, Postgres, Redis; rounds "
        + ", ".join(str(size) for size in args.rounds)
        + f"; at the start: {_uptime()}"
    )
    print()
    failed = False
    with (
        tempfile.TemporaryDirectory(prefix="bench-studio-load-") as tmp,
        topology(
            Path(tmp),
            pg_dsn=dsn,
            redis_url=url,
            graphs=GRAPHS,
            daphnes=2,
            workers=2,
            lease_seconds=LEASE_SECONDS,
            extra_env={"LOG_LEVEL": "WARNING"},
            tokens=("requester",),
            timeout=120,
        ) as deploy,
        RoundTripRelay(deploy.database_dsn) as relay,
    ):
        setup_django(deploy, relay.dsn)  # the invariants read the studio's models
        token = deploy.tokens["requester"]
        session = deploy.session_cookie("requester", "requester")
        results = []
        for size in args.rounds:
            try:
                results.append(load_round(deploy, token, session, size))
            except Exception:
                failed = True
                print(
                    f"round {size} FAILED:\n{traceback.format_exc()}\n"
                    f"{deploy.diagnostics(lines=40)}",
                    file=sys.stderr,
                )
        if results:
            load_table(results).print()
        if not args.no_pages:
            print()
            try:
                walks, built, count = walk_pages(relay, args.checkpoints)
                pages_table(walks, built, count).print()
            except Exception:
                failed = True
                print(f"pages FAILED:\n{traceback.format_exc()}", file=sys.stderr)
            finally:
                from studio.services.saver import reset_saver  # noqa: PLC0415

                reset_saver()  # its pool's threads, before the relay closes
    print(f"\nat the end: {_uptime()}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()

"""The studio scaled out (issue 12): run throughput with two workers over one, and how
long a task's end takes to reach SSE and WebSocket viewers, 2 vs. 200 of them.

    .venv/bin/python -m benchmarks.studio_api [--repeat N] [--only NAME] [--list]

Runs in the project's own venv (``.venv``: Django, Daphne, the SDK). It starts the
deployment README's "Deployment" describes, on loopback (``tests._support.topology``):
a fresh database on the Postgres of ``BENCH_PG_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``; dropped at the end), Redis at
``BENCH_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``), two Daphne processes and
``manage.py studio_worker`` processes as each table needs. Everything goes through
the API with the official ``langgraph-sdk``.

Throughput. 100 runs of ``bench_short`` (three nodes in a row) are queued through the
API of both Daphnes, then 1 or 2 workers are started; the figure is runs per second
between the 10th and the 90th finished run (steady state: no start-up, no drain),
from the runs' ``finished_at``. Rounds interleave 1 and 2 workers; medians. Twice:
nodes that return at once (the studio's own cost per run: claim, events, checkpoints,
status) and nodes that each wait 50 ms (a model or tool call). Goal: 2 workers at
least 1.8x one (reported, never asserted). ``BENCH_WORKERS=1,2,3`` adds a column for
3 workers (any counts named; 1 and 2 always run).

Event delay. One worker runs ``bench_tick`` (30 steps; each node sleeps 100 ms and
writes ``time.time()`` into its update as it ends) while N viewers follow it: half
WebSocket (``/ws/threads/<id>/?format=json``, signed in), half SSE
(``runs.join_stream(stream_mode="updates")``), spread over both Daphnes. The delay
is the viewer's clock when the event arrives minus the node's timestamp (one
machine, one clock), per task and viewer, the first 3 tasks left out; every
viewer's event ids are checked against the ``RunEvent`` table (none lost, none
twice).
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import tempfile
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, TypedDict

from benchmarks._harness import Skip, Table, finish, fmt_ms, parse_args, selected

RUNS = 100
GOAL = 1.8
STEADY = (10, 90)
"""Throughput is measured between these finished runs (1-based)."""
VIEWERS = (2, 200)
TICKS = 30
WARMUP_TICKS = 3
TICK_SECONDS = 0.1
LEASE_SECONDS = 30.0

THROUGHPUT_WORKLOADS = {
    "throughput, 100 short runs": 0.0,
    "throughput, 100 short runs, 3 x 50 ms waits": 0.05,
}
LATENCY_WORKLOADS = {f"event delay, {n} viewers": n for n in VIEWERS}


# --- the graphs (imported by the worker processes) -------------------------------------


class ShortState(TypedDict, total=False):
    n: int
    wait: float


def short_graph() -> Any:
    """``a`` -> ``b`` -> ``c``, each adding one to ``n`` after ``wait`` seconds."""
    from engine.graph import END, START, StateGraph  # noqa: PLC0415 - worker side

    def step(state: ShortState) -> dict[str, int]:
        if state.get("wait"):
            time.sleep(state["wait"])
        return {"n": state.get("n", 0) + 1}

    graph: Any = StateGraph(ShortState)
    for name in ("a", "b", "c"):
        graph.add_node(name, step)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph.compile()


class TickState(TypedDict, total=False):
    n: int
    target: int
    pause: float
    t: float


def tick_graph() -> Any:
    """``tick`` sleeps ``pause``, then adds one to ``n`` and writes its end time ``t``."""
    from engine.graph import END, START, StateGraph  # noqa: PLC0415 - worker side

    def tick(state: TickState) -> dict[str, Any]:
        time.sleep(state.get("pause", 0.1))
        return {"n": state.get("n", 0) + 1, "t": time.time()}

    def again(state: TickState) -> str:
        return "tick" if state.get("n", 0) < state.get("target", 1) else END

    graph: Any = StateGraph(TickState)
    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", again, ["tick", END])
    return graph.compile()


GRAPHS = {
    "bench_short": "benchmarks.studio_api:short_graph",
    "bench_tick": "benchmarks.studio_api:tick_graph",
}


# --- helpers --------------------------------------------------------------------------


def _clients(deploy: Any, token: str) -> list[Any]:
    import httpx  # noqa: PLC0415
    from langgraph_sdk import get_client  # noqa: PLC0415

    timeout = httpx.Timeout(120.0, connect=10.0)
    return [
        get_client(url=f"{url}/api", api_key=token, timeout=timeout)
        for url in deploy.urls
    ]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _wait_terminal(dsn: str, run_ids: list[str], timeout: float) -> None:
    import psycopg  # noqa: PLC0415

    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM studio_run WHERE run_id = ANY(%s) "
                "AND status NOT IN ('pending', 'running')",
                (run_ids,),
            ).fetchone()
            if row is not None and row[0] == len(run_ids):
                return
            time.sleep(0.1)
    raise TimeoutError(f"{len(run_ids)} runs did not finish within {timeout:.0f}s")


def _failure(deploy: Any) -> str:
    """The traceback and the processes' last log lines."""
    return f"{traceback.format_exc()}\n{deploy.diagnostics(lines=60)}"


# --- throughput -----------------------------------------------------------------------


async def _queue(deploy: Any, token: str, wait: float) -> list[str]:
    """``RUNS`` runs of ``bench_short``, each on a new thread, through both Daphnes."""
    clients = _clients(deploy, token)
    gate = asyncio.Semaphore(16)

    async def one(i: int) -> str:
        async with gate:
            run = await clients[i % 2].runs.create(
                str(uuid.uuid4()),
                "bench_short",
                input={"n": 0, "wait": wait},
                if_not_exists="create",
            )
            return str(run["run_id"])

    try:
        return list(await asyncio.gather(*(one(i) for i in range(RUNS))))
    finally:
        for client in clients:
            await client.aclose()


def throughput_round(
    deploy: Any, token: str, wait: float, workers: int
) -> tuple[float, float, int]:
    """(runs/s between the STEADY finishes, wall seconds first start -> last finish, failed)."""
    import psycopg  # noqa: PLC0415

    run_ids = asyncio.run(_queue(deploy, token, wait))
    names = [f"bench-{uuid.uuid4().hex[:6]}" for _ in range(workers)]
    try:
        for name in names:
            deploy.start_worker(name)
        deploy.wait_ready(60)
        _wait_terminal(deploy.database_dsn, run_ids, timeout=600)
    finally:
        deploy.stop_workers(*names)
    with psycopg.connect(deploy.database_dsn) as conn:
        rows = conn.execute(
            "SELECT status, extract(epoch FROM started_at), "
            "extract(epoch FROM finished_at) FROM studio_run WHERE run_id = ANY(%s)",
            (run_ids,),
        ).fetchall()
    failed = sum(1 for status, *_ in rows if status != "success")
    finished = sorted(float(row[2]) for row in rows)
    first, last = STEADY
    rate = (last - first) / (finished[last - 1] - finished[first - 1])
    span = finished[-1] - min(float(row[1]) for row in rows)
    return rate, span, failed


def worker_counts() -> tuple[int, ...]:
    """1 and 2 workers, and any more ``BENCH_WORKERS`` names (e.g. ``1,2,3``): a
    third worker shows what the machine can do when two leave cores idle."""
    named = os.environ.get("BENCH_WORKERS", "")
    extra = {int(part) for part in named.split(",") if part.strip()}
    return tuple(sorted({1, 2} | extra))


def throughput_table(args: Any, deploy: Any, token: str) -> Table:
    counts = worker_counts()
    table = Table(
        f"Run throughput: {RUNS} runs queued through the API, then "
        f"{', '.join(map(str, counts))} workers "
        f"(runs/s between the {STEADY[0]}th and {STEADY[1]}th finished; "
        "ratio = 2 workers / 1)",
        (
            "workload",
            *(f"{n} worker{'s' if n > 1 else ''} runs/s" for n in counts),
            "ratio",
            "goal",
        ),
    )
    for name, wait in THROUGHPUT_WORKLOADS.items():
        if not selected(args, name):
            continue
        rates: dict[int, list[float]] = {n: [] for n in counts}
        spans: dict[int, list[float]] = {n: [] for n in counts}
        failed = 0
        try:
            for rnd in range(args.repeat):
                for workers in counts if rnd % 2 == 0 else counts[::-1]:
                    rate, span, bad = throughput_round(deploy, token, wait, workers)
                    rates[workers].append(rate)
                    spans[workers].append(span)
                    failed += bad
        except Exception as exc:
            table.note(f"FAILED {name}: {type(exc).__name__}: {exc}")
            args.failures.append((name, _failure(deploy)))
            continue
        medians = {n: statistics.median(rates[n]) for n in counts}
        ratio = medians[2] / medians[1]
        short = name.removeprefix("throughput, ")
        table.add(
            short,
            *(f"{medians[n]:.1f}" for n in counts),
            f"{ratio:.2f}",
            f">={GOAL:.2f} " + ("ok" if ratio >= GOAL else "MISS"),
        )
        table.note(
            f"{short}: all {RUNS} runs, first start to last finish: "
            + ", ".join(f"{statistics.median(spans[n]):.1f} s with {n}" for n in counts)
            + "".join(
                f"; {n} workers {medians[n] / medians[1]:.2f}x one"
                for n in counts
                if n > 2
            )
            + (f"; {failed} runs FAILED" if failed else "")
        )
    return table


# --- event delay ----------------------------------------------------------------------


async def _sse_viewer(
    client: Any, thread_id: str, run_id: str, connected: asyncio.Event
) -> list[tuple[float, Any]]:
    got: list[tuple[float, Any]] = []
    async for part in client.runs.join_stream(thread_id, run_id, stream_mode="updates"):
        got.append((time.time(), part))
        connected.set()
    return got


async def _delay_round(
    deploy: Any, token: str, session: str, viewers: int
) -> dict[str, Any]:
    from tests._support.topology import watch_thread  # noqa: PLC0415

    clients = _clients(deploy, token)
    try:
        thread = await clients[0].threads.create()
        thread_id = thread["thread_id"]
        hold = 3 + viewers // 40  # seconds before the run may start: time to connect
        run = await clients[0].runs.create(
            thread_id,
            "bench_tick",
            input={"n": 0, "target": TICKS, "pause": TICK_SECONDS},
            stream_mode=["updates"],
            after_seconds=hold,
        )
        due = time.monotonic() + hold
        run_id = run["run_id"]
        ready: list[asyncio.Event] = []
        ws_tasks, sse_tasks = [], []
        for i in range(viewers):
            connected = asyncio.Event()
            ready.append(connected)
            daphne = (i // 2) % 2
            url = deploy.urls[daphne]
            if i % 2 == 0:  # half WebSocket, half SSE, both on both Daphnes
                ws_tasks.append(
                    asyncio.create_task(
                        watch_thread(
                            url,
                            thread_id,
                            session,
                            connected=connected,
                            timeout=120,
                            grace=0.3,
                        )
                    )
                )
            else:
                sse_tasks.append(
                    asyncio.create_task(
                        _sse_viewer(clients[daphne], thread_id, run_id, connected)
                    )
                )
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 60)
        late = time.monotonic() > due
        sockets = await asyncio.wait_for(asyncio.gather(*ws_tasks), 150)
        streams = await asyncio.wait_for(asyncio.gather(*sse_tasks), 150)
    finally:
        for client in clients:
            await client.aclose()
    return {
        "thread_id": thread_id,
        "run_id": run_id,
        "sockets": sockets,
        "streams": streams,
        "late": late,
    }


def delay_round(deploy: Any, token: str, session: str, viewers: int) -> dict[str, Any]:
    """Delays in seconds per channel, and lost/duplicated events, for one run."""
    import psycopg  # noqa: PLC0415

    got = asyncio.run(_delay_round(deploy, token, session, viewers))
    with psycopg.connect(deploy.database_dsn) as conn:
        rows = conn.execute(
            "SELECT id, kind, payload->>'event' FROM studio_runevent "
            "WHERE thread_id = %s ORDER BY id",
            (got["thread_id"],),
        ).fetchall()
    activity = [id for id, kind, _ in rows if kind != "stream"]
    # what join_stream(stream_mode="updates") serves
    stream = [id for id, kind, name in rows if kind == "stream" and name == "updates"]
    out: dict[str, Any] = {"ws": [], "sse": [], "lost": 0, "twice": 0}
    out["late"] = got["late"]
    for log in got["sockets"]:
        out["lost"] += len(set(activity) - set(log.ids))
        out["twice"] += len(log.ids) - len(set(log.ids))
        for arrived, frame in zip(log.received, log.frames, strict=True):
            if frame["kind"] != "task.end":
                continue
            update = frame["payload"].get("update") or {}
            if update.get("n", 0) > WARMUP_TICKS:
                out["ws"].append(arrived - float(update["t"]))
    for parts in got["streams"]:
        ids = [int(p.id) for _, p in parts if p.id is not None]
        out["lost"] += len(set(stream) - set(ids))
        out["twice"] += len(ids) - len(set(ids))
        for arrived, part in parts:
            if part.event != "updates":
                continue
            tick = part.data.get("tick") or {}
            if tick.get("n", 0) > WARMUP_TICKS:
                out["sse"].append(arrived - float(tick["t"]))
    return out


def delay_table(args: Any, deploy: Any, token: str, session: str) -> Table:
    table = Table(
        f"Event delay: a task's end (the node's own timestamp) -> the viewer has its "
        f"event; 1 worker, {TICKS} tasks of {TICK_SECONDS * 1000:.0f} ms, viewers half "
        "WebSocket, half SSE, on both Daphnes",
        ("viewers", "channel", "median ms", "p99 ms", "samples", "lost", "twice"),
    )
    wanted = {n: v for n, v in LATENCY_WORKLOADS.items() if selected(args, n)}
    if not wanted:
        return table
    samples: dict[int, dict[str, list[float]]] = {
        v: {"ws": [], "sse": []} for v in wanted.values()
    }
    lost = dict.fromkeys(wanted.values(), 0)
    twice = dict.fromkeys(wanted.values(), 0)
    late = 0
    worker = f"bench-{uuid.uuid4().hex[:6]}"
    try:
        deploy.start_worker(worker)
        deploy.wait_ready(60)
        order = list(wanted.values())
        for rnd in range(args.repeat):
            for viewers in order if rnd % 2 == 0 else order[::-1]:
                out = delay_round(deploy, token, session, viewers)
                samples[viewers]["ws"] += out["ws"]
                samples[viewers]["sse"] += out["sse"]
                lost[viewers] += out["lost"]
                twice[viewers] += out["twice"]
                late += out["late"]
    except Exception as exc:
        table.note(f"FAILED event delay: {type(exc).__name__}: {exc}")
        args.failures.append(("event delay", _failure(deploy)))
        return table
    finally:
        if worker in deploy.workers:
            deploy.stop_workers(worker)
    medians: dict[tuple[int, str], float] = {}
    for viewers in wanted.values():
        for channel, label in (("ws", "WebSocket"), ("sse", "SSE")):
            values = samples[viewers][channel]
            medians[viewers, channel] = statistics.median(values)
            table.add(
                f"{viewers} ({viewers // 2} WS, {viewers - viewers // 2} SSE)"
                if channel == "ws"
                else "",
                label,
                fmt_ms(medians[viewers, channel]),
                fmt_ms(_percentile(values, 0.99)),
                str(len(values)),
                str(lost[viewers]) if channel == "ws" else "",
                str(twice[viewers]) if channel == "ws" else "",
            )
    if len(wanted) == 2:
        small, big = sorted(wanted.values())
        table.sep()
        for channel, label in (("ws", "WebSocket"), ("sse", "SSE")):
            growth = medians[big, channel] / medians[small, channel]
            table.add(f"growth {big} / {small}", label, f"{growth:.2f}x")
    table.note(
        "lost / twice: event ids a viewer missed or got more than once, against the "
        "RunEvent table, over all viewers and rounds"
    )
    if late:
        table.note(f"{late} round(s) started before every viewer was connected")
    return table


# --- main -----------------------------------------------------------------------------


def _services() -> tuple[str, str]:
    import psycopg  # noqa: PLC0415
    import redis  # noqa: PLC0415

    dsn = os.environ.get(
        "BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.Error as exc:
        raise Skip(f"Postgres unreachable at BENCH_PG_DSN ({exc})") from exc
    client = redis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise Skip(f"Redis unreachable at BENCH_REDIS_URL ({exc})") from exc
    finally:
        client.close()
    return dsn, url


def main() -> None:
    args = parse_args(__doc__ or "", [*THROUGHPUT_WORKLOADS, *LATENCY_WORKLOADS])
    from tests._support.topology import topology  # noqa: PLC0415

    try:
        dsn, url = _services()
    except Skip as exc:
        raise SystemExit(f"studio_api: {exc}") from None
    print(
        f"studio API, scaled out: {args.repeat} interleaved rounds, medians; "
        "2 Daphne processes, Postgres, Redis, workers as each table says"
    )
    print()
    with (
        tempfile.TemporaryDirectory(prefix="bench-studio-api-") as tmp,
        topology(
            Path(tmp),
            pg_dsn=dsn,
            redis_url=url,
            graphs=GRAPHS,
            daphnes=2,
            workers=0,
            lease_seconds=LEASE_SECONDS,
            extra_env={"LOG_LEVEL": "WARNING"},
            tokens=("requester",),
        ) as deploy,
    ):
        token = deploy.tokens["requester"]
        throughput_table(args, deploy, token).print()
        if any(selected(args, name) for name in LATENCY_WORKLOADS):
            print()
            session = deploy.session_cookie("requester", "requester")
            delay_table(args, deploy, token, session).print()
    finish(args)


if __name__ == "__main__":
    main()

"""The studio (issue 6): thread pages at 10 vs. 10,000 checkpoints, and live event latency.

    .venv/bin/python -m benchmarks.studio_pages [--repeat N] [--only NAME] [--list]
    .venv/bin/python -m benchmarks.studio_pages --profile "step page"   # cProfile, long thread

Runs in the project's own venv (``.venv``: it needs Django; LangGraph is not involved).
Everything lives in a temporary folder: a fresh SQLite database and SQLite checkpointer,
migrated on start, with one loop graph (``bench_loop``) registered next to the demo graphs.

Pages. Two threads of the same loop graph, stored as a studio worker stores a run
(the worker's config, ``durability="async"``, every engine event in the run log; see
:func:`make_thread`): one with 10 checkpoints, one with 10,000. Each page is a full ``GET`` through Django's test client (middleware,
session, view, services, templates), timed in interleaved rounds; the ratio 10,000 / 10
should stay at most 2 (issue 6: pagination, and diffs only for what is shown).

Latency. A worker thread appends a run event (``studio.services.run_log.append``: the
row first, then the group message) while a WebSocket client (Channels'
``WebsocketCommunicator`` on the ASGI app, ``format=html``, as a browser gets) waits;
the time from just before the append to the client holding the fragment, one event at a
time. With the in-memory layer (embedded mode) always, and with Redis when
``REDIS_URL`` is set (e.g. ``REDIS_URL=redis://127.0.0.1:6379/15``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from benchmarks._harness import (
    Skip,
    Table,
    attempt,
    finish,
    fmt_ms,
    fmt_ratio,
    measure,
    parse_args,
    profile,
    selected,
    verdict,
)

SHORT = 10
LONG = 10_000
TARGET = 2.0
"""Issue 17: a 10,000-checkpoint thread's page, a step panel, the history API and the
compare page each cost at most twice what they cost on a 10-checkpoint thread."""
TARGETED = (
    "thread page",
    "step page, middle of the history",
    "compare, middle vs. newest step",
    "history API, 20 items",
)
EVENTS = 200
"""Events timed per channel layer (after 20 untimed ones)."""
GRAPH = "bench_loop"

PAGE_WORKLOADS = (
    "thread page",
    "timeline, older page (htmx)",
    "step page, middle of the history",
    "compare, middle vs. newest step",
    "history API, 20 items",
    "graph page, 200 vs. 10 nodes",
)
LATENCY_WORKLOADS = ("event latency, in-memory layer", "event latency, redis layer")


# --- the graph ------------------------------------------------------------------------------


class LoopState(TypedDict):
    n: int
    target: int


def loop_graph() -> Any:
    """``step`` adds one to ``n`` until it reaches ``target``: ``target`` + 2 checkpoints
    (the input, the first step, then one per ``step``)."""
    from engine.graph import END, START, StateGraph  # noqa: PLC0415 - after Django set-up

    def step(state: LoopState) -> dict[str, int]:
        return {"n": state["n"] + 1}

    def route(state: LoopState) -> str:
        return "step" if state["n"] < state["target"] else END

    graph: Any = StateGraph(LoopState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", route, ["step", END])
    return graph.compile(name=GRAPH)


def chain_graph(nodes: int) -> Any:
    """``nodes`` nodes in a row, each adding one to ``n`` (a large drawing)."""
    from engine.graph import START, StateGraph  # noqa: PLC0415 - after Django set-up

    def add(state: LoopState) -> dict[str, int]:
        return {"n": state["n"] + 1}

    graph: Any = StateGraph(LoopState)
    previous = START
    for i in range(nodes):
        graph.add_node(f"n{i:03d}", add)
        graph.add_edge(previous, f"n{i:03d}")
        previous = f"n{i:03d}"
    return graph.compile(name=f"bench_chain_{nodes}")


def chain_10() -> Any:
    return chain_graph(10)


def chain_200() -> Any:
    return chain_graph(200)


# --- Django in a temporary folder -------------------------------------------------------


def setup_django(workdir: Path) -> str:
    """Point the settings at ``workdir`` and migrate; returns REDIS_URL ("" if unset)."""
    redis_url = os.environ.pop("REDIS_URL", "")  # the pages run embedded, on SQLite
    graphs = workdir / "graphs.json"
    graphs.write_text(
        json.dumps(
            {
                "graphs": {
                    GRAPH: "benchmarks.studio_pages:loop_graph",
                    "bench_chain_10": "benchmarks.studio_pages:chain_10",
                    "bench_chain_200": "benchmarks.studio_pages:chain_200",
                }
            }
        )
    )
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
            "STUDIO_CHECKPOINT_DB": str(workdir / "checkpoints.sqlite3"),
            "STUDIO_GRAPHS_FILE": str(graphs),
            "STUDIO_EMBEDDED_WORKER": "0",
            "SECRET_KEY": "benchmark-only",
            "ALLOWED_HOSTS": "testserver,localhost",
            "LOG_LEVEL": "WARNING",
        }
    )
    os.environ.pop("DATABASE_URL_TEST", None)
    import django  # noqa: PLC0415
    from django.core.management import call_command  # noqa: PLC0415

    django.setup()
    call_command("migrate", verbosity=0)
    return redis_url


@dataclass
class Thread:
    thread_id: str
    checkpoints: int
    middle: str
    """A checkpoint id halfway down the history."""
    events: int
    newest: str = ""


def make_thread(user: Any, checkpoints: int) -> Thread:
    """A finished run of the loop graph on a new thread, stored as a worker stores it.

    The graph runs on the studio's checkpointer with the worker's config
    (``durability="async"``, the run id in the metadata) and every engine event
    is kept as the worker keeps it (``run_log.as_record``), but the events are
    inserted in batches: the worker commits them one by one (about 2 ms each
    here), which would make the set-up of 10,000 steps take minutes.
    """
    from django.utils import timezone  # noqa: PLC0415

    from studio.models import Run, RunEvent  # noqa: PLC0415
    from studio.models import Thread as ThreadRow  # noqa: PLC0415
    from studio.services import run_log  # noqa: PLC0415
    from studio.services.registered_graphs import runnable  # noqa: PLC0415

    now = timezone.now()
    thread = ThreadRow.objects.create(graph=GRAPH, owner=user, has_state=True)
    graph_input = {"n": 0, "target": checkpoints - 2}
    run = Run.objects.create(
        thread=thread,
        graph=GRAPH,
        status=Run.Status.SUCCESS,
        input=graph_input,
        config={"recursion_limit": checkpoints + 10, "durability": "async"},
        created_by=user,
        started_at=now,
        attempt=1,
    )
    config = {
        "configurable": {"thread_id": thread.thread_id, "studio_user": "bench"},
        "metadata": {"run_id": run.run_id, "graph_id": GRAPH, "studio_user": "bench"},
        "run_id": run.run_id,
        "recursion_limit": checkpoints + 10,
    }
    rows = [
        RunEvent(
            run=run,
            thread=thread,
            kind="run.status",
            payload={"status": "running", "attempt": 1},
        )
    ]
    graph = runnable(GRAPH)
    for event in graph.stream_events(graph_input, config, durability="async"):
        record = run_log.as_record(event)
        if record is not None:
            rows.append(
                RunEvent(run=run, thread=thread, kind=record[0], payload=record[1])
            )
    rows.append(
        RunEvent(
            run=run,
            thread=thread,
            kind="run.status",
            payload={"status": "success", "error": None, "checkpointed": True},
        )
    )
    RunEvent.objects.bulk_create(rows, batch_size=2000)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now())
    saver = graph.checkpointer
    listed = {"configurable": {"thread_id": thread.thread_id, "checkpoint_ns": ""}}
    ids = [item.config["configurable"]["checkpoint_id"] for item in saver.list(listed)]
    if len(ids) != checkpoints:
        raise RuntimeError(f"expected {checkpoints} checkpoints, found {len(ids)}")
    return Thread(thread.thread_id, len(ids), ids[len(ids) // 2], len(rows), ids[0])


# --- pages ------------------------------------------------------------------------------


def page_table(args: Any, user: Any) -> Table:
    from django.test import Client  # noqa: PLC0415

    table = Table(
        f"Thread pages: full GET through Django, {SHORT} vs. {LONG:,} checkpoints "
        "(ratio = long / short; lower is better)",
        ("page", f"{SHORT} ckpts ms", f"{LONG:,} ckpts ms", "ratio", "target"),
    )
    wanted = [name for name in PAGE_WORKLOADS if selected(args, name)]
    if not wanted:
        return table
    started = time.perf_counter()
    short = make_thread(user, SHORT)
    long = make_thread(user, LONG)
    table.note(
        f"set-up {time.perf_counter() - started:.1f} s: {short.checkpoints:,} and "
        f"{long.checkpoints:,} checkpoints (durability=async), {short.events:,} and "
        f"{long.events:,} run events"
    )
    client = Client()
    client.force_login(user)

    def urls(thread: Thread) -> dict[str, tuple[str, dict[str, str]]]:
        base = f"/threads/{thread.thread_id}/"
        return {
            "thread page": (base, {}),
            "timeline, older page (htmx)": (
                f"{base}?before={thread.middle}",
                {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "timeline"},
            ),
            "step page, middle of the history": (
                f"{base}checkpoints/{thread.middle}/",
                {},
            ),
            "compare, middle vs. newest step": (
                f"{base}compare/?a={thread.middle}&b={thread.newest}",
                {},
            ),
            "history API, 20 items": (
                f"/api/threads/{thread.thread_id}/history",
                {"post": '{"limit": 20}'},
            ),
            # not a thread: the short column draws 10 nodes, the long one 200
            "graph page, 200 vs. 10 nodes": (
                f"/graphs/bench_chain_{10 if thread.checkpoints == SHORT else 200}/",
                {},
            ),
        }

    def preparer(url: str, headers: dict[str, str]) -> Callable[[], Any]:
        @contextmanager
        def prepare() -> Iterator[Callable[[], object]]:
            def run() -> object:
                if "post" in headers:
                    response = client.post(
                        url, headers["post"], content_type="application/json"
                    )
                else:
                    response = client.get(url, **headers)
                if response.status_code != 200:
                    raise RuntimeError(f"GET {url}: {response.status_code}")
                return response

            yield run

        return prepare

    if args.profile:
        name = next((n for n in PAGE_WORKLOADS if args.profile in n), None)
        if name is None:
            raise SystemExit(f"no page workload matches {args.profile!r}; see --list")
        print(f"cProfile: {name}, {LONG:,} checkpoints")
        profile(preparer(*urls(long)[name]), runs=5, top=args.top)
        return table
    for name in wanted:
        if name.startswith("graph page") and shutil.which("dot") is None:
            table.note(
                f"skipped {name}: Graphviz's dot is not installed (`make apt-run` "
                "installs it; the page answers 503 without it)"
            )
            continue
        variants = [
            (str(thread.checkpoints), preparer(*urls(thread)[name]))
            for thread in (short, long)
        ]
        try:
            stats = measure(variants, args.repeat, mem_repeat=0)
        except Exception as exc:
            table.note(f"FAILED {name}: {type(exc).__name__}: {exc}")
            args.failures.append((name, repr(exc)))
            continue
        a, b = stats[str(SHORT)].time, stats[str(LONG)].time
        ratio = b / a
        table.add(
            name,
            fmt_ms(a),
            fmt_ms(b),
            fmt_ratio(ratio),
            verdict(ratio, TARGET) if name in TARGETED else "",
        )
    if "timeline, older page (htmx)" in wanted:
        table.note(
            "older page: ?before= the history's middle checkpoint; the short thread has "
            f"{SHORT // 2} rows below it, the long one a full page"
        )
    if "step page, middle of the history" in wanted:
        table.note(
            "step page: its waterfall finds the step's events by the indexed "
            "RunEvent.checkpoint_id (it read JSON back from the end of the run log: 1.98x)"
        )
    if "graph page, 200 vs. 10 nodes" in wanted:
        table.note(
            "graph page: a chain of 200 nodes vs. 10 (columns: 10 and 200 nodes); "
            "dot runs once per drawing (the first, untimed round), then the SVG is cached"
        )
    return table


# --- latency ----------------------------------------------------------------------------


def latency_table(args: Any, user: Any, redis_url: str) -> Table:
    table = Table(
        f"Live events: worker appends a RunEvent -> WebSocket client has the fragment "
        f"({EVENTS} events, one at a time)",
        ("channel layer", "median ms", "p95 ms", "max ms"),
    )
    layers: dict[str, dict[str, Any] | None] = {
        LATENCY_WORKLOADS[0]: {"BACKEND": "studio.layers.EmbeddedChannelLayer"},
        LATENCY_WORKLOADS[1]: {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": "bench"},
        }
        if redis_url
        else None,
    }
    for name, layer in layers.items():
        if not selected(args, name):
            continue
        if layer is None:
            table.note(f"skipped {name}: set REDIS_URL to measure it")
            continue
        times = attempt(table, args, name, event_latencies, user, layer, EVENTS)
        if times is None:
            continue
        ordered = sorted(times)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        table.add(
            name.removeprefix("event latency, "),
            fmt_ms(statistics.median(times)),
            fmt_ms(p95),
            fmt_ms(ordered[-1]),
        )
    return table


def event_latencies(user: Any, layer: dict[str, Any], count: int) -> list[float]:
    from asgiref.sync import sync_to_async  # noqa: PLC0415
    from channels.testing import WebsocketCommunicator  # noqa: PLC0415
    from django.test import Client, override_settings  # noqa: PLC0415

    from studio.asgi import application  # noqa: PLC0415
    from studio.models import Run, Thread  # noqa: PLC0415
    from studio.services import run_log  # noqa: PLC0415

    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    thread = Thread.objects.create(graph=GRAPH, owner=user)
    run = Run.objects.create(thread=thread, graph=GRAPH)
    warmup = 20
    sent: list[float] = []
    received = threading.Event()
    failure: list[BaseException] = []

    def worker() -> None:  # like the embedded worker: a plain thread
        try:
            for i in range(warmup + count):
                received.clear()
                sent.append(time.perf_counter())
                run_log.append(run, "task.end", {"node": "step", "step": i, "ns": []})
                if not received.wait(10):
                    raise TimeoutError(f"event {i} did not arrive within 10 s")
        except BaseException as exc:
            failure.append(exc)
        finally:
            from django.db import connection  # noqa: PLC0415

            connection.close()

    async def client_side() -> list[float]:
        communicator = WebsocketCommunicator(
            application,
            f"/ws/threads/{thread.thread_id}/",
            headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)],
        )
        connected, _ = await communicator.connect()
        if not connected:
            raise RuntimeError("the socket was refused")
        producer = threading.Thread(target=worker, name="bench-worker")
        producer.start()
        times: list[float] = []
        try:
            for i in range(warmup + count):
                fragment = await communicator.receive_from(timeout=10)
                arrived = time.perf_counter()
                if 'data-event-id="' not in fragment:
                    raise RuntimeError(f"unexpected message: {fragment[:200]}")
                if i >= warmup:
                    times.append(arrived - sent[i])
                received.set()
        finally:
            await sync_to_async(producer.join)()
            await communicator.disconnect()
        if failure:
            raise failure[0]
        return times

    with override_settings(CHANNEL_LAYERS={"default": layer}):
        if "redis" in layer["BACKEND"]:
            _check_redis(layer["CONFIG"]["hosts"][0])
        return asyncio.run(client_side())


def _check_redis(url: str) -> None:
    import redis  # noqa: PLC0415

    connection = redis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        connection.ping()
    except redis.RedisError as exc:
        raise Skip(f"Redis unreachable at {url} ({exc})") from exc
    finally:
        connection.close()


# --- main -------------------------------------------------------------------------------


def main() -> None:
    args = parse_args(__doc__ or "", [*PAGE_WORKLOADS, *LATENCY_WORKLOADS])
    with tempfile.TemporaryDirectory(prefix="bench-studio-") as tmp:
        redis_url = setup_django(Path(tmp))
        from django import get_version  # noqa: PLC0415
        from django.contrib.auth.models import User  # noqa: PLC0415

        print(
            f"studio pages: {args.repeat} interleaved rounds, medians; Python "
            f"{sys.version.split()[0]}, Django {get_version()}, SQLite database and "
            "checkpointer"
        )
        print()
        user = User.objects.create_user("bench", password="x")
        page_table(args, user).print()
        if args.profile:
            return
        print()
        latency_table(args, user, redis_url).print()
        from studio.services.saver import reset_saver  # noqa: PLC0415

        reset_saver()
    finish(args)


if __name__ == "__main__":
    main()

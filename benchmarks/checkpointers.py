"""Checkpointers vs. LangGraph's own savers (issue 4): SQLite and Postgres, as ratios.

    python -m benchmarks.checkpointers [--repeat N] [--only NAME] [--profile NAME] [--list]

Each side uses its own library's matching saver (``engine.checkpoint.sqlite.SqliteSaver`` vs.
``langgraph.checkpoint.sqlite.SqliteSaver``, likewise for Postgres), each on its own temporary
SQLite file or its own freshly created Postgres database (dropped at the end). A workload whose
engine saver does not exist yet, or that needs an unreachable Postgres, is skipped with a note.
Postgres: ``BENCH_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``), a role
allowed to create databases.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
from psycopg.conninfo import make_conninfo

from benchmarks._harness import (
    COMPARE_HEADERS,
    ENGINE,
    LANGGRAPH,
    Lib,
    Preparer,
    RunFn,
    Skip,
    Table,
    add_geomean,
    attempt,
    finish,
    fmt_bytes,
    fmt_ms,
    fmt_ratio,
    libraries,
    measure,
    parse_args,
    profile,
    selected,
    verdict,
    version_line,
)
from benchmarks.engine_core import (
    Runner,
    build_fanout,
    build_loop,
    loop_run,
)
from tests._support.pg_round_trips import RoundTripRelay

LOOP_STEPS = 200
FANOUT_TASKS = 200
INTERRUPTS = 200
HISTORY_CHECKPOINTS = 1_000
BIG_ITEMS = 5_000
BIG_STEPS = 100
MESSAGE_STEPS = 200
LONG_MESSAGE_STEPS = 1_000
"""The stored-bytes table also measures a longer thread: a database's fixed costs
per table (a free-space map, index root pages; ~0.5 KiB a step over 200 steps)
weigh less there, and a store that rewrites the list grows with its length."""
# Message text: 30 words drawn (seeded by the step) from common English words, ~150 characters:
# varied like real text, so a store's compression (Postgres TOAST) gets no unrealistic help
# from one sentence repeated in every message.
_WORD_TEXT = (
    "the of and to in is you that it he was for on are as with his they at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her "
    "would make like him into time has look two more write go see number no way could people "
    "my than first water been call who oil its now find long down day did get come made may "
    "part model answer tool search result order ticket refund customer account shipping"
)
WORDS = _WORD_TEXT.split()

TARGET_TIME = (
    1 / 4
)  # every checkpointed workload: at most a quarter of LangGraph's time
TARGET_MEM = 1 / 2  # and at most half of its peak Python memory
TARGET_BYTES = 1 / 10  # stored bytes per step of a growing message list: 10x smaller
TARGET_TRIPS = 1.0  # Postgres, default durability: at most one round trip per step

PG_DSN = os.environ.get("BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


# --- opening savers -----------------------------------------------------------------------


def _setup(saver: Any) -> Any:
    if callable(getattr(saver, "setup", None)):
        saver.setup()
    return saver


@contextmanager
def sqlite_saver(lib: Lib, path: Path) -> Iterator[Any]:
    cls = lib.get("checkpoint.sqlite", "SqliteSaver")
    if hasattr(cls, "from_conn_string"):
        # LangGraph's saver keeps SQLite's FULL sync; the engine's defaults to
        # NORMAL (BENCH_SQLITE_SYNC=FULL compares at the same durability)
        level = os.environ.get("BENCH_SQLITE_SYNC")
        extra = {"synchronous": level} if level and lib.name == ENGINE else {}
        with cls.from_conn_string(str(path), **extra) as saver:
            yield _setup(saver)
    else:
        conn = sqlite3.connect(str(path), check_same_thread=False)
        try:
            yield _setup(cls(conn))
        finally:
            conn.close()


@contextmanager
def pg_database(label: str) -> Iterator[str]:
    """A fresh database for one side, dropped on exit; yields its conninfo."""
    name = f"bench_{label}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        admin = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        raise Skip(
            f"Postgres unreachable at BENCH_PG_DSN={PG_DSN} ({exc})".strip()
        ) from exc
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_conninfo(PG_DSN, dbname=name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def postgres_saver(lib: Lib, conninfo: str) -> Iterator[Any]:
    cls = lib.get("checkpoint.postgres", "PostgresSaver")
    if hasattr(cls, "from_conn_string"):
        with cls.from_conn_string(conninfo) as saver:
            yield _setup(saver)
    else:
        with psycopg.Connection.connect(conninfo, autocommit=True) as conn:
            yield _setup(cls(conn))


@contextmanager
def backend(
    lib: Lib, kind: str, label: str = ""
) -> Iterator[tuple[Any, Callable[[], tuple[int, int]]]]:
    """Open ``lib``'s saver of ``kind`` ("sqlite" or "postgres") on a fresh store; yields the
    saver and a function returning the store's size in bytes (see :func:`stored_bytes`)."""
    if kind == "sqlite":
        lib.get("checkpoint.sqlite", "SqliteSaver")  # skip before creating anything
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
            path = Path(tmp) / f"{lib.name}.sqlite"
            with sqlite_saver(lib, path) as saver:
                yield saver, lambda: sqlite_bytes(path)
    elif kind == "postgres":
        lib.get("checkpoint.postgres", "PostgresSaver")
        with (
            pg_database(f"{lib.name}{label}") as conninfo,
            postgres_saver(lib, conninfo) as saver,
        ):
            yield saver, lambda: postgres_bytes(conninfo)
    elif kind == "postgres counted":  # through a relay counting round trips
        lib.get("checkpoint.postgres", "PostgresSaver")
        with (
            pg_database(f"{lib.name}{label}") as conninfo,
            RoundTripRelay(conninfo) as relay,
            postgres_saver(lib, relay.dsn) as saver,
        ):
            RELAYS[lib.name] = relay
            try:
                yield saver, lambda: postgres_bytes(conninfo)
            finally:
                RELAYS.pop(lib.name, None)
    else:
        raise ValueError(kind)


RELAYS: dict[str, RoundTripRelay] = {}
"""The relay of each library's ``postgres counted`` store while it is open."""


# --- measuring stored bytes ---------------------------------------------------------------


def sqlite_bytes(path: Path) -> tuple[int, int]:
    """(payload, pages): the bytes of every column of every row of every table (a blob's or
    text's length in bytes), and the database's used pages (WAL checkpointed first)."""
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        payload = 0
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            if not cols:
                continue
            expr = " + ".join(f'coalesce(length(CAST("{c}" AS BLOB)), 0)' for c in cols)
            payload += conn.execute(
                f'SELECT coalesce(sum({expr}), 0) FROM "{table}"'
            ).fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        used = (
            conn.execute("PRAGMA page_count").fetchone()[0]
            - conn.execute("PRAGMA freelist_count").fetchone()[0]
        )
        return payload, used * page_size
    finally:
        conn.close()


def postgres_bytes(conninfo: str) -> tuple[int, int]:
    """(payload, relations): the sum of pg_column_size of every row of every user table, and
    pg_total_relation_size (heap + TOAST + indexes) of those tables."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables "
            "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        payload = relations = 0
        for (table,) in tables:
            conn.execute(f"ANALYZE {table}")
            payload += conn.execute(
                f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t"
            ).fetchone()[0]
            relations += conn.execute(
                "SELECT pg_total_relation_size(%s::regclass)", (table,)
            ).fetchone()[0]
        return int(payload), int(relations)


# --- graphs that only this file needs -----------------------------------------------------


class AskState(TypedDict, total=False):
    n: int
    limit: int
    answer: Any


def build_ask(lib: Lib) -> Any:
    """One node asking a human (``interrupt``) each iteration; resumed ``limit`` times."""
    interrupt, end = lib.interrupt, lib.END

    def ask(state: AskState) -> dict[str, Any]:
        answer = interrupt({"question": state["n"]})
        return {"n": state["n"] + 1, "answer": answer}

    def route(state: AskState) -> str:
        return "ask" if state["n"] < state["limit"] else end

    builder = lib.StateGraph(AskState)
    builder.add_node("ask", ask)
    builder.add_edge(lib.START, "ask")
    builder.add_conditional_edges("ask", route)
    return builder


def build_chat(lib: Lib) -> Any:
    """A loop that appends one message per step to an ``add_messages`` list."""
    # functional form: the reducer is the library's own, a local the class form (with
    # postponed annotations) could not resolve
    state = TypedDict(  # noqa: UP013
        "ChatState",
        {"messages": Annotated[list[Any], lib.add_messages], "n": int, "limit": int},
        total=False,
    )
    end = lib.END

    def reply(s: Any) -> dict[str, Any]:
        n = s["n"] + 1
        text = f"Reply {n}: " + " ".join(random.Random(n).choices(WORDS, k=30)) + "."
        return {"n": n, "messages": [{"role": "assistant", "content": text}]}

    def route(s: Any) -> str:
        return "reply" if s["n"] < s["limit"] else end

    builder = lib.StateGraph(state)
    builder.add_node("reply", reply)
    builder.add_edge(lib.START, "reply")
    builder.add_conditional_edges("reply", route)
    return builder


# --- workloads -------------------------------------------------------------------------------


def loop_prep(kind: str, steps: int, items: int = 0) -> Callable[[Lib], Preparer]:
    def make(lib: Lib) -> Preparer:
        @contextmanager
        def prepare() -> Iterator[RunFn]:
            with backend(lib, kind) as (saver, _size):
                yield loop_run(lib, saver, steps, items)

        return prepare

    return make


def fanout_prep(kind: str) -> Callable[[Lib], Preparer]:
    def make(lib: Lib) -> Preparer:
        @contextmanager
        def prepare() -> Iterator[RunFn]:
            with backend(lib, kind) as (saver, _size):
                runner = Runner(lib, build_fanout(lib), saver)
                expected = sum(i * 2 for i in range(FANOUT_TASKS))

                def run() -> None:
                    out = runner.invoke({"tasks": FANOUT_TASKS, "results": []})
                    assert out["total"] == expected, out

                yield run

        return prepare

    return make


def interrupt_prep(kind: str) -> Callable[[Lib], Preparer]:
    def make(lib: Lib) -> Preparer:
        @contextmanager
        def prepare() -> Iterator[RunFn]:
            with backend(lib, kind) as (saver, _size):
                runner = Runner(lib, build_ask(lib), saver)
                command = lib.Command

                def run() -> None:
                    config = runner.config()
                    runner.graph.invoke({"n": 0, "limit": INTERRUPTS}, config)
                    for i in range(INTERRUPTS):
                        out = runner.graph.invoke(command(resume=i), config)
                    assert out["n"] == INTERRUPTS and out["answer"] == INTERRUPTS - 1, (
                        out
                    )

                yield run

        return prepare

    return make


@contextmanager
def async_saver(lib: Lib, kind: str) -> Iterator[tuple[Any, asyncio.AbstractEventLoop]]:
    """``lib``'s ``AsyncSqliteSaver`` on a fresh file, or its ``AsyncPostgresSaver`` on
    a fresh database (through the counting relay for ``postgres counted``), open on an
    event loop of its own; yields both."""
    if kind == "sqlite":
        cls = lib.get("checkpoint.sqlite.aio", "AsyncSqliteSaver")
        loop = asyncio.new_event_loop()
        try:
            with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
                opened = AsyncExitStack()
                path = str(Path(tmp) / f"{lib.name}.sqlite")
                saver = loop.run_until_complete(
                    opened.enter_async_context(cls.from_conn_string(path))
                )
                loop.run_until_complete(saver.setup())
                try:
                    yield saver, loop
                finally:
                    loop.run_until_complete(opened.aclose())
        finally:
            loop.close()
        return
    cls = lib.get("checkpoint.postgres.aio", "AsyncPostgresSaver")
    loop = asyncio.new_event_loop()
    try:
        with (
            pg_database(f"{lib.name}async") as conninfo,
            RoundTripRelay(conninfo)
            if kind == "postgres counted"
            else nullcontext() as relay,
        ):
            opened = AsyncExitStack()
            saver = loop.run_until_complete(
                opened.enter_async_context(
                    cls.from_conn_string(relay.dsn if relay else conninfo)
                )
            )
            loop.run_until_complete(saver.setup())
            if relay is not None:
                RELAYS[lib.name] = relay
            try:
                yield saver, loop
            finally:
                RELAYS.pop(lib.name, None)
                loop.run_until_complete(opened.aclose())
    finally:
        loop.close()


def ainterrupt_prep(kind: str) -> Callable[[Lib], Preparer]:
    """``interrupt_prep`` through ``ainvoke`` and the library's async saver
    (``AsyncSqliteSaver``, ``AsyncPostgresSaver``: what an asyncio server runs)."""

    def make(lib: Lib) -> Preparer:
        @contextmanager
        def prepare() -> Iterator[RunFn]:
            with async_saver(lib, kind) as (saver, loop):
                runner = Runner(lib, build_ask(lib), saver)
                command = lib.Command

                async def cycle() -> None:
                    config = runner.config()
                    await runner.graph.ainvoke({"n": 0, "limit": INTERRUPTS}, config)
                    for i in range(INTERRUPTS):
                        out = await runner.graph.ainvoke(command(resume=i), config)
                    assert out["n"] == INTERRUPTS and out["answer"] == INTERRUPTS - 1, (
                        out
                    )

                def run() -> None:
                    loop.run_until_complete(cycle())

                yield run

        return prepare

    return make


def history_prep(kind: str) -> Callable[[Lib], Preparer]:
    def make(lib: Lib) -> Preparer:
        @contextmanager
        def prepare() -> Iterator[RunFn]:
            with backend(lib, kind) as (saver, _size):
                # a loop of N iterations leaves N + 2 checkpoints (input, start, N steps)
                steps = HISTORY_CHECKPOINTS - 2
                runner = Runner(lib, build_loop(lib), saver, recursion_limit=steps + 10)
                config = runner.config()
                runner.graph.invoke({"n": 0, "limit": steps}, config)
                thread = {
                    "configurable": {"thread_id": config["configurable"]["thread_id"]}
                }
                count = sum(1 for _ in runner.graph.get_state_history(thread))
                if abs(count - HISTORY_CHECKPOINTS) > 2:
                    raise AssertionError(f"{lib.name}: {count} checkpoints, not ~1000")

                def run() -> None:
                    # what a timeline reads of each checkpoint: its id, step and next nodes
                    rows = [
                        (
                            s.config["configurable"]["checkpoint_id"],
                            s.metadata["step"],
                            s.next,
                        )
                        for s in runner.graph.get_state_history(thread)
                    ]
                    assert len(rows) == count

                yield run

        return prepare

    return make


def chat_prep(kind: str) -> Callable[[Lib], Preparer]:
    def make(lib: Lib) -> Preparer:
        @contextmanager
        def prepare() -> Iterator[RunFn]:
            with backend(lib, kind) as (saver, _size):
                runner = Runner(
                    lib, build_chat(lib), saver, recursion_limit=MESSAGE_STEPS + 10
                )

                def run() -> None:
                    out = runner.invoke(
                        {"n": 0, "limit": MESSAGE_STEPS, "messages": []}
                    )
                    assert len(out["messages"]) == MESSAGE_STEPS

                yield run

        return prepare

    return make


@dataclass
class Workload:
    name: str
    kind: str
    """``sqlite`` or ``postgres``."""
    make: Callable[[str], Callable[[Lib], Preparer]]
    """``make(kind)``: the workload's preparer factory on that backend."""
    per: tuple[int, str]
    """What the round-trip table divides by: (count, unit) of one run."""

    def preparer(self, lib: Lib, kind: str | None = None) -> Preparer:
        return self.make(kind or self.kind)(lib)


def workloads() -> list[Workload]:
    shapes: list[
        tuple[str, Callable[[str], Callable[[Lib], Preparer]], tuple[int, str]]
    ]
    shapes = [
        (
            f"loop {LOOP_STEPS} steps",
            lambda kind: loop_prep(kind, LOOP_STEPS),
            (LOOP_STEPS, "step"),
        ),
        (f"send fan-out {FANOUT_TASKS} tasks", fanout_prep, (3, "step")),
        (f"interrupt/resume x{INTERRUPTS}", interrupt_prep, (INTERRUPTS + 1, "invoke")),
        (
            f"history of {HISTORY_CHECKPOINTS} checkpoints",
            history_prep,
            (HISTORY_CHECKPOINTS, "checkpoint"),
        ),
        (
            f"loop {BIG_STEPS} steps, {BIG_ITEMS} items",
            lambda kind: loop_prep(kind, BIG_STEPS, BIG_ITEMS),
            (BIG_STEPS, "step"),
        ),
        (f"messages loop {MESSAGE_STEPS} steps", chat_prep, (MESSAGE_STEPS, "step")),
    ]
    return [
        Workload(f"{kind} {name}", kind, make, per)
        for kind in ("sqlite", "postgres")
        for name, make, per in shapes
    ] + [
        Workload(
            f"{kind} interrupt/resume x{INTERRUPTS}, ainvoke",
            kind,
            ainterrupt_prep,
            (INTERRUPTS + 1, "invoke"),
        )
        for kind in ("sqlite", "postgres")
    ]


def compare_row(
    table: Table, w: Workload, libs: list[Lib], args: Any, ratios: list[float]
) -> None:
    """Measure one workload on every library; its row, with both targets."""
    if not selected(args, w.name):
        return
    variants = [(lib.name, w.preparer(lib)) for lib in libs]
    stats = attempt(
        table, args, w.name, measure, variants, args.repeat, args.mem_repeat
    )
    if stats is None:
        return
    eng, lg = stats[ENGINE], stats.get(LANGGRAPH)
    t_ratio = eng.time / lg.time if lg else math.nan
    m_ratio = eng.peak / lg.peak if lg and lg.peak else math.nan
    if math.isfinite(t_ratio):
        ratios.append(t_ratio)
    table.add(
        w.name,
        fmt_ms(eng.time),
        fmt_ms(lg.time) if lg else "-",
        fmt_ratio(t_ratio),
        verdict(t_ratio, TARGET_TIME),
        fmt_bytes(eng.peak),
        fmt_bytes(lg.peak) if lg else "-",
        fmt_ratio(m_ratio),
        verdict(m_ratio, TARGET_MEM),
    )


# --- round trips ----------------------------------------------------------------------------


def round_trips(w: Workload, lib: Lib) -> int:
    """Round trips of one run of ``w`` (after a warm-up run), counted on the wire."""
    with w.preparer(lib, "postgres counted")() as run:
        run()
        relay = RELAYS[lib.name]
        relay.reset()
        run()
        return relay.round_trips


def round_trips_table(items: list[Workload], libs: list[Lib], args: Any) -> Table:
    table = Table(
        "\nRound trips to Postgres per run, counted on the wire, default durability "
        "(a client send after a server reply)",
        [
            "workload",
            "engine",
            "langgraph",
            "per",
            "engine per",
            "langgraph per",
            "target",
        ],
    )
    for w in items:
        name = f"{w.name} round trips"
        if w.kind != "postgres" or not selected(args, name):
            continue
        counts = attempt(
            table,
            args,
            name,
            lambda w=w: {lib.name: round_trips(w, lib) for lib in libs},
        )
        if counts is None:
            continue
        count, unit = w.per
        eng, lg = counts[ENGINE], counts.get(LANGGRAPH)
        table.add(
            w.name,
            eng,
            "-" if lg is None else lg,
            f"{count:,} {unit}s",
            f"{eng / count:.3f}",
            "-" if lg is None else f"{lg / count:.3f}",
            (
                f"<={TARGET_TRIPS:.2f} "
                + ("ok" if eng / count <= TARGET_TRIPS else "MISS")
            )
            if unit == "step" and "fan-out" not in w.name
            else "",
        )
    return table


# --- stored bytes ---------------------------------------------------------------------------


def bytes_per_step(lib: Lib, kind: str, steps: int) -> tuple[float, float]:
    """Run the message loop once on a fresh store; (payload, pages) bytes added per step."""
    with backend(lib, kind, label="bytes") as (saver, size):
        before = size()
        runner = Runner(lib, build_chat(lib), saver, recursion_limit=steps + 10)
        runner.invoke({"n": 0, "limit": steps, "messages": []})
        if hasattr(saver, "flush"):
            saver.flush()
        after = size()
    return (after[0] - before[0]) / steps, (after[1] - before[1]) / steps


def stored_bytes_table(libs: list[Lib], args: Any) -> Table:
    table = Table(
        "\nStored bytes per step, a loop appending one message a step "
        "(ratio = engine / langgraph)",
        [
            "backend",
            "steps",
            "measure",
            "engine B/step",
            "langgraph B/step",
            "ratio",
            "target",
        ],
    )
    for kind in ("sqlite", "postgres"):
        name = f"{kind} stored bytes"
        if not selected(args, name):
            continue
        for steps in (MESSAGE_STEPS, LONG_MESSAGE_STEPS):
            per = attempt(table, args, name, _bytes_per_step_of, libs, kind, steps)
            if per is None:
                break
            for i, what in enumerate(("payload", DISK_MEASURE[kind])):
                eng = per[ENGINE][i]
                lg = per[LANGGRAPH][i] if LANGGRAPH in per else float("nan")
                ratio = eng / lg if lg else float("nan")
                table.add(
                    kind if i == 0 and steps == MESSAGE_STEPS else "",
                    f"{steps:,}" if i == 0 else "",
                    what,
                    fmt_bytes(eng),
                    fmt_bytes(lg),
                    fmt_ratio(ratio),
                    verdict(ratio, TARGET_BYTES),
                )
    return table


DISK_MEASURE = {"sqlite": "used pages", "postgres": "relation size"}


def _bytes_per_step_of(
    libs: list[Lib], kind: str, steps: int
) -> dict[str, tuple[float, float]]:
    return {lib.name: bytes_per_step(lib, kind, steps) for lib in libs}


def main() -> None:
    items = workloads()
    names = [w.name for w in items]
    names += [f"{w.name} round trips" for w in items if w.kind == "postgres"]
    names += ["sqlite stored bytes", "postgres stored bytes"]
    args = parse_args(__doc__ or "", names)
    libs = libraries()
    engine = libs[0]

    if args.profile:
        match = [w for w in items if args.profile in w.name]
        if not match:
            raise SystemExit(f"no workload matches {args.profile!r}; see --list")
        print(f"cProfile, engine side: {match[0].name}")
        profile(match[0].preparer(engine), runs=3, top=args.top)
        return

    print(
        f"checkpointers: engine vs. LangGraph savers, {args.repeat} interleaved rounds, medians"
    )
    print(version_line(libs))
    print()
    table = Table(
        "Time and peak Python memory per run (ratio = engine / langgraph; lower is better)",
        [*COMPARE_HEADERS, "mem target"],
    )
    ratios: list[float] = []
    for w in items:
        compare_row(table, w, libs, args, ratios)
    add_geomean(table, "geometric mean", ratios, None)
    table.print()
    round_trips_table(items, libs, args).print()
    stored_bytes_table(libs, args).print()
    finish(args)


if __name__ == "__main__":
    main()

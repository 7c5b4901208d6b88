"""Engine core vs. LangGraph 1.2 (issue 3): the same graphs on both, interleaved, as ratios.

    python -m benchmarks.engine_core [--repeat N] [--only NAME] [--profile NAME] [--list]

Every graph is built by one function taking the library namespace (``engine.*`` or
``langgraph.*``), so both sides run exactly the same program. Each workload runs once without a
checkpointer and once with each library's own InMemorySaver; the targets (issue 17) apply to
every row: time at most 0.20x, geometric mean of all rows at most 0.15x, peak memory at most 0.50x.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from benchmarks._harness import (
    COMPARE_HEADERS,
    ENGINE,
    LANGGRAPH,
    Lib,
    Preparer,
    Renewing,
    RunFn,
    Table,
    add_geomean,
    compare,
    finish,
    fmt_ratio,
    libraries,
    parse_args,
    profile,
    sample,
    selected,
    verdict,
    version_line,
)

CHAIN_NODES = 50
CHAIN_INVOKES = 20
LOOP_ITERATIONS = 500
FANOUT_TASKS = 1_000
BIG_ITEMS = 5_000
BIG_STEPS = 100
HISTORY_STEPS = 1_000
FLAT_SIZES = (50, 50_000)
FLAT_STEPS = 100

TARGET_EACH = 0.20  # issue 17: at most a fifth of LangGraph's time on every workload...
TARGET_GEOMEAN = 0.15  # ...at most 0.15x on their geometric mean...
TARGET_MEM = 0.50  # ...and at most half its peak memory, with or without InMemorySaver


# --- state schemas (shared by both libraries) --------------------------------------------------


class ChainState(TypedDict):
    x: int


class LoopState(TypedDict, total=False):
    n: int
    limit: int
    items: list[
        dict[str, Any]
    ]  # never written by a node: the "untouched" part of the state


class FanState(TypedDict, total=False):
    tasks: int
    results: Annotated[list[int], operator.add]
    total: int


# --- graphs, written once, parametrized by the library -----------------------------------------


def bump(state: ChainState) -> dict[str, Any]:
    return {"x": state["x"] + 1}


def build_chain(lib: Lib, nodes: int = CHAIN_NODES) -> Any:
    builder = lib.StateGraph(ChainState)
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        builder.add_node(name, bump)
    builder.add_edge(lib.START, names[0])
    for a, b in itertools.pairwise(names):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], lib.END)
    return builder


def tick(state: LoopState) -> dict[str, Any]:
    return {"n": state["n"] + 1}


def build_loop(lib: Lib) -> Any:
    """One node looping on itself through a conditional edge until ``n`` reaches ``limit``."""
    end = lib.END

    def route(state: LoopState) -> str:
        return "tick" if state["n"] < state["limit"] else end

    builder = lib.StateGraph(LoopState)
    builder.add_node("tick", tick)
    builder.add_edge(lib.START, "tick")
    builder.add_conditional_edges("tick", route)
    return builder


def work(arg: dict[str, int]) -> dict[str, Any]:
    return {"results": [arg["i"] * 2]}


def collect(state: FanState) -> dict[str, Any]:
    return {"total": sum(state["results"])}


def build_fanout(lib: Lib) -> Any:
    """START -> plan -> N x Send("work") -> collect (fan-in through an operator.add list)."""
    send = lib.Send

    def fan(state: FanState) -> list[Any]:
        return [send("work", {"i": i}) for i in range(state["tasks"])]

    builder = lib.StateGraph(FanState)
    builder.add_node("plan", lambda state: {})
    builder.add_node("work", work)
    builder.add_node("collect", collect)
    builder.add_edge(lib.START, "plan")
    builder.add_conditional_edges("plan", fan, ["work"])
    builder.add_edge("work", "collect")
    builder.add_edge("collect", lib.END)
    return builder


def make_items(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"item number {i}", "tags": ["a", "b"]} for i in range(n)]


# --- runners ---------------------------------------------------------------------------


class Runner:
    """Compiles a builder with or without the library's InMemorySaver and invokes it, on a
    fresh thread each time when checkpointed (so every run does the same work)."""

    _ids = itertools.count()

    def __init__(
        self, lib: Lib, builder: Any, saver: Any = False, recursion_limit: int = 25
    ) -> None:
        """``saver``: False (no checkpointer), True (the library's InMemorySaver) or a saver."""
        self.lib, self.builder, self.renewable = lib, builder, saver is True
        if saver is True:
            saver = lib.get("checkpoint.memory", "InMemorySaver")()
        self.checkpointer = None if saver is False or saver is None else saver
        self.graph = builder.compile(checkpointer=self.checkpointer)
        self.saver = self.checkpointer is not None
        self.recursion_limit = recursion_limit

    def renew(self) -> None:
        """A new InMemorySaver (when the runner made its own): see ``_harness.traced_peak``."""
        if self.renewable:
            self.checkpointer = self.lib.get("checkpoint.memory", "InMemorySaver")()
            self.graph = self.builder.compile(checkpointer=self.checkpointer)

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"recursion_limit": self.recursion_limit}
        if self.saver:
            config["configurable"] = {"thread_id": self.new_thread()}
        return config

    def new_thread(self) -> str:
        return f"t{next(self._ids)}"

    def invoke(self, inp: dict[str, Any]) -> Any:
        return self.graph.invoke(inp, self.config())

    def stream(self, inp: dict[str, Any]) -> Iterator[Any]:
        return self.graph.stream(inp, self.config(), stream_mode="updates")


def chain_prep(lib: Lib, saver: bool) -> Preparer:
    @contextmanager
    def prepare() -> Iterator[RunFn]:
        runner = Runner(lib, build_chain(lib), saver, recursion_limit=CHAIN_NODES + 5)

        def run() -> None:
            for i in range(CHAIN_INVOKES):
                out = runner.invoke({"x": i})
                assert out["x"] == i + CHAIN_NODES, out

        yield Renewing(run, runner.renew)

    return prepare


def loop_run(lib: Lib, saver: Any, steps: int, items: int = 0) -> RunFn:
    """One run of the counter loop: ``steps`` steps, over ``items`` untouched items."""
    runner = Runner(lib, build_loop(lib), saver, recursion_limit=steps + 10)
    inp: dict[str, Any] = {"n": 0, "limit": steps}
    if items:
        inp["items"] = make_items(items)

    def run() -> None:
        out = runner.invoke(inp)
        assert out["n"] == steps, out

    return Renewing(run, runner.renew)


def stream_modes_prep(lib: Lib, saver: bool, steps: int) -> Preparer:
    """The counter loop streamed with two modes at once: ``["updates", "values"]``.

    Chunks are consumed one by one, as a client forwarding them does (keeping them
    all would measure the list of chunks, the same objects on both sides)."""

    @contextmanager
    def prepare() -> Iterator[RunFn]:
        runner = Runner(lib, build_loop(lib), saver, recursion_limit=steps + 10)

        def run() -> None:
            count, last = 0, None
            for chunk in runner.graph.stream(
                {"n": 0, "limit": steps},
                runner.config(),
                stream_mode=["updates", "values"],
            ):
                count, last = count + 1, chunk
            assert last == ("values", {"n": steps, "limit": steps}), last
            assert count == 2 * steps + 1, count

        yield Renewing(run, runner.renew)

    return prepare


def history_prep(lib: Lib, saver: bool) -> Preparer:
    """``get_state_history`` over one thread of ``HISTORY_STEPS`` loop steps, read as a
    timeline does (id, step, next of each checkpoint). The thread is written untimed."""

    @contextmanager
    def prepare() -> Iterator[RunFn]:
        runner = Runner(lib, build_loop(lib), True, recursion_limit=HISTORY_STEPS + 10)
        config = runner.config()
        runner.graph.invoke({"n": 0, "limit": HISTORY_STEPS}, config)

        def run() -> None:
            timeline = [
                (
                    snap.config["configurable"]["checkpoint_id"],
                    snap.metadata["step"],
                    snap.next,
                )
                for snap in runner.graph.get_state_history(config)
            ]
            assert len(timeline) == HISTORY_STEPS + 2, len(timeline)
            assert timeline[0][1:] == (HISTORY_STEPS, ()), timeline[0]

        yield run

    return prepare


def loop_prep(lib: Lib, saver: bool, steps: int, items: int = 0) -> Preparer:
    @contextmanager
    def prepare() -> Iterator[RunFn]:
        yield loop_run(lib, saver, steps, items)

    return prepare


def fanout_prep(lib: Lib, saver: bool) -> Preparer:
    @contextmanager
    def prepare() -> Iterator[RunFn]:
        runner = Runner(lib, build_fanout(lib), saver)
        expected = sum(i * 2 for i in range(FANOUT_TASKS))

        def run() -> None:
            out = runner.invoke({"tasks": FANOUT_TASKS, "results": []})
            assert out["total"] == expected, out

        yield Renewing(run, runner.renew)

    return prepare


def aloop_prep(lib: Lib, saver: bool, steps: int) -> Preparer:
    """The counter loop through ``ainvoke`` on an event loop of its own (what an
    asyncio server runs; the loop's node is a plain function, as most are)."""

    @contextmanager
    def prepare() -> Iterator[RunFn]:
        runner = Runner(lib, build_loop(lib), saver, recursion_limit=steps + 10)
        events = asyncio.new_event_loop()

        def run() -> None:
            out = events.run_until_complete(
                runner.graph.ainvoke({"n": 0, "limit": steps}, runner.config())
            )
            assert out["n"] == steps, out

        try:
            yield Renewing(run, runner.renew)
        finally:
            events.close()

    return prepare


@dataclass
class Workload:
    name: str
    make: Callable[[Lib, bool], Preparer]
    saver: bool

    target: float = TARGET_EACH
    in_geomean: bool = True
    """Counted in the geometric means (the workloads issue 17 names); the
    ``ainvoke`` rows are shown beside them, outside the means."""


def workloads() -> list[Workload]:
    base: list[tuple[str, Callable[[Lib, bool], Preparer]]] = [
        (f"chain{CHAIN_NODES} x{CHAIN_INVOKES} invokes", chain_prep),
        (
            f"loop {LOOP_ITERATIONS} iterations",
            lambda lib, saver: loop_prep(lib, saver, LOOP_ITERATIONS),
        ),
        (f"send fan-out {FANOUT_TASKS} tasks", fanout_prep),
        (
            f"loop {BIG_STEPS} steps, {BIG_ITEMS} items",
            lambda lib, saver: loop_prep(lib, saver, BIG_STEPS, BIG_ITEMS),
        ),
    ]
    base.append(
        (
            f"loop {LOOP_ITERATIONS} stream [updates, values]",
            lambda lib, saver: stream_modes_prep(lib, saver, LOOP_ITERATIONS),
        )
    )
    base.append(
        (
            f"loop {LOOP_ITERATIONS} iterations, ainvoke",
            lambda lib, saver: aloop_prep(lib, saver, LOOP_ITERATIONS),
        )
    )
    out = [
        Workload(name + suffix, make, saver, in_geomean="ainvoke" not in name)
        for saver, suffix in ((False, ""), (True, " +memsaver"))
        for name, make in base
    ]
    out.append(
        Workload(f"get_state_history {HISTORY_STEPS} +memsaver", history_prep, True)
    )
    return out


# --- flatness -------------------------------------------------------------------------------


def step_time_prep(lib: Lib, saver: bool, items: int) -> Callable[[], Any]:
    """A run streams the loop (``stream_mode="updates"``) and returns the median time between
    consecutive steps, so one-time costs (input handling, a first serialization) are left out."""

    @contextmanager
    def prepare() -> Iterator[Callable[[], float]]:
        runner = Runner(lib, build_loop(lib), saver, recursion_limit=FLAT_STEPS + 10)
        inp = {"n": 0, "limit": FLAT_STEPS, "items": make_items(items)}

        def run() -> float:
            stamps = [time.perf_counter() for _ in runner.stream(inp)]
            gaps = [b - a for a, b in itertools.pairwise(stamps[1:])]
            assert len(gaps) >= FLAT_STEPS - 3, len(gaps)
            return statistics.median(gaps)

        yield run

    return prepare


def flatness(libs: list[Lib], args: Any, saver: bool) -> list[str]:
    """Per-step time of the loop over a small vs. a large untouched state, per library."""
    variants = [
        (f"{lib.name}/{size}", step_time_prep(lib, saver, size))
        for lib in libs
        for size in FLAT_SIZES
    ]
    per_step = sample(variants, args.repeat)
    small, big = FLAT_SIZES
    cells = []
    for lib in libs:
        a, b = per_step[f"{lib.name}/{small}"], per_step[f"{lib.name}/{big}"]
        cells += [f"{a * 1e6:.1f}", f"{b * 1e6:.1f}", fmt_ratio(b / a)]
    return cells


def main() -> None:
    items = workloads()
    args = parse_args(__doc__ or "", [w.name for w in items] + ["flatness"])
    libs = libraries()
    engine = libs[0]

    if args.profile:
        match = [w for w in items if args.profile in w.name]
        if not match:
            raise SystemExit(f"no workload matches {args.profile!r}; see --list")
        print(f"cProfile, engine side: {match[0].name}")
        profile(match[0].make(engine, match[0].saver), runs=3, top=args.top)
        return

    print(
        f"engine_core: engine vs. LangGraph, {args.repeat} interleaved rounds, medians"
    )
    print(version_line(libs))
    print()
    table = Table(
        "Time and peak memory per run (ratio = engine / langgraph; lower is better)",
        COMPARE_HEADERS,
    )
    all_ratios: list[float] = []
    for saver in (False, True):
        ratios: list[float] = []
        for w in items:
            if w.saver is not saver:
                continue
            preparers = {lib.name: w.make(lib, saver) for lib in libs}
            stats = compare(
                table,
                w.name,
                preparers,
                args,
                target=w.target,
                ratios=ratios if w.in_geomean else [],
            )
            if stats is not None and LANGGRAPH in stats and stats[LANGGRAPH].peak:
                row = table.rows[-1]
                assert row is not None
                mem = stats[ENGINE].peak / stats[LANGGRAPH].peak
                row[-1] += f" ({verdict(mem, TARGET_MEM)})"
        all_ratios += ratios
        add_geomean(
            table,
            "geometric mean" + (" +memsaver" if saver else " no checkpointer"),
            ratios,
            None,
        )
        table.sep()
    add_geomean(table, "geometric mean, all rows", all_ratios, TARGET_GEOMEAN)
    table.print()

    if selected(args, "flatness"):
        small, big = FLAT_SIZES
        headers = ["flatness (µs per step)"]
        for name in (ENGINE, LANGGRAPH)[: len(libs)]:
            headers += [f"{name} {small}", f"{name} {big}", f"{name} ratio"]
        flat = Table(
            f"\nPer-step time, {FLAT_STEPS}-step loop over a {small}- vs. a {big}-item "
            "untouched state (median gap between streamed steps; ratio = big / small, ~1 = flat)",
            headers,
        )
        for saver in (False, True):
            label = "+memsaver" if saver else "no checkpointer"
            try:
                flat.add(label, *flatness(libs, args, saver))
            except Exception as exc:
                flat.note(f"FAILED flatness {label}: {type(exc).__name__}: {exc}")
                args.failures.append((f"flatness {label}", traceback.format_exc()))
        flat.print()
    finish(args)


if __name__ == "__main__":
    main()

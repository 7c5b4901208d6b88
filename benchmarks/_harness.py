"""Shared helpers for the benchmarks: load a library by prefix, interleave runs, take medians,
tracemalloc peaks and geometric means, and print one clean table.

A workload is measured through *preparers*: a preparer is a zero-argument callable returning a
context manager whose value is the run function. Set-up (building the graph, opening a database)
happens on entering it and is never timed; only calls of the run function are.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import io
import math
import os
import pstats
import statistics
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

RunFn = Callable[[], object]
Preparer = Callable[[], AbstractContextManager[RunFn]]

ENGINE = "engine"
LANGGRAPH = "langgraph"


class Skip(Exception):
    """Raised by a preparer when a workload cannot run here (a saver not written yet...)."""


# --- libraries ------------------------------------------------------------------------------


@dataclass
class Lib:
    """The public names a benchmark needs, imported from ``engine.*`` or ``langgraph.*``."""

    name: str  # the label in tables: "engine" or "langgraph"
    prefix: str  # the package imported from (the same as name, but for self-checks)
    StateGraph: Any
    START: str
    END: str
    Send: Any
    Command: Any
    interrupt: Any
    add_messages: Any
    optional: dict[str, Any] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def get(self, module: str, attr: str) -> Any:
        """``prefix.module.attr`` if importable, else raise Skip naming why."""
        key = f"{module}.{attr}"
        if key not in self.optional and key not in self.missing:
            try:
                mod = importlib.import_module(f"{self.prefix}.{module}")
                self.optional[key] = getattr(mod, attr)
            except ImportError as exc:
                self.missing[key] = f"{type(exc).__name__}: {exc}"
            except AttributeError:
                self.missing[key] = f"{self.name}.{module} has no {attr}"
            except Exception as exc:  # a module half-written by someone else
                self.missing[key] = f"importing it failed: {type(exc).__name__}: {exc}"
        if key in self.missing:
            raise Skip(f"{self.name}.{key} unavailable ({self.missing[key]})")
        return self.optional[key]


def load(prefix: str, name: str | None = None) -> Lib | None:
    """Import the graph API of ``prefix`` ("engine" or "langgraph"); None if not installed."""
    try:
        graph = importlib.import_module(f"{prefix}.graph")
        types = importlib.import_module(f"{prefix}.types")
    except ImportError:
        return None
    return Lib(
        name=name or prefix,
        prefix=prefix,
        StateGraph=graph.StateGraph,
        START=graph.START,
        END=graph.END,
        Send=types.Send,
        Command=types.Command,
        interrupt=types.interrupt,
        add_messages=graph.add_messages,
    )


def libraries() -> list[Lib]:
    libs = [lib for lib in (load(ENGINE), load(LANGGRAPH)) if lib is not None]
    if not libs or libs[0].name != ENGINE:
        sys.exit("error: the engine is not importable; run through benchmarks/run.sh")
    return libs


def version_line(libs: Sequence[Lib]) -> str:
    parts = [f"Python {sys.version.split()[0]}"]
    for dist in ("graph-studio", "langgraph", "langgraph-checkpoint", "langchain-core"):
        with suppress(PackageNotFoundError):
            parts.append(f"{dist} {version(dist)}")
    if len(libs) < 2:
        parts.append("LangGraph NOT installed: engine figures only, no ratios")
    return ", ".join(parts)


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Stats:
    times: list[float] = field(default_factory=list)
    peaks: list[int] = field(default_factory=list)

    @property
    def time(self) -> float:
        return statistics.median(self.times)

    @property
    def peak(self) -> float:
        return statistics.median(self.peaks)


def timed(run: RunFn) -> float:
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


class Renewing:
    """A run with a ``renew`` step that :func:`traced_peak` takes before tracing it."""

    def __init__(self, run: RunFn, renew: Callable[[], None]) -> None:
        self.run, self.renew = run, renew

    def __call__(self) -> object:
        return self.run()


def traced_peak(run: RunFn) -> int:
    """Peak bytes allocated by Python (all threads) during one call, over what was live before.

    A :class:`Renewing` run is renewed first (untraced): a workload that keeps every
    run's thread in one in-memory saver gets a fresh saver there, so the peak is what
    this run allocates and not, now and then, the growth of a table of all earlier
    rounds' values (both libraries keep one: the loop's peak doubled at every 5th round).
    """
    renew = getattr(run, "renew", None)
    if renew is not None:
        renew()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        run()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def measure(
    variants: Sequence[tuple[str, Preparer]],
    repeat: int,
    mem_repeat: int = 1,
    warmup: int = 1,
) -> dict[str, Stats]:
    """Interleave the variants: A B, B A, A B... (the order flips each round so that neither side
    always runs right after the other), ``repeat`` timed rounds after ``warmup`` untimed ones, then
    ``mem_repeat`` rounds under tracemalloc (never timed: tracing slows everything down)."""
    stats = {label: Stats() for label, _ in variants}
    with ExitStack() as stack:
        runs = [(label, stack.enter_context(prepare())) for label, prepare in variants]
        for _ in range(warmup):
            for _label, run in runs:
                run()
        for label, run in _rounds(runs, repeat):
            stats[label].times.append(timed(run))
        for label, run in _rounds(runs, mem_repeat):
            stats[label].peaks.append(traced_peak(run))
    return stats


R = TypeVar("R")


def _rounds(runs: Sequence[tuple[str, R]], rounds: int) -> Iterator[tuple[str, R]]:
    """``rounds`` rounds over ``runs``, the order flipped every other round."""
    for rnd in range(rounds):
        yield from (runs if rnd % 2 == 0 else runs[::-1])


def sample(
    variants: Sequence[
        tuple[str, Callable[[], AbstractContextManager[Callable[[], float]]]]
    ],
    repeat: int,
    warmup: int = 1,
) -> dict[str, float]:
    """Like :func:`measure`, but each run *returns* its figure (e.g. a per-step time it
    measured itself); the median over the interleaved rounds is returned per variant."""
    values: dict[str, list[float]] = {label: [] for label, _ in variants}
    with ExitStack() as stack:
        runs = [(label, stack.enter_context(prepare())) for label, prepare in variants]
        for _ in range(warmup):
            for _label, run in runs:
                run()
        for label, run in _rounds(runs, repeat):
            gc.collect()
            values[label].append(run())
    return {label: statistics.median(v) for label, v in values.items()}


def geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    if not values:
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


@contextmanager
def simple(run: RunFn) -> Iterator[RunFn]:
    """A preparer body for workloads with nothing to open or close."""
    yield run


# --- reporting ------------------------------------------------------------------------------


def fmt_ms(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    ms = seconds * 1000
    return f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def fmt_bytes(n: float) -> str:
    if not math.isfinite(n):
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_ratio(r: float) -> str:
    return "-" if not math.isfinite(r) else f"{r:.3f}" if r < 1 else f"{r:.2f}"


def verdict(ratio: float, target: float | None) -> str:
    if target is None or not math.isfinite(ratio):
        return ""
    return f"<={target:.2f} " + ("ok" if ratio <= target else "MISS")


class Table:
    def __init__(self, title: str, headers: Sequence[str]) -> None:
        self.title = title
        self.headers = list(headers)
        self.rows: list[list[str] | None] = []  # None: a separator line
        self.notes: list[str] = []

    def add(self, *cells: object) -> None:
        self.rows.append(
            [str(c) for c in cells] + [""] * (len(self.headers) - len(cells))
        )

    def sep(self) -> None:
        self.rows.append(None)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def render(self) -> str:
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            for i, cell in enumerate(row or []):
                widths[i] = max(widths[i], len(cell))

        def line(cells: Sequence[str]) -> str:
            out = [cells[0].ljust(widths[0])]
            out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
            return "  ".join(out).rstrip()

        rule = "  ".join("-" * w for w in widths)
        out = io.StringIO()
        out.write(f"{self.title}\n{line(self.headers)}\n{rule}\n")
        for row in self.rows:
            out.write((rule if row is None else line(row)) + "\n")
        for text in self.notes:
            out.write(f"  note: {text}\n")
        return out.getvalue()

    def print(self) -> None:
        if any(row is not None for row in self.rows) or self.notes:
            print(self.render(), end="", flush=True)


COMPARE_HEADERS = (
    "workload",
    "engine ms",
    "langgraph ms",
    "time ratio",
    "target",
    "engine peak",
    "lg peak",
    "mem ratio",
)


def attempt(
    table: Table,
    args: argparse.Namespace,
    name: str,
    run: Callable[..., R],
    *params: Any,
) -> R | None:
    """``run(*params)``; None when it raised ``Skip`` (noted in the table) or failed
    (noted, and recorded in ``args.failures`` so the run exits non-zero)."""
    try:
        return run(*params)
    except Skip as exc:
        table.note(f"skipped {name}: {exc}")
    except Exception as exc:
        table.note(f"FAILED {name}: {type(exc).__name__}: {exc}")
        args.failures.append((name, traceback.format_exc()))
    return None


def compare(
    table: Table,
    name: str,
    preparers: dict[str, Preparer],
    args: argparse.Namespace,
    target: float | None = None,
    ratios: list[float] | None = None,
) -> dict[str, Stats] | None:
    """Measure one workload on every library, add its row, collect its time ratio."""
    if not selected(args, name):
        return None
    stats = attempt(
        table,
        args,
        name,
        measure,
        list(preparers.items()),
        args.repeat,
        args.mem_repeat,
    )
    if stats is None:
        return None
    eng = stats[ENGINE]
    lg = stats.get(LANGGRAPH)
    t_ratio = eng.time / lg.time if lg else math.nan
    m_ratio = eng.peak / lg.peak if lg and lg.peak else math.nan
    if ratios is not None and math.isfinite(t_ratio):
        ratios.append(t_ratio)
    table.add(
        name,
        fmt_ms(eng.time),
        fmt_ms(lg.time) if lg else "-",
        fmt_ratio(t_ratio),
        verdict(t_ratio, target),
        fmt_bytes(eng.peak),
        fmt_bytes(lg.peak) if lg else "-",
        fmt_ratio(m_ratio),
    )
    return stats


def add_geomean(
    table: Table, label: str, ratios: list[float], target: float | None
) -> None:
    if not ratios:
        return
    g = geomean(ratios)
    table.add(label, "", "", fmt_ratio(g), verdict(g, target))


# --- command line and profiling ---------------------------------------------------------


def parse_args(description: str, workloads: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--repeat",
        type=int,
        default=int(os.environ.get("BENCH_REPEAT", "5")),
        help="timed interleaved rounds per workload; the median is reported (default 5, "
        "or $BENCH_REPEAT)",
    )
    parser.add_argument(
        "--mem-repeat",
        type=int,
        default=int(os.environ.get("BENCH_MEM_REPEAT", "1")),
        help="rounds under tracemalloc for the peak-memory column (default 1)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run workloads whose name contains this",
    )
    parser.add_argument(
        "--profile",
        metavar="WORKLOAD",
        help="instead of comparing, run the engine side of WORKLOAD under cProfile",
    )
    parser.add_argument(
        "--top", type=int, default=25, help="rows of the profile (default 25)"
    )
    parser.add_argument(
        "--list", action="store_true", help="list the workloads and exit"
    )
    args = parser.parse_args()
    args.failures = []
    if args.list:
        print("\n".join(workloads))
        sys.exit(0)
    return args


def selected(args: argparse.Namespace, name: str) -> bool:
    return not args.only or any(part in name for part in args.only)


def profile(prepare: Preparer, runs: int = 5, top: int = 25) -> None:
    """Run a prepared workload ``runs`` times under cProfile; print the top functions by own
    time and by cumulative time."""
    with prepare() as run:
        run()  # warm-up, unprofiled
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(runs):
            run()
        prof.disable()
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key)
        st.print_stats(top)
        text = buf.getvalue()
        start = text.find("   ncalls")
        print(f"--- top {top} by {key} ({runs} runs) ---")
        print(text[start:] if start >= 0 else text)


def finish(args: argparse.Namespace) -> None:
    for name, tb in args.failures:
        print(f"\n--- {name} failed ---\n{tb}", file=sys.stderr)
    if args.failures:
        sys.exit(1)

"""A purchase-like graph whose nodes leave traces in a file, and what child
processes do with it (the thread-lease tests run them with ``spawn``).

``review`` interrupts for a decision; ``act`` (the side effect) and ``after``
follow. Every node appends ``<node>:<who>`` to the trace file when it starts,
so a test sees which process ran what, even in a process that was killed or
paused. ``act`` then sleeps ``ACT_SECONDS`` so that runs overlap.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import time
import traceback
from pathlib import Path
from typing import Any, TypedDict

from engine.graph import END, START, StateGraph
from engine.types import Command, interrupt
from tests._support.savers import SaverSpec

__all__ = ("build", "interrupted_thread", "join_or_dump", "resume_in_child", "traces")

ACT_SECONDS = 1.0


class State(TypedDict, total=False):
    decision: str
    done: str


def _trace(path: str, line: str) -> None:
    with open(path, "a") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def build(trace: str, who: str, saver: Any, act_seconds: float = ACT_SECONDS) -> Any:
    def review(state: State) -> State:
        _trace(trace, f"review:{who}")
        return {"decision": interrupt("approve?")}

    def act(state: State) -> State:
        _trace(trace, f"act:{who}")
        time.sleep(act_seconds)
        return {"done": state["decision"]}

    def after(state: State) -> State:
        _trace(trace, f"after:{who}")
        return {}

    builder = StateGraph(State)
    builder.add_node("review", review)
    builder.add_node("act", act)
    builder.add_node("after", after)
    builder.add_edge(START, "review")
    builder.add_edge("review", "act")
    builder.add_edge("act", "after")
    builder.add_edge("after", END)
    return builder.compile(checkpointer=saver)


def traces(trace: str) -> list[str]:
    path = Path(trace)
    return path.read_text().split() if path.exists() else []


def interrupted_thread(spec: SaverSpec, trace: str, thread_id: str) -> None:
    """Run the graph up to its interrupt (then clear the trace)."""
    with spec.open() as saver:
        build(trace, "setup", saver).invoke(
            {}, {"configurable": {"thread_id": thread_id}}
        )
    Path(trace).unlink(missing_ok=True)


def resume_in_child(
    spec: SaverSpec,
    trace: str,
    thread_id: str,
    who: str,
    results: Any,
    barrier: Any = None,
    *,
    resume: bool = True,
    on_busy: str = "raise",
    durability: str = "sync",
    lease_seconds: float | None = None,
    act_seconds: float = ACT_SECONDS,
) -> None:
    """In a child process: answer (or continue) the thread; put (who, outcome) on
    ``results``: "ok:<done>" or the exception's class name and message.

    SIGUSR1 prints every thread's stack to stderr (pytest shows it), so a test
    can say where a child that never finished was stuck (:func:`join_or_dump`).
    """
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        with spec.open(setup=False) as saver:
            if lease_seconds is not None:
                saver.lease_seconds = lease_seconds
            graph = build(trace, who, saver, act_seconds)
            config = {
                "configurable": {"thread_id": thread_id},
                "metadata": {"who": who},
            }
            if barrier is not None:
                barrier.wait(timeout=60)
            _trace(trace, f"start:{who}")
            output = graph.invoke(
                Command(resume=who) if resume else None,
                config,
                on_busy=on_busy,  # type: ignore[arg-type]
                durability=durability,  # type: ignore[arg-type]
            )
            results.put((who, f"ok:{output.get('done')}"))
    except BaseException as exc:
        results.put((who, f"{type(exc).__name__}:{exc}"))
        traceback.print_exc()


def join_or_dump(child: Any, trace: str, timeout: float = 90) -> None:
    """Wait for a :func:`resume_in_child` process; if it is still running after
    ``timeout``, make it print its stacks, stop it and fail saying so."""
    child.join(timeout=timeout)
    if child.exitcode is not None:
        return
    os.kill(child.pid, signal.SIGUSR1)
    time.sleep(1.0)
    child.kill()
    child.join(timeout=10)
    raise AssertionError(
        f"child {child.name} still ran after {timeout} s (its stacks are in the "
        f"captured stderr); trace so far: {traces(trace)}"
    )

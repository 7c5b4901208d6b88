"""The engine used as a library in a child process that a fault kills, stops or fails.

``python -m tests.reliability.crash_graphs <kind> <target> <workdir> <thread>
<durability> [<lease_seconds>]`` runs :func:`fan_out` on a SQLite file
(``kind=sqlite``) or a Postgres DSN, armed by whatever ``ENGINE_FAULTS`` the
parent put in its environment. It starts the thread from its input when the
thread has no checkpoint yet, and otherwise carries on from the head
(``invoke(None)``), as a restarted process does; it waits for a dead or paused
holder's thread lease (``on_busy="wait"``).

The graph is START -> a -> (b, c) -> d. ``c`` takes longer than ``b``, so in the
parallel step ``b`` has finished (its writes saved) while ``c`` runs. Every node
leaves two traces that survive a SIGKILL: a line ``<node> <pid>`` appended to
``<workdir>/runs.log`` when it starts (how many times it ran), and its side
effect: a row keyed by (thread, node) in ``<workdir>/effects.db``, inserted
once and counted on every execution, as an outbox keyed by an idempotency key
is (recorded once, however often it ran).

The exit status says how the run ended: 0 done, 3 ``ThreadLeaseLostError``
(a zombie refused), 4 any other error (printed).
"""

from __future__ import annotations

import operator
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from engine.checkpoint.base import BaseCheckpointSaver
from engine.config import get_config
from engine.errors import ThreadLeaseLostError
from engine.graph import END, START, StateGraph

__all__ = ("effects", "fan_out", "run_counts")

NODES = ("a", "b", "c", "d")
SECONDS = {"a": 0.0, "b": 0.05, "c": 0.4, "d": 0.0}


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _effect(workdir: Path, thread_id: str, node: str) -> None:
    conn = sqlite3.connect(workdir / "effects.db", timeout=30, isolation_level=None)
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS effects (thread_id TEXT, node TEXT, "
            "executions INTEGER NOT NULL, PRIMARY KEY (thread_id, node))"
        )
        conn.execute(
            "INSERT INTO effects VALUES (?, ?, 1) ON CONFLICT (thread_id, node) "
            "DO UPDATE SET executions = executions + 1",
            (thread_id, node),
        )
    finally:
        conn.close()


def _node(workdir: Path, name: str) -> Any:
    def node(state: State) -> dict[str, Any]:
        fd = os.open(workdir / "runs.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            os.write(fd, f"{name} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        time.sleep(SECONDS[name])
        _effect(workdir, get_config()["configurable"]["thread_id"], name)
        return {"log": [name]}

    return node


def fan_out(workdir: Path) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    for name in NODES:
        builder.add_node(name, _node(workdir, name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "c")
    builder.add_edge(["b", "c"], "d")
    builder.add_edge("d", END)
    return builder


def run_counts(workdir: Path) -> dict[str, int]:
    """How many times each node started, in any process."""
    path = workdir / "runs.log"
    lines = path.read_text().split("\n") if path.exists() else []
    names = [line.split()[0] for line in lines if line.strip()]
    return {node: names.count(node) for node in NODES}


def effects(workdir: Path, thread_id: str) -> dict[str, int]:
    """Executions per node of the thread's side effects (one row per node)."""
    path = workdir / "effects.db"
    if not path.exists():
        return {}
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT node, executions FROM effects WHERE thread_id = ?", (thread_id,)
        ).fetchall()
    finally:
        conn.close()
    return dict(rows)


def _saver(kind: str, target: str) -> Any:
    """The saver on ``target`` (its tables exist: the test made them)."""
    if kind == "sqlite":
        from engine.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415

        return SqliteSaver.from_conn_string(target)
    from engine.checkpoint.postgres import PostgresSaver  # noqa: PLC0415

    return PostgresSaver.from_conn_string(target)


def main(argv: list[str]) -> int:
    """Run (or carry on) the thread; the exit status (see the module doc)."""
    kind, target, workdir, thread_id, durability = argv[:5]
    lease_seconds = float(argv[5]) if len(argv) > 5 else 1.0
    config = {"configurable": {"thread_id": thread_id}}
    with _saver(kind, target) as saver:
        assert isinstance(saver, BaseCheckpointSaver)
        saver.lease_seconds = lease_seconds
        graph = fan_out(Path(workdir)).compile(checkpointer=saver)
        started = graph.get_state(config).created_at is not None
        try:
            graph.invoke(
                None if started else {"log": []},
                config,
                durability=durability,  # type: ignore[arg-type]
                on_busy="wait",
            )
        except ThreadLeaseLostError as exc:
            print(f"refused: {exc}", flush=True)
            return 3
        except Exception as exc:
            print(f"failed: {type(exc).__name__}: {exc}", flush=True)
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What a resumed run sends SQLite: the statements of its two transactions.

Every statement is Python work on the step path (``sqlite3`` has no round
trips to save), so the read of the thread's head carries no statement it does
not need: the lease's row is read only when another holder's lease runs (the
take returns the row it wrote), and the writes a child row may keep for its
parent are not looked up for the namespace's newest checkpoint (it has no
child). A step's save reads its fence (the lease's holder, the thread's head)
in one statement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from engine.checkpoint.sqlite import SqliteSaver
from engine.graph import END, START, StateGraph
from engine.types import Command, interrupt


class AskState(TypedDict, total=False):
    n: int
    limit: int
    answer: Any


def _ask(state: AskState) -> dict[str, Any]:
    answer = interrupt({"question": state["n"]})
    return {"n": state["n"] + 1, "answer": answer}


def _route(state: AskState) -> str:
    return "ask" if state["n"] < state["limit"] else END


def _transactions(statements: list[str]) -> list[list[str]]:
    found: list[list[str]] = []
    for sql in statements:
        if sql.startswith("BEGIN"):
            found.append([])
        found[-1].append(sql)
    return found


def test_a_resume_reads_the_head_in_the_lease_take_transaction_only(
    tmp_path: Path,
) -> None:
    builder = StateGraph(AskState)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_conditional_edges("ask", _route)
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        graph = builder.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "t"}}
        graph.invoke({"n": 0, "limit": 5}, config)
        graph.invoke(Command(resume=0), config)
        statements: list[str] = []
        saver.conn.set_trace_callback(statements.append)
        try:
            out = graph.invoke(Command(resume=1), config)
        finally:
            saver.conn.set_trace_callback(None)

    assert out["answer"] == 1 and out["n"] == 2
    read, save = _transactions(statements)
    assert read[1].startswith("INSERT INTO engine_thread_leases")
    assert not any(s.startswith("SELECT holder") for s in read)  # RETURNING told
    assert not any("parent_writes" in s for s in read)  # the head has no child
    # the head's values are small: the saver that stored them reads none
    assert not any("engine_checkpoint_blobs" in s for s in read)
    assert len(read) == 5, read  # BEGIN, take, head, writes, COMMIT
    # the save's fence: the lease's holder and the thread's head in one statement
    assert save[1].startswith("SELECT (SELECT holder FROM engine_thread_leases")
    assert sum(s.startswith("SELECT") for s in save) == 1, save
    assert save[-2].startswith("DELETE FROM engine_thread_leases")  # released with it
    assert save[-1] == "COMMIT"

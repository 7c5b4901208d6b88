"""Round trips to Postgres per step of a run, counted on the wire (issue 17).

A relay in front of the server counts a round trip each time the client sends
after it last heard from the server (``tests/_support/pg_round_trips.py``). A
run on a thread costs one round trip to take the thread's lease, two to read the
thread (one when the saver saved the thread's head itself: it sends the reads of
that head with the take), one to give the lease back, and at most one per
checkpoint it saves: a step's writes, its values and its
checkpoint go in one pipeline with their commit. With ``durability="sync"``
every save is its own round trip; with the default (``"async"``) saves that
queue up behind a slow commit go together, so a run costs no more, often less.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

import psycopg
import pytest

from engine.checkpoint.postgres import PostgresSaver
from engine.checkpoint.postgres.aio import AsyncPostgresSaver
from engine.graph import END, START, StateGraph, add_messages
from engine.types import Command, interrupt
from tests._support.pg_round_trips import ClientMessages, RoundTripRelay
from tests._support.postgres import fresh_database, pg_dsn

pytestmark = pytest.mark.postgres

STEPS = 40
SAVES = STEPS + 2
"""Checkpoints a loop of STEPS iterations saves: the input's, then one per step."""
REPEATS = 3
"""Measurements of which a test takes the least."""
PER_RUN = 3
"""The lease taken together with the thread's head row (and the read of who holds
the lease), the commit (a new thread has no row to read further), the lease
given back."""


class LoopState(TypedDict):
    n: int
    limit: int


def _tick(state: LoopState) -> dict[str, Any]:
    return {"n": state["n"] + 1}


def _loop(name: str = "tick", node: Callable[..., Any] = _tick) -> Any:
    """One node looping on itself until ``n`` reaches ``limit``."""

    def route(state: LoopState) -> str:
        return name if state["n"] < state["limit"] else END

    builder = StateGraph(LoopState)
    builder.add_node(name, node)
    builder.add_edge(START, name)
    builder.add_conditional_edges(name, route)
    return builder


class ChatState(TypedDict):
    messages: Annotated[list[Any], add_messages]
    n: int
    limit: int


def _chat() -> Any:
    """A loop appending one message a step: stored as deltas on the step before."""

    def reply(state: ChatState) -> dict[str, Any]:
        n = state["n"] + 1
        return {"n": n, "messages": [{"role": "assistant", "content": f"reply {n}"}]}

    def route(state: ChatState) -> str:
        return "reply" if state["n"] < state["limit"] else END

    builder = StateGraph(ChatState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_conditional_edges("reply", route)
    return builder


@pytest.fixture
def relay() -> Iterator[RoundTripRelay]:
    with fresh_database(pg_dsn()) as dsn, RoundTripRelay(dsn) as counting:
        yield counting


def _least_trips(relay: RoundTripRelay, call: Callable[[], Any]) -> tuple[int, Any]:
    """Round trips of ``call``, the least of ``REPEATS`` calls (a count can be
    too high, never too low: see the relay); its result."""
    counts = []
    for _ in range(REPEATS):
        relay.reset()
        result = call()
        counts.append(relay.round_trips)
    return min(counts), result


def _run(relay: RoundTripRelay, thread_id: str, chat: bool = False, **kw: Any) -> int:
    with PostgresSaver.from_conn_string(relay.dsn) as saver:
        saver.setup()
        graph = (_chat() if chat else _loop()).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 60}
        inp: dict[str, Any] = {"n": 0, "limit": STEPS}
        if chat:
            inp["messages"] = []
        # a first run warms the connection pool and the saver (first-use work is
        # no cost per step)
        graph.invoke(
            inp,
            {**config, "configurable": {"thread_id": f"{thread_id}-warm-up"}},
            **kw,
        )
        attempts = itertools.count()
        runs: list[tuple[str, Any]] = []

        def one_run() -> None:
            attempt = f"{thread_id}-{next(attempts)}"
            run_config = {**config, "configurable": {"thread_id": attempt}}
            runs.append((attempt, graph.invoke(inp, run_config, **kw)))

        trips, _ = _least_trips(relay, one_run)
        for attempt, out in runs:  # read after counting: no part of a run's cost
            assert out["n"] == STEPS
            if chat:
                assert len(out["messages"]) == STEPS
            assert (
                len(list(saver.list({"configurable": {"thread_id": attempt}}))) == SAVES
            )
    return trips


def test_sync_durability_costs_one_round_trip_per_saved_step(relay) -> None:
    # At least one per save (each is a commit the run waits for), at most that and
    # the run's own; the least of a few repeats read one below the sum now and then
    # on a loaded 2-core machine (before 2026-12-05 too), so the sum is a bound.
    assert SAVES <= _run(relay, "sync", durability="sync") <= SAVES + PER_RUN


def test_the_default_durability_costs_at_most_one_round_trip_per_step(relay) -> None:
    assert _run(relay, "default") <= SAVES + PER_RUN


def test_a_list_grown_a_step_at_a_time_costs_no_extra_round_trip(relay) -> None:
    # each step's messages are a delta on the version the step before stored:
    # the saver knows that row's chain bookkeeping, so it reads nothing back
    trips = _run(relay, "chat-sync", chat=True, durability="sync")
    assert SAVES <= trips <= SAVES + PER_RUN
    assert _run(relay, "chat-default", chat=True) <= SAVES + PER_RUN


def test_reading_a_thread_and_taking_its_lease_cost_what_they_say(relay) -> None:
    # Bounds, not counts: on a loaded 2-core machine the least of a few repeats
    # read one below what the statements need now and then (2026-12-05; 0 for a
    # lease's take, when traffic the pool sends on its own comes between), so
    # an operation must cost at most what it says.
    with PostgresSaver.from_conn_string(relay.dsn) as saver:
        saver.setup()
        graph = _loop().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "read"}, "recursion_limit": 60}
        graph.invoke({"n": 0, "limit": 3}, config)

        trips, saved = _least_trips(relay, lambda: saver.get_tuple(config))
        assert saved is not None
        assert trips <= 2  # the head row; then its values and writes

        # a thread no run touched (taken again by the same holder: the same take)
        trips, lease = _least_trips(
            relay, lambda: saver.acquire_lease("probe", "", "me", 30)
        )
        assert lease.holder == "me"
        assert trips <= 1

        trips, other = _least_trips(
            relay, lambda: saver.acquire_lease("probe", "", "someone else", 30)
        )
        assert other.holder == "me"  # refused: says whose lease runs, same round trip
        assert trips <= 1
        saver.release_lease("probe", "", "me")

        # how a run starts on a thread that has checkpoints: take and read together
        trips, (taken, saved) = _least_trips(
            relay, lambda: saver.acquire_lease_and_get_tuple(config, "run", 30)
        )
        assert taken.holder == "run" and saved is not None
        assert (
            trips <= 2
        )  # take, lease row, head row; values and writes (1 here: guessed)


def _ask(state: LoopState) -> dict[str, Any]:
    """Asks a human each time round (``interrupt``)."""
    return {"n": state["n"] + interrupt({"question": state["n"]})}


def test_a_resume_costs_two_round_trips_on_the_saver_that_saved_the_head(
    relay,
) -> None:
    """Resumed by the saver that saved the pause: one round trip takes the lease
    and reads the head with its values and writes (the saver sends the reads
    of the head it saved with the take), one saves and gives the lease back."""
    with PostgresSaver.from_conn_string(relay.dsn) as saver:
        saver.setup()
        graph = _loop("ask", _ask).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "ask"}}
        graph.invoke({"n": 0, "limit": 1000}, config)
        graph.invoke(Command(resume=1), config)  # warm: prepared statements
        resumes = itertools.count(1)
        trips, out = _least_trips(
            relay, lambda: graph.invoke(Command(resume=next(resumes)), config)
        )
        assert trips <= 2  # a bound, as above
        assert out["n"] == 1 + sum(range(1, 1 + REPEATS))

        trips, (taken, saved) = _least_trips(
            relay, lambda: saver.acquire_lease_and_get_tuple(config, "me", 30)
        )
        assert taken.holder == "me" and saved is not None
        assert trips <= 1
        assert saved.pending_writes  # the pause's interrupt, read with the take
        saver.release_lease("ask", "", "me")

        # another process resumed and paused it since: the guess misses, and the
        # head read with the take needs one more round trip for its values
        counts = []
        with PostgresSaver.from_conn_string(relay.dsn) as other:
            elsewhere = _loop("ask", _ask).compile(checkpointer=other)
            for done in range(1, REPEATS + 1):
                elsewhere.invoke(Command(resume=1), config)
                relay.reset()
                taken, saved = saver.acquire_lease_and_get_tuple(config, "me", 30)
                counts.append(relay.round_trips)
                assert taken.holder == "me" and saved is not None
                assert saved.checkpoint["channel_values"]["n"] == out["n"] + done
                saver.release_lease("ask", "", "me")
        assert min(counts) <= 2


async def test_an_async_resume_costs_two_round_trips_too(relay) -> None:
    """Through ``ainvoke`` and the async saver: the take with the head's reads,
    then the resume value, the step and the new pause saved with the lease's
    release in one transaction (not one commit each)."""

    async def ask(state: LoopState) -> dict[str, Any]:
        # a coroutine: a sync node's hand-off to a worker thread and back can
        # pass the lane's 2 ms on a busy machine, and the saves then go early
        return _ask(state)

    async with AsyncPostgresSaver.from_conn_string(relay.dsn) as saver:
        await saver.setup()
        graph = _loop("ask", ask).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "ask"}}
        await graph.ainvoke({"n": 0, "limit": 1000}, config)
        await graph.ainvoke(Command(resume=1), config)  # warm, and "ask" is quick
        counts = []
        for resume in range(1, REPEATS + 1):
            relay.reset()
            out = await graph.ainvoke(Command(resume=resume), config)
            counts.append(relay.round_trips)
        assert min(counts) <= 2
        assert out["n"] == 1 + sum(range(1, 1 + REPEATS))


def test_opening_and_closing_a_connection_is_no_round_trip(relay) -> None:
    # a pool opens and closes connections in the background, on its own clock
    relay.reset()
    with psycopg.connect(relay.dsn, autocommit=True) as conn:
        assert relay.round_trips == 0
        conn.execute("SELECT 1")
        assert relay.round_trips == 1
    time.sleep(0.05)  # the Terminate on its way
    assert relay.round_trips == 1


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_client_messages_are_followed_across_reads_of_any_size(chunk) -> None:
    def message(kind: bytes, body: bytes) -> bytes:
        return kind + (len(body) + 4).to_bytes(4, "big") + body

    ssl_request = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")
    startup = (12).to_bytes(4, "big") + (196608).to_bytes(4, "big") + b"u\0\0\0"
    stream = [
        (ssl_request, b"startup"),
        (startup, b"startup"),
        (message(b"P", b"\0SELECT 1\0\0\0"), b"P"),
        (message(b"B", b"\0\0" + bytes(6)), b"B"),
        (message(b"E", b"\0" + bytes(4)), b"E"),
        (message(b"S", b""), b"S"),
        (message(b"Q", b"SELECT 2\0"), b"Q"),
    ]
    seen = ClientMessages()
    for data, kind in stream:
        assert seen.opens(data) == kind
        for at in range(0, len(data), chunk):
            if at:
                assert seen.opens(data[at:]) is None  # inside a message
            seen.feed(data[at : at + chunk])
        assert seen.opens(b"S") is not None  # at the next message's start

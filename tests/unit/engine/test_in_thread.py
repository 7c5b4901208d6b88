"""``in_thread``: a function run on a pool, awaited with one hand-off each way,
keeping what ``loop.run_in_executor`` guarantees (see ``engine._internal._in_thread``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator

import pytest

from engine._internal._in_thread import _hand_over, _succeed, in_thread


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as made:
        yield made


def test_the_result_comes_back_from_the_worker_thread(pool) -> None:
    async def main() -> tuple[int, int]:
        return await in_thread(pool, lambda a, b: (a + b, threading.get_ident()), 2, 3)

    total, ident = asyncio.run(main())

    assert total == 5 and ident != threading.get_ident()


@pytest.mark.parametrize(
    ("raised", "received"),
    [
        (ValueError("boom"), ValueError),
        (KeyboardInterrupt(), KeyboardInterrupt),
        (concurrent.futures.CancelledError(), asyncio.CancelledError),
        (concurrent.futures.InvalidStateError(), asyncio.InvalidStateError),
        (StopIteration(), RuntimeError),  # a future cannot hold it: never a hang
    ],
)
def test_an_exception_reaches_the_awaiting_task(pool, raised, received) -> None:
    def fail() -> None:
        raise raised

    async def main() -> BaseException:
        try:
            await in_thread(pool, fail)
        except BaseException as exc:
            return exc
        raise AssertionError("no exception")

    caught = asyncio.run(asyncio.wait_for(main(), 5))

    assert type(caught) is received
    if received is RuntimeError:
        assert caught.__cause__ is raised


def test_a_call_cancelled_before_it_starts_never_runs(pool) -> None:
    blocker = threading.Event()
    ran: list[str] = []

    async def main() -> None:
        pool.submit(blocker.wait)  # the only worker is busy
        waiting = in_thread(pool, ran.append, "ran")
        waiting.cancel()
        blocker.set()
        await asyncio.get_running_loop().run_in_executor(pool, lambda: None)

    asyncio.run(main())

    assert ran == []


def test_a_call_cancelled_while_it_runs_ends_and_its_outcome_is_dropped(
    pool,
) -> None:
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def work() -> str:
        started.set()
        release.wait(5)
        ran.append("ran")
        return "result"

    async def main() -> None:
        waiting = in_thread(pool, work)
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        waiting.cancel()
        release.set()
        await asyncio.get_running_loop().run_in_executor(pool, lambda: None)
        await asyncio.sleep(0)  # the dropped outcome's callback has run
        assert waiting.cancelled()

    asyncio.run(main())

    assert ran == ["ran"]


def test_an_outcome_for_a_closed_loop_is_dropped_quietly() -> None:
    loop = asyncio.new_event_loop()
    done = loop.create_future()
    loop.close()

    _hand_over(loop, _succeed, done, "late")  # raises nothing in the worker

    assert not done.done()

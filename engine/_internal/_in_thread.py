"""Awaiting a function run on a thread pool, with one hand-off each way.

``loop.run_in_executor`` chains two futures: the pool's, whose completion
schedules a callback on the event loop that completes an asyncio future, whose
own completion then schedules a callback back to the pool's (to pass a
cancellation on). :func:`in_thread` completes the asyncio future from the
worker itself (one ``call_soon_threadsafe``) and keeps what the chain
guarantees:

- a call cancelled before a worker starts it is never run (the worker looks
  first); one cancelled while it runs runs to its end, its outcome dropped;
- an exception reaches the awaiting task as it was raised, but for the ones
  an asyncio future cannot hold or that mean something else there:
  ``concurrent.futures``' ``CancelledError`` and ``InvalidStateError`` become
  asyncio's (as the chain converts them), ``StopIteration`` a ``RuntimeError`` (the
  chain's future would refuse it, and the awaiting task would wait forever);
- an event loop closed meanwhile gets nothing (the outcome is dropped).

A sync node's step under ``ainvoke`` is mostly this hand-off: ~7 µs less a
step here on a 2-core VM (~90 µs the round trip).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import suppress
from typing import Any, Protocol

__all__ = ("Submits", "in_thread")


class Submits(Protocol):
    """What :func:`in_thread` hands work to: an ``Executor``, or anything with
    its ``submit`` (whose return value is not used)."""

    def submit(self, fn: Callable[[], None], /) -> object: ...


def in_thread(
    executor: Executor | Submits,
    func: Callable[..., Any],
    *args: Any,
    finished: Callable[[], None] | None = None,
) -> asyncio.Future[Any]:
    """``func(*args)`` submitted to ``executor``; a future of the running loop
    that completes with its result or exception (see the module).
    ``finished``, when given, is called on the worker once ``func`` is done
    (or skipped), before the outcome is handed over: the worker is then as good
    as idle (``_one_thread``'s threads count it so)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def work() -> None:
        if done.cancelled():  # the awaiting task gave up before it started
            if finished is not None:
                finished()
            return
        complete: Callable[[asyncio.Future[Any], Any], None]
        try:
            outcome, complete = func(*args), _succeed
        except BaseException as exc:  # handed over whole, KeyboardInterrupt too
            outcome, complete = exc, _fail
        if finished is not None:
            finished()
        _hand_over(loop, complete, done, outcome)

    executor.submit(work)
    return done


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    complete: Callable[[asyncio.Future[Any], Any], None],
    done: asyncio.Future[Any],
    outcome: Any,
) -> None:
    with suppress(RuntimeError):  # the loop is closed: no one awaits any more
        loop.call_soon_threadsafe(complete, done, outcome)


def _succeed(done: asyncio.Future[Any], result: Any) -> None:
    if not done.cancelled():
        done.set_result(result)


def _fail(done: asyncio.Future[Any], exc: BaseException) -> None:
    if done.cancelled():
        return
    kind = type(exc)
    if kind is concurrent.futures.CancelledError:
        exc = asyncio.CancelledError(*exc.args)
    elif kind is concurrent.futures.InvalidStateError:
        exc = asyncio.InvalidStateError(*exc.args)
    elif isinstance(exc, StopIteration):
        error = RuntimeError(f"the function raised StopIteration: {exc!r}")
        error.__cause__ = exc
        exc = error
    done.set_exception(exc)

"""Runs one super-step's tasks: inline, on the shared thread pool, or on the event loop.

Every finished task is reported to the loop (``task_done``) from the driver's
thread, in completion order, so its writes are saved as soon as it finishes.
When a task fails, its siblings still run to the end and keep their writes
(saved, so a resume does not run them again); then the failure is raised.
Cancelling siblings that had not started yet would make which of them survive a
failure depend on thread scheduling; finishing them costs no lost work.

``Pregel.step_timeout`` bounds a step: async steps cancel their unfinished tasks
at the deadline; threads cannot be stopped, so a sync step that overran raises
once its tasks have finished (their writes saved), as LangGraph's does.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from engine.errors import GraphInterrupt
from engine.pregel._persist import background_pool
from engine.pregel._retry import arun_task, run_task

if TYPE_CHECKING:
    from engine.pregel._algo import PregelExecutableTask
    from engine.pregel._loop import PregelLoop, StreamChunk

__all__ = ("StepOutcome", "arun_step", "run_step")


class _Done:
    """Queue marker: a task finished."""

    __slots__ = ("error", "task")

    def __init__(self, task: PregelExecutableTask, error: BaseException | None) -> None:
        self.task = task
        self.error = error


class StepOutcome:
    """What happened in a step: the failure to raise, if any."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: BaseException | None = None


def _record(
    loop: PregelLoop,
    outcome: StepOutcome,
    task: PregelExecutableTask,
    error: BaseException | None,
    last: bool,
) -> None:
    if (
        error is not None
        and not isinstance(error, GraphInterrupt)
        and outcome.error is None
    ):
        outcome.error = error
    loop.task_done(task, error, last and outcome.error is None)


def _close_step(
    loop: PregelLoop, outcome: StepOutcome, deadline: float | None = None
) -> None:
    if deadline is not None and outcome.error is None and time.monotonic() > deadline:
        outcome.error = TimeoutError("Timed out")
    if outcome.error is not None:
        loop.step_failed()
        raise outcome.error
    if loop.step_interrupted:
        loop.after_step_interrupted()


def run_step(
    loop: PregelLoop, chunks: queue.SimpleQueue[Any] | None, live: bool
) -> Iterator[StreamChunk]:
    """Run the current step's tasks; yields stream chunks while they run."""
    pending = [t for t in loop.tasks.values() if loop.accepts(t)]
    outcome = StepOutcome()
    if not pending:
        _close_step(loop, outcome)
        return
    timeout = loop.graph.step_timeout
    deadline = None if timeout is None else time.monotonic() + timeout
    if len(pending) == 1 and not live:
        task = pending[0]
        _record(loop, outcome, task, run_task(loop, task), last=True)
        if chunks is not None:
            yield from _drain(chunks)
        _close_step(loop, outcome, deadline)
        return
    inbox: queue.SimpleQueue[Any] = (
        chunks if chunks is not None else queue.SimpleQueue()
    )
    pool = background_pool()

    def runner(task: PregelExecutableTask) -> Callable[[], None]:
        context = contextvars.copy_context()

        def go() -> None:
            error: BaseException | None
            try:
                error = context.run(run_task, loop, task)
            except BaseException as exc:
                error = exc
            inbox.put(_Done(task, error))

        return go

    for task in pending:
        pool.submit(runner(task))
    remaining = len(pending)
    while remaining:
        item = inbox.get()
        if isinstance(item, _Done):
            remaining -= 1
            _record(loop, outcome, item.task, item.error, last=remaining == 0)
        else:
            yield item
    if chunks is not None:
        yield from _drain(chunks)
    _close_step(loop, outcome, deadline)


def _drain(chunks: queue.SimpleQueue[Any]) -> Iterator[StreamChunk]:
    # This thread is the queue's only reader: what ``empty`` says is there
    # stays there (checking costs less than the exception an empty get raises).
    while not chunks.empty():
        item = chunks.get_nowait()
        if not isinstance(item, _Done):
            yield item


async def _aerror_of(
    loop: PregelLoop, task: PregelExecutableTask
) -> BaseException | None:
    """Run ``task`` (:func:`arun_task`); what it failed with, None when it did
    not. Cancellation is not a failure: it goes on up."""
    try:
        return await arun_task(loop, task)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return exc


async def arun_step(
    loop: PregelLoop, chunks: asyncio.Queue[Any] | None
) -> AsyncIterator[StreamChunk]:
    """Async twin of :func:`run_step`: async nodes on the event loop, sync ones in threads."""
    pending = [t for t in loop.tasks.values() if loop.accepts(t)]
    outcome = StepOutcome()
    if not pending:
        _close_step(loop, outcome)
        return
    timeout = loop.graph.step_timeout
    if len(pending) == 1 and chunks is None and timeout is None:
        task = pending[0]
        if getattr(task.node.bound, "runs_in_thread", False):
            # One sync node and nothing to stream: its thread is awaited here, with
            # no task and queue of its own (two turns of the event loop fewer). Its
            # context variables live in the worker thread's copy of the context, as
            # when it runs beside others; an async node keeps its own task (and
            # context), so that what it sets never reaches later steps.
            _record(loop, outcome, task, await _aerror_of(loop, task), last=True)
            _close_step(loop, outcome)
            return
    inbox: asyncio.Queue[Any] = chunks if chunks is not None else asyncio.Queue()
    running: list[asyncio.Task[None]] = []

    async def go(task: PregelExecutableTask) -> None:
        inbox.put_nowait(_Done(task, await _aerror_of(loop, task)))

    for task in pending:
        running.append(asyncio.ensure_future(go(task)))
    remaining = len(pending)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while remaining:
            if deadline is None:
                item = await inbox.get()
            else:
                try:
                    item = await asyncio.wait_for(
                        inbox.get(), max(deadline - time.monotonic(), 0)
                    )
                except TimeoutError:
                    if outcome.error is None:
                        outcome.error = TimeoutError()
                    break  # the finally cancels the unfinished tasks
            if isinstance(item, _Done):
                remaining -= 1
                _record(loop, outcome, item.task, item.error, last=remaining == 0)
            else:
                yield item
    finally:
        for job in running:
            if not job.done():
                job.cancel()
    while not inbox.empty():
        item = inbox.get_nowait()
        if not isinstance(item, _Done):
            yield item
    _close_step(loop, outcome)

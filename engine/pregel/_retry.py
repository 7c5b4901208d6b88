"""One task, start to finish: attempts, retry policy, timeouts, error handler.

A failed or timed-out attempt's writes are discarded before the next attempt.
Interrupts and parent commands are never retried.

A task's timeout is its ``Send``'s, else its node's (``add_node(timeout=)``,
``@task(timeout=)``, ``@entrypoint(timeout=)``). A timed-out attempt raises
:class:`~engine.errors.NodeTimeoutError`, which the retry policy may retry. An
async node is cancelled when its time is up, in async runs and in sync runs
alike (there it runs on its own event loop). A sync node cannot be cancelled:
an async run stops waiting for it (its thread finishes in the background, its
writes are dropped), a sync run refuses the timeout with ``ValueError``. An
``ainvoke`` run on one worker thread (``_one_thread``) is an async run here: it
waits for such a node on an event loop of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._in_thread import in_thread
from engine._internal._scope import reset_scope, set_scope
from engine._internal._tracing import tracing_of
from engine.errors import (
    GraphBubbleUp,
    NodeCancelledError,
    NodeError,
    NodeTimeoutError,
    ParentCommand,
)
from engine.pregel._messages import langchain_messages
from engine.pregel._node_callable import NodeCallable
from engine.types import RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from engine._internal._scope import TaskScope
    from engine.pregel._algo import PregelExecutableTask
    from engine.pregel._loop import PregelLoop

__all__ = ("arun_task", "run_task")


def _policy_for(policies: Sequence[RetryPolicy], exc: Exception) -> RetryPolicy | None:
    for policy in policies:
        if policy.should_retry(exc):
            return policy
    return None


def _write(loop: PregelLoop, task: PregelExecutableTask, output: Any) -> None:
    writers = task.node.writers
    if not writers:
        return

    def read_fresh(keys: Sequence[str]) -> dict[str, Any]:
        return loop.graph.read_fresh(loop.channels, task, keys)

    for writer in writers:
        writer(task, output, read_fresh)


async def _awrite(loop: PregelLoop, task: PregelExecutableTask, output: Any) -> None:
    writers = task.node.writers
    if not writers:
        return

    def read_fresh(keys: Sequence[str]) -> dict[str, Any]:
        return loop.graph.read_fresh(loop.channels, task, keys)

    for writer in writers:
        awrite = getattr(writer, "awrite", None)
        if awrite is not None:
            await awrite(task, output, read_fresh)
        else:
            writer(task, output, read_fresh)


async def _afinish_attempt(
    scope: TaskScope, loop: PregelLoop, task: PregelExecutableTask, output: Any
) -> None:
    if scope.interrupted is not None:
        raise scope.interrupted
    await _awrite(loop, task, output)


async def _ahandle_error(
    loop: PregelLoop, task: PregelExecutableTask, exc: Exception
) -> BaseException | None:
    handler = task.node.error_handler
    if handler is None:
        return exc
    scope = _handler_scope(loop, task, exc)
    token = set_scope(scope)
    try:
        task.writes.clear()
        awaitable = handler.ainvoke(task.input, scope)
        output = (
            await awaitable
            if awaitable is not None
            else handler.invoke(task.input, scope)
        )
        await _afinish_attempt(scope, loop, task, output)
        return None
    except (GraphBubbleUp, Exception) as raised:
        return _handler_failed(task, exc, raised)
    finally:
        reset_scope(token)


def _finish_attempt(
    scope: TaskScope, loop: PregelLoop, task: PregelExecutableTask, output: Any
) -> None:
    if scope.interrupted is not None:
        # user code caught the pause signal; the pause still happens
        raise scope.interrupted
    _write(loop, task, output)


def _handle_error(
    loop: PregelLoop, task: PregelExecutableTask, exc: Exception
) -> BaseException | None:
    handler = task.node.error_handler
    if handler is None:
        return exc
    scope = _handler_scope(loop, task, exc)
    token = set_scope(scope)
    try:
        task.writes.clear()
        _finish_attempt(scope, loop, task, handler.invoke(task.input, scope))
        return None
    except (GraphBubbleUp, Exception) as raised:
        return _handler_failed(task, exc, raised)
    finally:
        reset_scope(token)


def _handler_scope(
    loop: PregelLoop, task: PregelExecutableTask, exc: Exception
) -> TaskScope:
    """The scope a node's error handler runs in: the task's, with the error."""
    scope = loop.make_scope(task)
    scope.error = NodeError(node=task.name, error=exc)
    return scope


def _handler_failed(
    task: PregelExecutableTask, exc: Exception, raised: BaseException
) -> BaseException:
    """The error handler raised: a pause or parent command as is, an error caused
    by the node's; the handler's writes are dropped."""
    task.writes.clear()
    if not isinstance(raised, GraphBubbleUp):
        raised.__cause__ = exc
    return raised


def _attempt_scope(
    loop: PregelLoop,
    task: PregelExecutableTask,
    scope_factory: Callable[[], TaskScope] | None,
    attempt: int,
) -> TaskScope:
    scope = scope_factory() if scope_factory is not None else loop.make_scope(task)
    scope.attempt = attempt
    return scope


def _retry_delay(
    loop: PregelLoop,
    task: PregelExecutableTask,
    policies: Sequence[RetryPolicy],
    attempt: int,
    exc: Exception,
) -> float | None:
    """An attempt failed with ``exc`` (its writes dropped): the seconds to wait
    before the next attempt, or None when the failure is final (no policy retries
    it, or its attempts are used up)."""
    policy = _policy_for(policies, exc)
    if policy is None or attempt >= policy.max_attempts:
        return None
    if (tracing := tracing_of(loop)) is not None:
        tracing.retry(task, attempt, exc)
    return policy.interval(attempt)


def _discarded(task: PregelExecutableTask, error: BaseException) -> BaseException:
    """A failed or paused attempt: its writes are dropped, its error returned."""
    task.writes.clear()
    return error


def _paused(task: PregelExecutableTask, signal: GraphBubbleUp) -> BaseException:
    """An attempt a signal ended (an interrupt, a drain): its writes dropped, the
    signal returned without its traceback. The traceback holds the node's
    frames, and they the signal (``interrupt()`` keeps it in the task's scope):
    a reference cycle that would keep the run's state alive until the garbage
    collector next runs. A signal is control flow: no one reads where it came
    from."""
    signal.__traceback__ = None
    return _discarded(task, signal)


def task_timeout(task: PregelExecutableTask) -> TimeoutPolicy | None:
    """The task's timeout: its ``Send``'s when it has one, else its node's."""
    send = task.send
    if send is not None and send.timeout is not None:
        return send.timeout
    return task.node.timeout


def _cancellable(bound: NodeCallable) -> bool:
    return bound.is_async or (bound.is_runnable and bound.afunc is not None)


def sync_timeout_refused(name: str) -> ValueError:
    """The error for a timeout on a synchronous node in a synchronous run."""
    return ValueError(
        f"Node {name!r} is synchronous and has a timeout: a sync function cannot be "
        "cancelled, so timeouts need an async node (or an async run: ainvoke/astream)."
    )


def _invoke_timed(
    loop: PregelLoop,
    task: PregelExecutableTask,
    scope: TaskScope,
    timeout: TimeoutPolicy,
) -> Any:
    """One attempt with a timeout from sync code, on an event loop of its own:
    an async node's, or a sync node's in an ``ainvoke`` run on one thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_attempt_async(loop, task, scope, timeout))
    raise RuntimeError(
        "An async node was reached from a synchronous call inside a running event loop; "
        "use `await graph.ainvoke(...)` / `graph.astream(...)` instead."
    )


def run_task(
    loop: PregelLoop,
    task: PregelExecutableTask,
    scope_factory: Callable[[], TaskScope] | None = None,
) -> BaseException | None:
    """Run a task in this thread. Returns its failure (or pause signal), None on success."""
    tracing = tracing_of(loop)
    if tracing is not None:  # inside the task's span (engine._internal._tracing)
        return tracing.run_task(
            task, loop.step, lambda: _run_task(loop, task, scope_factory)
        )
    return _run_task(loop, task, scope_factory)


def _run_task(
    loop: PregelLoop,
    task: PregelExecutableTask,
    scope_factory: Callable[[], TaskScope] | None,
) -> BaseException | None:
    loop.task_started(task)
    node = task.node
    policies = task.retry_policy or loop.graph.retry_policy
    timeout = task_timeout(task)
    cancel_flag = loop.cancel_flag
    if (
        timeout is not None
        and cancel_flag is None  # an ainvoke on one thread: waited for as there
        and not _cancellable(node.bound)
    ):
        return sync_timeout_refused(task.name)
    attempt = 0
    while True:
        attempt += 1
        if cancel_flag is not None:
            cancel_flag.check()
        scope = _attempt_scope(loop, task, scope_factory, attempt)
        token = set_scope(scope)
        try:
            if scope.message_writer is not None:
                with langchain_messages(scope.config, scope.message_writer):
                    output = (
                        contextvars.copy_context().run(
                            node.bound.invoke, task.input, scope
                        )
                        if timeout is None
                        else _invoke_timed(loop, task, scope, timeout)
                    )
            elif timeout is None:
                # in a copy of the context, as on a worker thread: what the node
                # sets there ends with it (LangGraph's nodes run so)
                output = contextvars.copy_context().run(
                    node.bound.invoke, task.input, scope
                )
            else:
                output = _invoke_timed(loop, task, scope, timeout)
        except ParentCommand as command:
            # a subgraph run by this node addressed this graph: it is the node's output
            output = command.command
        except GraphBubbleUp as signal:
            return _paused(task, signal)
        except Exception as exc:
            task.writes.clear()
            delay = _retry_delay(loop, task, policies, attempt, exc)
            if delay is None:
                return _handle_error(loop, task, exc)
            time.sleep(delay)
            continue
        finally:
            reset_scope(token)
        if cancel_flag is not None:
            cancel_flag.check()  # the node's writes are dropped
        token = set_scope(scope)
        try:
            _finish_attempt(scope, loop, task, output)
            return None
        except (GraphBubbleUp, Exception) as error:
            return _discarded(task, error)
        finally:
            reset_scope(token)


class _Heartbeat:
    """A stream writer that also refreshes an idle timeout when written to
    (under ``refresh_on="auto"``; ``"heartbeat"`` counts only ``heartbeat()``)."""

    __slots__ = ("last", "on_write", "writer")

    def __init__(self, writer: Callable[[Any], None], on_write: bool) -> None:
        self.writer = writer
        self.on_write = on_write
        self.last = time.monotonic()

    def __call__(self, chunk: Any) -> None:
        if self.on_write:
            self.last = time.monotonic()
        self.writer(chunk)

    def heartbeat(self) -> None:
        self.last = time.monotonic()


async def _attempt_async(
    loop: PregelLoop,
    task: PregelExecutableTask,
    scope: TaskScope,
    timeout: TimeoutPolicy | None,
) -> Any:
    node = task.node
    beat: _Heartbeat | None = None
    if timeout is not None and timeout.idle_timeout is not None:
        beat = _Heartbeat(scope.stream_writer, timeout.refresh_on == "auto")
        scope.stream_writer = beat
    awaitable = node.bound.ainvoke(task.input, scope)
    if awaitable is None:
        # a sync node runs on a worker thread in a copy of the caller's context
        # (its contextvars, as LangGraph does); asyncio.run() works there
        ctx_run = _context_runner(scope)
        awaitable = in_thread(
            loop.executor,
            contextvars.copy_context().run,
            ctx_run,
            node.bound.invoke,
            task.input,
            scope,
        )
    if timeout is None:
        return await awaitable
    if beat is None:
        beat = _Heartbeat(scope.stream_writer, False)
    start = time.monotonic()
    inner = asyncio.ensure_future(awaitable)
    try:
        while True:
            now = time.monotonic()
            deadlines = []
            if timeout.run_timeout is not None:
                deadlines.append(
                    ("run", timeout.run_timeout, start + timeout.run_timeout)
                )
            if timeout.idle_timeout is not None:
                deadlines.append(
                    ("idle", timeout.idle_timeout, beat.last + timeout.idle_timeout)
                )
            kind, limit, deadline = min(deadlines, key=lambda d: d[2])
            if deadline <= now:
                inner.cancel()
                raise NodeTimeoutError(
                    task.name,
                    now - start,
                    kind=kind,  # type: ignore[arg-type]
                    timeout=limit,
                    run_timeout=timeout.run_timeout,
                    idle_timeout=timeout.idle_timeout,
                )
            done, _ = await asyncio.wait({inner}, timeout=deadline - now)
            if done:
                return inner.result()
    finally:
        if not inner.done():
            inner.cancel()


def _context_runner(scope: TaskScope) -> Callable[..., Any]:
    def run(func: Callable[..., Any], value: Any, sc: TaskScope) -> Any:
        token = set_scope(sc)
        try:
            return func(value, sc)
        finally:
            reset_scope(token)

    return run


async def arun_task(
    loop: PregelLoop,
    task: PregelExecutableTask,
    scope_factory: Callable[[], TaskScope] | None = None,
) -> BaseException | None:
    """Async twin of :func:`run_task`."""
    tracing = tracing_of(loop)
    if tracing is not None:
        return await tracing.arun_task(
            task, loop.step, lambda: _arun_task(loop, task, scope_factory)
        )
    return await _arun_task(loop, task, scope_factory)


async def _arun_task(
    loop: PregelLoop,
    task: PregelExecutableTask,
    scope_factory: Callable[[], TaskScope] | None,
) -> BaseException | None:
    loop.task_started(task)
    policies = task.retry_policy or loop.graph.retry_policy
    timeout = task_timeout(task)
    attempt = 0
    while True:
        attempt += 1
        scope = _attempt_scope(loop, task, scope_factory, attempt)
        token = set_scope(scope)
        try:
            if scope.message_writer is not None:
                with langchain_messages(scope.config, scope.message_writer):
                    output = await _attempt_async(loop, task, scope, timeout)
            else:
                output = await _attempt_async(loop, task, scope, timeout)
        except ParentCommand as command:
            output = command.command
        except GraphBubbleUp as signal:
            return _paused(task, signal)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            return _discarded(task, NodeCancelledError(task.name))
        except Exception as error:
            task.writes.clear()
            delay = _retry_delay(loop, task, policies, attempt, error)
            if delay is None:
                return await _ahandle_error(loop, task, error)
            await asyncio.sleep(delay)
            continue
        finally:
            reset_scope(token)
        token = set_scope(scope)
        try:
            await _afinish_attempt(scope, loop, task, output)
            return None
        except (GraphBubbleUp, Exception) as error:
            return _discarded(task, error)
        finally:
            reset_scope(token)

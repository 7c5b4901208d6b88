"""``@task`` calls made from inside a running task: scheduled, durable, resumable.

A call gets a deterministic id (calling task id + call index), runs concurrently
(a pool thread, or the event loop for async functions), and its result is saved
at once as a ``__return__`` write on the current checkpoint. When the calling
task runs again (resume after an interrupt or a crash), finished calls return
their saved result instead of running again.

A call is a task of its own, as in LangGraph: an ``interrupt()`` inside it is
saved under the call's id (and, as it propagates, under its caller's), its
answers are the call's own, and its result is streamed (``updates``: one
``{name: result}`` chunk, ``tasks``/``debug``: start and result) when it finishes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._constants import RETURN
from engine._internal._ids import task_id_for
from engine._internal._scope import TaskScope
from engine._internal._typing import MISSING
from engine.pregel._algo import PregelExecutableTask, task_ns, task_path_str
from engine.pregel._node_callable import NodeCallable, is_async_callable
from engine.pregel._persist import background_pool
from engine.pregel._read import PregelNode
from engine.pregel._retry import arun_task, run_task
from engine.types import CachePolicy, RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from engine.pregel._loop import PregelLoop

__all__ = ("CallFuture", "submit_call")


class _Packed:
    """Positional and keyword arguments of a call, as one node input."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs


class CallFuture(concurrent.futures.Future[Any]):
    """A call's result. ``result()`` runs the call inline if no worker started it yet,
    so a task waiting on its calls can never starve the pool."""

    def __init__(self) -> None:
        super().__init__()
        self._job: Callable[[], None] | None = None
        self._claim_lock = threading.Lock()

    def claim(self) -> Callable[[], None] | None:
        """The job, for exactly one taker (a pool worker or a waiting caller)."""
        with self._claim_lock:
            job, self._job = self._job, None
            return job

    def result(self, timeout: float | None = None) -> Any:
        if not self.done() and (job := self.claim()) is not None:
            job()
        return super().result(timeout)

    def __await__(self) -> Any:
        return asyncio.wrap_future(self).__await__()


def _call_node(
    name: str,
    func: Callable[..., Any],
    retry: Sequence[RetryPolicy],
    timeout: TimeoutPolicy | None = None,
) -> PregelNode:
    if is_async_callable(func):

        async def run_async(packed: _Packed) -> Any:
            return await func(*packed.args, **packed.kwargs)

        bound = NodeCallable(run_async, name)
    else:

        def run(packed: _Packed) -> Any:
            return func(*packed.args, **packed.kwargs)

        bound = NodeCallable(run, name)
    return PregelNode(
        name=name,
        triggers=(),
        channels=(),
        bound=bound,
        writers=[_write_return],
        retry_policy=retry,
        timeout=timeout,
    )


def _write_return(task: PregelExecutableTask, output: Any, _read: Any) -> None:
    task.writes.append((RETURN, output))


def submit_call(
    loop: PregelLoop,
    caller: TaskScope,
    name: str,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    retry_policy: Sequence[RetryPolicy] = (),
    cache_policy: CachePolicy[Any] | None = None,
    timeout: TimeoutPolicy | None = None,
) -> Any:
    """Schedule a call of ``func`` made by the task running in ``caller``.

    Returns a :class:`CallFuture` (sync callers) or an asyncio future (callers on
    an event loop); either can be awaited, the first also ``result()``-ed.
    """
    index = caller.task_calls
    caller.task_calls += 1
    call_id = task_id_for(caller.task_id, "call", index, name)
    node = _call_node(name, func, retry_policy, timeout)
    parent_ns = (
        caller.checkpoint_ns.rsplit("|", 1)[0] if "|" in caller.checkpoint_ns else ""
    )
    task = PregelExecutableTask(
        name=name,
        input=_Packed(args, kwargs),
        node=node,
        triggers=(),
        id=call_id,
        path=(*caller.path, "call", index),
        ns=task_ns(parent_ns, name, call_id),
    )
    saved = loop.call_result(call_id)
    try:
        running_loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running_loop = None
    if saved is not MISSING:
        return _done(saved, running_loop)
    cache_key = loop.call_cache_key(task, cache_policy)
    if cache_key is not None and running_loop is None:
        hit = loop.cache_lookup(cache_key)
        if hit is not MISSING:
            loop.record_call(task, hit, cached=True)
            return _done(hit, None)
    loop.call_started(task)

    def finish(error: BaseException | None) -> Any:
        if error is not None:
            loop.call_failed(task, error)
            raise error
        value = next((v for c, v in task.writes if c == RETURN), None)
        loop.record_call(task, value)
        if cache_key is not None:
            loop.cache_store(cache_key, value, cache_policy)
        return value

    def scoped() -> TaskScope:
        # the call's own answers (saved under its id) and the run's resume value
        scope = loop.make_scope(task)
        scope.resume_map = caller.resume_map
        return scope

    if running_loop is not None:

        async def run_async() -> Any:
            return finish(await arun_task(loop, task, scope_factory=scoped))

        return asyncio.ensure_future(run_async())

    future = CallFuture()
    context = contextvars.copy_context()

    def job() -> None:
        try:
            value = finish(context.run(run_task, loop, task, scope_factory=scoped))
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(value)

    future._job = job

    def from_pool() -> None:
        if (claimed := future.claim()) is not None:
            claimed()

    background_pool().submit(from_pool)
    return future


def _done(value: Any, running_loop: asyncio.AbstractEventLoop | None) -> Any:
    if running_loop is not None:
        future: asyncio.Future[Any] = running_loop.create_future()
        future.set_result(value)
        return future
    done = CallFuture()
    done.set_result(value)
    return done


_unused = task_path_str

"""Functional API: ``@entrypoint`` and ``@task`` (mirrors ``langgraph.func``).

Write a workflow as a plain function; each ``@task`` call is scheduled, runs
concurrently with other calls, and is durable: its result is saved as soon as
it finishes, so when the workflow runs again after an interrupt or a crash,
finished tasks return their saved result instead of running again::

    @task
    def draft(topic: str) -> str: ...

    @entrypoint(checkpointer=InMemorySaver())
    def write(topic: str, *, previous: str | None = None) -> str:
        text = draft(topic).result()
        if interrupt({"review": text}) != "ok":
            return entrypoint.final(value=text, save=previous)
        return text
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from engine._internal._constants import END, PREVIOUS, RETURN, START
from engine._internal._scope import current_scope
from engine.channels.ephemeral_value import EphemeralValue
from engine.channels.last_value import LastValue
from engine.pregel._algo import PregelExecutableTask
from engine.pregel._node_callable import NodeCallable, is_async_callable
from engine.pregel._read import PregelNode
from engine.pregel.main import Pregel
from engine.types import (
    CachePolicy,
    RetryPolicy,
    TimeoutPolicy,
    ensure_valid_checkpointer,
)

__all__ = ("EntrypointGraph", "entrypoint", "task")

R = TypeVar("R")
S = TypeVar("S")
V = TypeVar("V")


class _TaskFunction:
    """A function that, called inside a running graph, returns a future of its result."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None,
        retry_policy: Sequence[RetryPolicy],
        cache_policy: CachePolicy[Any] | None,
        timeout: TimeoutPolicy | None = None,
    ) -> None:
        self.func = func
        self.name = name or getattr(func, "__name__", "task")
        self.retry_policy = tuple(retry_policy)
        self.cache_policy = cache_policy
        self.timeout = timeout
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        scope = current_scope()
        if scope is None or scope.call_submit is None:
            raise RuntimeError(
                f"@task {self.name!r} was called outside a running graph: call it from "
                "an @entrypoint function, another @task, or a graph node."
            )
        return scope.call_submit(
            scope,
            self.name,
            self.func,
            args,
            kwargs,
            self.retry_policy,
            self.cache_policy,
            self.timeout,
        )

    def clear_cache(self, cache: Any) -> None:
        """Forget this task's cached results in ``cache``."""
        cache.clear([("__engine_writes",)])


def task(
    __func_or_none__: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    timeout: float | timedelta | TimeoutPolicy | None = None,
    **kwargs: Any,
) -> Any:
    """Mark a function as a durable task (usable as ``@task`` or ``@task(...)``).

    Calling it inside a run returns a future: ``.result()`` (sync) or ``await``.

    ``timeout`` limits each attempt (seconds or a ``timedelta`` cap the wall
    clock; a :class:`~engine.types.TimeoutPolicy` can add an ``idle_timeout``,
    refreshed by stream writes and ``runtime.heartbeat()``). A late attempt is
    cancelled and raises :class:`~engine.errors.NodeTimeoutError` from the
    future; ``retry_policy`` decides whether it runs again. Only async functions
    can be cancelled: a timeout on a sync function is refused with ``ValueError``.
    """
    if "retry" in kwargs and retry_policy is None:
        retry_policy = kwargs.pop("retry")
    if kwargs:
        raise TypeError(f"task() got unexpected arguments {sorted(kwargs)}")
    timeout_policy = TimeoutPolicy.coerce(timeout)
    policies: tuple[RetryPolicy, ...]
    if retry_policy is None:
        policies = ()
    elif isinstance(retry_policy, RetryPolicy):
        policies = (retry_policy,)
    else:
        policies = tuple(retry_policy)

    def decorate(func: Callable[..., Any]) -> _TaskFunction:
        if timeout_policy is not None and not is_async_callable(func):
            _refuse_sync_timeout(
                "@task", name or str(getattr(func, "__name__", "task"))
            )
        return _TaskFunction(
            func,
            name=name,
            retry_policy=policies,
            cache_policy=cache_policy,
            timeout=timeout_policy,
        )

    if __func_or_none__ is not None:
        return decorate(__func_or_none__)
    return decorate


class EntrypointGraph(Pregel):
    """The compiled graph behind an ``@entrypoint`` function."""

    def task_update(self, task: PregelExecutableTask) -> Any:
        for chan, value in task.writes:
            if chan == RETURN:
                return value
        return None

    def input_metadata(self, input: Any) -> dict[str, Any]:
        return {START: [START]}


def _write_outputs(task: PregelExecutableTask, output: Any, _read: Any) -> None:
    if isinstance(output, entrypoint.final):
        value, save = output.value, output.save
    else:
        value = save = output
    task.writes.append((END, value))
    task.writes.append((PREVIOUS, save))
    task.writes.append((RETURN, value))


class entrypoint(Generic[R]):
    """Turn a function into a graph: ``invoke``, ``stream``, state and time travel included.

    The function takes one positional argument (the input) and may declare
    ``previous`` (its last saved return value on this thread), ``config``,
    ``runtime``, ``writer`` or ``store``.

    ``timeout`` limits each attempt of an async workflow function as
    :func:`task`'s does (a sync function with a timeout is refused with
    ``ValueError``); the workflow then fails with ``NodeTimeoutError`` unless
    ``retry_policy`` retries it.
    """

    @dataclass(slots=True)
    class final(Generic[V, S]):
        """Return ``value`` to the caller but save ``save`` as the next ``previous``."""

        value: Any
        save: Any

    def __init__(
        self,
        checkpointer: Any = None,
        store: Any = None,
        cache: Any = None,
        context_schema: type[Any] | None = None,
        cache_policy: CachePolicy[Any] | None = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        **kwargs: Any,
    ) -> None:
        if "config_schema" in kwargs and context_schema is None:
            context_schema = kwargs.pop("config_schema")
        if "retry" in kwargs and retry_policy is None:
            retry_policy = kwargs.pop("retry")
        if kwargs:
            raise TypeError(f"entrypoint() got unexpected arguments {sorted(kwargs)}")
        self.checkpointer = ensure_valid_checkpointer(checkpointer)
        self.timeout = TimeoutPolicy.coerce(timeout)
        self.store = store
        self.cache = cache
        self.context_schema = context_schema
        self.cache_policy = cache_policy
        if retry_policy is None:
            self.retry_policy: tuple[RetryPolicy, ...] = ()
        elif isinstance(retry_policy, RetryPolicy):
            self.retry_policy = (retry_policy,)
        else:
            self.retry_policy = tuple(retry_policy)

    def __call__(self, func: Callable[..., Any]) -> EntrypointGraph:
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise TypeError(
                "@entrypoint does not support generator functions; return a value"
            )
        params = [
            p
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.default is p.empty
        ]
        if len(params) != 1:
            raise TypeError(
                f"@entrypoint function {func.__name__!r} must take exactly one positional "
                f"argument (the input), got {len(params)}"
            )
        name = getattr(func, "__name__", "entrypoint")
        if self.timeout is not None and not is_async_callable(func):
            _refuse_sync_timeout("@entrypoint", name)
        bound = NodeCallable(func, name)
        node = PregelNode(
            name=name,
            triggers=[START],
            channels=START,
            bound=bound,
            writers=[_write_outputs],
            retry_policy=self.retry_policy,
            cache_policy=self.cache_policy,
            timeout=self.timeout,
        )
        input_type, output_type, save_type = _io_types(func, params[0].name)
        graph = EntrypointGraph(
            nodes={name: node},
            channels={
                START: EphemeralValue(input_type, key=START),
                END: LastValue(output_type, key=END),
                PREVIOUS: LastValue(save_type, key=PREVIOUS),
            },
            input_channels=START,
            output_channels=END,
            stream_channels=END,
            stream_mode="updates",
            checkpointer=self.checkpointer,
            store=self.store,
            cache=self.cache,
            context_schema=self.context_schema,
            name=name,
        )
        graph.previous_channel = PREVIOUS
        functools.update_wrapper(graph, func, updated=())  # type: ignore[arg-type]
        return graph


def _refuse_sync_timeout(kind: str, name: str) -> None:
    raise ValueError(
        f"{kind} {name!r} has a timeout but is synchronous: a sync function cannot be "
        "cancelled, so timeouts need an async function (async def)."
    )


def _io_types(func: Callable[..., Any], param: str) -> tuple[Any, Any, Any]:
    """The entrypoint's input, output and saved types, from its annotations (for
    ``get_input_jsonschema()`` and ``InputType``); ``Any`` where there are none."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        return Any, Any, Any
    returned = hints.get("return", Any)
    if returned is entrypoint.final:
        returned = Any
    if typing.get_origin(returned) is entrypoint.final:
        output_type, save_type = typing.get_args(returned)
        return hints.get(param, Any), output_type, save_type
    return hints.get(param, Any), returned, returned

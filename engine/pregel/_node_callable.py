"""Calling user code: detect sync/async, inject ``config``/``runtime``/``writer``/``store``.

What a callable accepts is worked out once, when the graph is compiled; calling it
on the hot path is then a plain function call with a prebuilt kwargs dict.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from engine._internal._scope import TaskScope

__all__ = ("NodeCallable", "is_async_callable")

# parameter name -> what to inject
INJECTABLE = ("config", "runtime", "writer", "store", "previous", "error")


def is_async_callable(func: Any) -> bool:
    """True for coroutine functions, async callable objects and partials of them."""
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _injected_params(func: Any) -> tuple[str, ...]:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return ()
    names = []
    params = list(signature.parameters.values())
    for index, param in enumerate(params):
        if index == 0 and param.kind in (
            param.POSITIONAL_ONLY,
            param.POSITIONAL_OR_KEYWORD,
        ):
            continue  # the state argument
        if param.kind in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
            param.POSITIONAL_ONLY,
        ):
            continue
        if param.name in INJECTABLE:
            names.append(param.name)
    return tuple(names)


def _first_param_count(func: Any) -> int:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return 1
    return sum(
        1
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        and p.default is p.empty
    )


class NodeCallable:
    """A node's function (or runnable) plus what it wants injected.

    ``invoke`` runs it in the current thread; ``ainvoke`` runs it on the event
    loop (async functions) or in a worker thread (sync functions). Objects with
    ``invoke``/``ainvoke`` methods (LangChain runnables, compiled graphs) are
    called with the input and the task's config.
    """

    __slots__ = (
        "afunc",
        "func",
        "inject",
        "is_async",
        "is_graph",
        "is_runnable",
        "name",
        "takes_input",
    )

    def __init__(self, func: Any, name: str | None = None) -> None:
        self.name = name or getattr(func, "__name__", type(func).__name__)
        self.is_runnable = (
            not inspect.isfunction(func)
            and not inspect.ismethod(func)
            and not isinstance(func, functools.partial)
            and callable(getattr(func, "invoke", None))
        )
        self.is_graph = callable(getattr(func, "stream_events", None))
        if self.is_runnable:
            self.func = func
            self.afunc = func if callable(getattr(func, "ainvoke", None)) else None
            self.is_async = False
            self.inject: tuple[str, ...] = ()
            self.takes_input = True
            return
        if not callable(func):
            raise TypeError(
                f"Expected a function or runnable for node {name!r}, got {func!r}"
            )
        self.is_async = is_async_callable(func)
        self.func = func
        self.afunc = func if self.is_async else None
        self.inject = _injected_params(func)
        self.takes_input = _first_param_count(func) >= 1 or not self.inject

    @property
    def runs_in_thread(self) -> bool:
        """Whether :meth:`ainvoke` leaves the node to a worker thread (returns None)."""
        return self.afunc is None

    def _kwargs(self, scope: TaskScope) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for name in self.inject:
            if name == "config":
                kwargs["config"] = scope.config
            elif name == "runtime":
                kwargs["runtime"] = scope.runtime
            elif name == "writer":
                kwargs["writer"] = scope.stream_writer
            elif name == "store":
                kwargs["store"] = scope.runtime.store
            elif name == "previous":
                kwargs["previous"] = scope.runtime.previous
            elif name == "error":
                kwargs["error"] = getattr(scope, "error", None)
        return kwargs

    def invoke(self, value: Any, scope: TaskScope) -> Any:
        """Run in this thread; an async function is driven to completion here."""
        if self.is_runnable:
            if self.is_graph:
                # an engine graph finds its parent task through the context
                return self.func.invoke(value)
            return self.func.invoke(value, scope.config)
        kwargs = self._kwargs(scope) if self.inject else None
        if self.is_async:
            coro = self.func(value, **kwargs) if kwargs else self.func(value)
            return _run_coroutine(coro)
        if kwargs:
            return self.func(value, **kwargs)
        return self.func(value)

    def ainvoke(self, value: Any, scope: TaskScope) -> Awaitable[Any] | None:
        """An awaitable for async code; ``None`` when the caller must use a thread."""
        if self.is_runnable:
            if self.afunc is not None:
                result: Awaitable[Any] = (
                    self.afunc.ainvoke(value)
                    if self.is_graph
                    else self.afunc.ainvoke(value, scope.config)
                )
                return result
            return None
        if not self.is_async:
            return None
        kwargs = self._kwargs(scope) if self.inject else None
        awaitable: Awaitable[Any] = (
            self.func(value, **kwargs) if kwargs else self.func(value)
        )
        return awaitable


def _run_coroutine(coro: Awaitable[Any]) -> Any:
    """Drive a coroutine from sync code (a sync ``invoke`` of a graph with async nodes)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(coro))
    raise RuntimeError(
        "An async node was reached from a synchronous call inside a running event loop; "
        "use `await graph.ainvoke(...)` / `graph.astream(...)` instead."
    )


async def _await(coro: Awaitable[Any]) -> Any:
    return await coro


def call_with_injection(func: Callable[..., Any], value: Any, scope: TaskScope) -> Any:
    """One-off call of a helper (path functions, handlers) with injection."""
    return NodeCallable(func).invoke(value, scope)

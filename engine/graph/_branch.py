"""Conditional edges: a path function's answer turned into writes (triggers and Sends)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Literal, get_args, get_origin, get_type_hints

from engine._internal._constants import END, TASKS
from engine._internal._scope import current_scope
from engine.errors import ErrorCode, InvalidUpdateError, error_message
from engine.pregel._node_callable import NodeCallable, _run_coroutine
from engine.types import Send

__all__ = ("BranchSpec", "branch_channel")


_NEVER_AWAITABLE = frozenset({str, list, tuple, type(None)})
"""What a path function usually returns: a node name, several, END... checked
by type first, as ``inspect.isawaitable`` goes through an ABC's instance check."""


def branch_channel(node: str) -> str:
    """The trigger channel of a node: writing it schedules the node next step.

    Interned: a route writes it every step and savers keep the name with each
    step's writes, so one string per node instead of one per step.
    """
    return sys.intern(f"branch:to:{node}")


def _literal_ends(path: Callable[..., Any]) -> dict[Hashable, str] | None:
    """``path_map`` inferred from a ``Literal[...]`` return annotation."""
    func = getattr(path, "__call__", path) if not inspect.isfunction(path) else path  # noqa: B004
    try:
        hints = get_type_hints(func)
    except Exception:
        return None
    ret = hints.get("return")
    if ret is None:
        return None
    options: list[Any] = []
    todo = [ret]
    while todo:
        item = todo.pop()
        if get_origin(item) is Literal:
            options.extend(get_args(item))
        elif (
            get_origin(item) in (list, Sequence)
            or str(get_origin(item)) == "typing.Union"
            or hasattr(item, "__args__")
            and get_origin(item) is not None
        ):
            todo.extend(get_args(item))
    if not options:
        return None
    return {o: o for o in options if isinstance(o, str)}


class BranchSpec:
    """One conditional edge group leaving a node."""

    __slots__ = ("ends", "input_schema", "name", "path", "source")

    def __init__(
        self,
        source: str,
        name: str,
        path: Callable[..., Any],
        path_map: dict[Hashable, str] | Sequence[str] | None,
    ) -> None:
        self.source = source
        self.name = name
        self.path = NodeCallable(path, name)
        if path_map is None:
            self.ends: dict[Hashable, str] | None = _literal_ends(path)
        elif isinstance(path_map, dict):
            self.ends = dict(path_map)
        else:
            self.ends = {p: p for p in path_map}
        self.input_schema: Any = None

    def destinations(
        self, result: Any, known_nodes: frozenset[str]
    ) -> list[str | Send]:
        """Where the path function's ``result`` sends the run."""
        items = result if isinstance(result, (list, tuple)) else [result]
        out: list[str | Send] = []
        for item in items:
            if isinstance(item, Send):
                if item.node not in known_nodes:
                    raise InvalidUpdateError(
                        error_message(
                            f"Conditional edge from {self.source!r} sent to unknown node "
                            f"{item.node!r}",
                            ErrorCode.INVALID_GRAPH,
                        )
                    )
                out.append(item)
                continue
            if item is None:
                raise InvalidUpdateError(
                    error_message(
                        f"Conditional edge from {self.source!r} returned None; return a node "
                        "name, END, a Send, or a list of them.",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
            if self.ends is not None:
                if item not in self.ends:
                    raise InvalidUpdateError(
                        error_message(
                            f"Conditional edge from {self.source!r} returned {item!r}, which is "
                            f"not in its path map {sorted(map(str, self.ends))}",
                            ErrorCode.INVALID_GRAPH,
                        )
                    )
                target = self.ends[item]
            else:
                target = item
            if target != END and target not in known_nodes:
                raise InvalidUpdateError(
                    error_message(
                        f"Conditional edge from {self.source!r} returned {target!r}, which is "
                        "not a node of this graph",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
            out.append(target)
        return out

    def route(self, state: Any) -> Any:
        """Call the path function on ``state`` (inside the running task's scope)."""
        scope = current_scope()
        path = self.path
        result = path.func(state) if scope is None else path.invoke(state, scope)
        if type(result) not in _NEVER_AWAITABLE and inspect.isawaitable(result):
            result = _run_coroutine(result)
        return result

    async def aroute(self, state: Any) -> Any:
        """Async twin of :meth:`route` (async path functions are awaited)."""
        scope = current_scope()
        path = self.path
        if scope is not None and path.is_async:
            awaitable = path.ainvoke(state, scope)
            assert awaitable is not None
            return await awaitable
        result = path.func(state) if scope is None else path.invoke(state, scope)
        if inspect.isawaitable(result):
            result = await result
        return result

    def writes(self, result: Any, known_nodes: frozenset[str]) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for target in self.destinations(result, known_nodes):
            if isinstance(target, Send):
                out.append((TASKS, target))
            elif target != END:
                out.append((branch_channel(target), None))
        return out

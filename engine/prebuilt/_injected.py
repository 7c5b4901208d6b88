"""Tool arguments the ToolNode fills in itself: the state, the store, a ToolRuntime.

A tool parameter annotated ``Annotated[dict, InjectedState]`` receives the graph
state (``InjectedState("key")``: one key of it), ``Annotated[Any,
InjectedStore()]`` the graph's store, and a parameter typed :class:`ToolRuntime`
all of it at once. These parameters are left out of the schema the model sees,
and a value the model sends for them is replaced.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, get_args, get_origin

from engine._internal._scope import current_scope
from engine._internal._typing import RunnableConfig
from engine.prebuilt._tool_events import emit_output_delta
from engine.runtime import ExecutionInfo, ServerInfo

__all__ = (
    "Injection",
    "InjectedState",
    "InjectedStore",
    "ToolRuntime",
    "find_injections",
    "injected_values",
    "tool_runtime",
)

ContextT = TypeVar("ContextT")
StateT = TypeVar("StateT")


class InjectedState:
    """Annotation: the ToolNode passes the graph state to this tool argument.

    Args:
        field: pass only this key (or attribute) of the state; ``None`` (or the
            bare class, ``Annotated[dict, InjectedState]``) passes all of it.

    Example:
        >>> def lookup(q: str, user: Annotated[str, InjectedState("user")]) -> str:
        ...     return f"{user} asked for {q}"
    """

    def __init__(self, field: str | None = None) -> None:
        self.field = field


class InjectedStore:
    """Annotation: the ToolNode passes the graph's store (``compile(store=...)``).

    Example:
        >>> def remember(fact: str, store: Annotated[Any, InjectedStore()]) -> str:
        ...     store.put(("facts",), fact, {"text": fact})
        ...     return "saved"
    """


@dataclass
class ToolRuntime(Generic[ContextT, StateT]):
    """Everything a tool may use besides the model's arguments.

    A tool parameter annotated with this class receives one, built for the call.
    """

    state: StateT
    """The graph state the ToolNode was called with."""
    context: ContextT
    """The run's context (``invoke(..., context=...)``)."""
    config: RunnableConfig
    """The running task's config."""
    stream_writer: Callable[[Any], None]
    """Writes to the ``custom`` stream."""
    tool_call_id: str | None
    """The id of the tool call being answered."""
    store: Any
    """The graph's store, or ``None``."""
    tools: list[Any] = field(default_factory=list)
    """The tools of the ToolNode running this call."""
    execution_info: ExecutionInfo | None = None
    """The running task's :class:`~engine.runtime.ExecutionInfo` (ids, attempt);
    ``None`` outside a graph."""
    server_info: ServerInfo | None = None
    """Who runs the graph on a server (:class:`~engine.runtime.ServerInfo`), or ``None``."""

    def emit_output_delta(self, delta: Any) -> None:
        """Stream a piece of this call's output before it returns.

        It becomes a ``tool-output-delta`` event (``{"event": "tool-output-delta",
        "tool_call_id", "delta"}``) on the ``tools`` stream mode, and a delta of
        the call's handle on a v3 run's ``run.tool_calls`` (with
        :class:`~engine.prebuilt.ToolCallTransformer`). When the run does not
        stream ``tools`` it does nothing, so tools may call it unconditionally.

        Args:
            delta: any value; streamed as given.
        """
        emit_output_delta(delta)


@dataclass(frozen=True, slots=True)
class Injection:
    """One injected parameter: ``kind`` is "state", "store" or "runtime"."""

    name: str
    kind: str
    field: str | None = None
    optional: bool = False
    """The parameter has a default: a missing state field leaves it out."""


def _injection_for(name: str, annotation: Any, optional: bool) -> Injection | None:
    if annotation is ToolRuntime or get_origin(annotation) is ToolRuntime:
        return Injection(name, "runtime")
    if get_origin(annotation) is typing.Annotated:
        for item in get_args(annotation)[1:]:
            if item is InjectedState:
                return Injection(name, "state")
            if isinstance(item, InjectedState):
                return Injection(name, "state", item.field, optional)
            if item is InjectedStore or isinstance(item, InjectedStore):
                return Injection(name, "store")
    if name == "runtime":  # as in LangGraph, a parameter so named gets the runtime
        return Injection(name, "runtime")
    return None


def find_injections(func: Callable[..., Any]) -> tuple[Injection, ...]:
    """The parameters of ``func`` the ToolNode fills in (none for most tools)."""
    try:
        hints = typing.get_type_hints(func, include_extras=True)
        params = inspect.signature(func).parameters
    except (NameError, TypeError, ValueError):
        return ()
    found = []
    for name, param in params.items():
        optional = param.default is not param.empty
        if (injection := _injection_for(name, hints.get(name), optional)) is not None:
            found.append(injection)
    return tuple(found)


def tool_runtime(
    state: Any,
    call: dict[str, Any],
    tools: list[Any],
    config: RunnableConfig | None = None,
) -> ToolRuntime[Any, Any]:
    """The :class:`ToolRuntime` of one tool call, from the running task (if any)."""
    scope = current_scope()
    runtime = scope.runtime if scope is not None else None
    return ToolRuntime(
        state=state,
        context=runtime.context if runtime is not None else None,
        config=scope.config if scope is not None else (config or {}),
        stream_writer=scope.stream_writer if scope is not None else _ignore,
        tool_call_id=call.get("id"),
        store=runtime.store if runtime is not None else None,
        tools=tools,
        execution_info=runtime.execution_info if runtime is not None else None,
        server_info=runtime.server_info if runtime is not None else None,
    )


def _state_values(
    injections: list[Injection], state: Any, tool_name: str, messages_key: str
) -> dict[str, Any]:
    if isinstance(state, list):  # a ToolNode given the message list itself
        fields = [i.field for i in injections]
        if fields[0] is not None and fields != [messages_key]:
            wanted = ", ".join(f for f in fields if f)
            raise ValueError(
                f"Invalid input to ToolNode: tool {tool_name!r} needs the graph state "
                f"as a dict (with {wanted}), not a list of messages."
            )
        state = {messages_key: state}
    values: dict[str, Any] = {}
    for injection in injections:
        field_name = injection.field
        if field_name is None:
            values[injection.name] = state
        elif isinstance(state, dict):
            if field_name in state:
                values[injection.name] = state[field_name]
            elif not injection.optional:
                raise KeyError(field_name)
        elif hasattr(state, field_name):
            values[injection.name] = getattr(state, field_name)
        elif not injection.optional:
            raise AttributeError(field_name)
    return values


def injected_values(
    injections: tuple[Injection, ...],
    runtime: ToolRuntime[Any, Any],
    tool_name: str,
    messages_key: str = "messages",
) -> dict[str, Any]:
    """The arguments to add to one tool call, from its :class:`ToolRuntime`.

    Raises:
        ValueError: the tool asks for the store and the graph has none, or for
            state fields and the ToolNode was given a list of messages.
        KeyError, AttributeError: the tool asks for a state field that is missing.
    """
    values: dict[str, Any] = {}
    state_injections = [i for i in injections if i.kind == "state"]
    if state_injections:
        values.update(
            _state_values(state_injections, runtime.state, tool_name, messages_key)
        )
    for injection in injections:
        if injection.kind == "store":
            if runtime.store is None:
                raise ValueError(
                    f"Tool {tool_name!r} asks for the store (InjectedStore): compile "
                    "the graph with store=..."
                )
            values[injection.name] = runtime.store
        elif injection.kind == "runtime":
            values[injection.name] = runtime
    return values


def _ignore(_chunk: Any) -> None:
    return None

"""Middleware for :func:`engine.agents.create_agent`: the base class, the state, the decorators.

A middleware changes what the agent does at fixed points, with LangChain 1.x's
semantics:

- **Lifecycle hooks** ``before_agent`` / ``before_model`` / ``after_model`` /
  ``after_agent`` (and their ``a``-prefixed async twins) each become a graph
  node named ``"<middleware name>.<hook>"``. A hook gets ``(state, runtime)`` and
  returns a state update, ``None``, or a ``Command``. An update may set
  ``jump_to`` (``"model"``, ``"tools"`` or ``"end"``) to leave the normal path, but
  only to the targets the hook declares with ``@hook_config(can_jump_to=[...])``
  (or the decorators' ``can_jump_to``): those become the node's conditional
  edges. A hook that jumps somewhere it did not declare raises ``ValueError``
  (LangChain silently ignores it).
- **Wrappers** ``wrap_model_call(request, handler)`` and ``wrap_tool_call(request,
  handler)`` surround each model call and each tool call. They compose in
  registration order, the first middleware outermost; a wrapper may call the
  handler any number of times (retry), change the request (``request.override``)
  or answer without calling it.
- **State**: a middleware's ``state_schema`` (a TypedDict extending
  :class:`AgentState`) adds keys to the agent's state. Annotate a key with
  :data:`OmitFromInput`, :data:`OmitFromOutput` or :data:`PrivateStateAttr` to
  keep it out of the graph's input schema, output schema, or both.
- ``tools``: tools a middleware brings; the agent can call them like its own.

``jump_to`` is private and ephemeral: it is not in the input or output schema, it
lives for one step, and checkpoints never store it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NotRequired,
    Protocol,
    Required,
    TypedDict,
    TypeVar,
    cast,
    overload,
)

from engine._internal._typing import MISSING
from engine.channels.ephemeral_value import EphemeralValue
from engine.graph.message import add_messages
from engine.prebuilt._chat import system_message, text_of
from engine.prebuilt.tool_node import ToolCallRequest, ToolCallWrapper

__all__ = (
    "AgentMiddleware",
    "AgentState",
    "JumpTo",
    "ModelCallResult",
    "ModelRequest",
    "ModelResponse",
    "OmitFromInput",
    "OmitFromOutput",
    "OmitFromSchema",
    "PrivateStateAttr",
    "StepValue",
    "ToolCallRequest",
    "ToolCallWrapper",
    "after_agent",
    "after_model",
    "before_agent",
    "before_model",
    "dynamic_prompt",
    "hook_config",
    "wrap_model_call",
    "wrap_tool_call",
)

JumpTo = Literal["tools", "model", "end"]
"""Where a hook may send the agent next."""

ResponseT = TypeVar("ResponseT")
StateT = TypeVar("StateT")
ContextT = TypeVar("ContextT")
CallableT = TypeVar("CallableT", bound=Callable[..., Any])

HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
"""The lifecycle hooks, in the order the agent reaches them."""


class StepValue(EphemeralValue[Any]):
    """An ephemeral value no checkpoint stores: written in one step, read in the
    next, then gone (the channel of ``jump_to``)."""

    __slots__ = ()

    def checkpoint(self) -> Any:
        return MISSING


@dataclass(frozen=True)
class OmitFromSchema:
    """Annotation: keep a state key out of the agent's input and/or output schema."""

    input: bool = True
    """Leave the key out of the input schema."""
    output: bool = True
    """Leave the key out of the output schema."""


OmitFromInput = OmitFromSchema(input=True, output=False)
"""The key is not accepted as input (it is still returned)."""
OmitFromOutput = OmitFromSchema(input=False, output=True)
"""The key is accepted as input but not returned."""
PrivateStateAttr = OmitFromSchema(input=True, output=True)
"""The key is internal: neither accepted nor returned."""


class AgentState(TypedDict, Generic[ResponseT]):
    """The agent's state: the conversation, a pending jump, the structured answer."""

    messages: Required[Annotated[list[Any], add_messages]]
    jump_to: NotRequired[Annotated[JumpTo | None, StepValue, PrivateStateAttr]]
    structured_response: NotRequired[Annotated[ResponseT, OmitFromInput]]


@dataclass
class ModelRequest:
    """One model call, as ``wrap_model_call`` sees it. Change it with :meth:`override`."""

    model: Any
    """The chat model to call."""
    messages: list[Any]
    """The conversation, without the system message."""
    system_message: Any = None
    """The system message put first, if any."""
    tool_choice: Any = None
    """``"auto"``, ``"any"``, a tool name, or ``None`` (the model's default)."""
    tools: list[Any] = field(default_factory=list)
    """The tools offered (``engine.prebuilt.Tool`` objects)."""
    response_format: Any = None
    """The structured output strategy, if any."""
    state: Any = None
    """The agent's state."""
    runtime: Any = None
    """The run's :class:`~engine.runtime.Runtime`."""
    model_settings: dict[str, Any] = field(default_factory=dict)
    """Extra options for the model call (temperature...)."""

    @property
    def system_prompt(self) -> str | None:
        """The system message's text."""
        if self.system_message is None:
            return None
        return text_of(self.system_message)

    def override(self, **overrides: Any) -> ModelRequest:
        """A copy with the given fields replaced (``system_prompt`` sets the system
        message from text; ``None`` removes it). The request itself is unchanged."""
        if "system_prompt" in overrides:
            if "system_message" in overrides:
                raise ValueError("Give system_prompt or system_message, not both.")
            prompt = overrides.pop("system_prompt")
            overrides["system_message"] = (
                None if prompt is None else system_message(prompt)
            )
        return dataclasses.replace(self, **overrides)


@dataclass
class ModelResponse:
    """What a model call produced: its messages (the AI message, and a tool message
    when the structured answer came as a tool call) and the structured answer."""

    result: list[Any]
    structured_response: Any = None


ModelCallResult = ModelResponse | Any
"""What ``wrap_model_call`` returns: a :class:`ModelResponse` or just an AI message."""


def _overridden(middleware: AgentMiddleware[Any, Any], name: str) -> bool:
    return getattr(type(middleware), name) is not getattr(AgentMiddleware, name)


class AgentMiddleware(Generic[StateT, ContextT]):
    """Base class of agent middleware: override the hooks you need.

    Example::

        class Trim(AgentMiddleware):
            @hook_config(can_jump_to=["end"])
            def before_model(self, state, runtime):
                if len(state["messages"]) > 100:
                    return {"jump_to": "end"}
                return None
    """

    state_schema: type[Any] = AgentState
    """The state keys this middleware needs (a TypedDict extending AgentState)."""
    tools: Sequence[Any] = ()
    """Tools this middleware adds to the agent."""

    @property
    def name(self) -> str:
        """The middleware's name, used in node names; the class name by default.
        Two middlewares of one agent must have different names."""
        return type(self).__name__

    def has(self, hook: str) -> bool:
        """Whether this middleware implements ``hook`` (sync or async)."""
        return _overridden(self, hook) or _overridden(self, f"a{hook}")

    def can_jump_to(self, hook: str) -> list[str]:
        """The jump targets ``hook`` declared with :func:`hook_config`."""
        for name in (hook, f"a{hook}"):
            method = getattr(type(self), name)
            if _overridden(self, name) and hasattr(method, "__can_jump_to__"):
                return list(method.__can_jump_to__)
        return []

    def before_agent(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        """Runs once per invocation, before anything else."""
        return None

    async def abefore_agent(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        return None

    def before_model(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        """Runs before every model call."""
        return None

    async def abefore_model(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        return None

    def after_model(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        """Runs after every model call."""
        return None

    async def aafter_model(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        return None

    def after_agent(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        """Runs once per invocation, at the end."""
        return None

    async def aafter_agent(self, state: StateT, runtime: Any) -> dict[str, Any] | None:
        return None

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelCallResult:
        """Surround the model call: call ``handler(request)`` (any number of times)
        or answer without it."""
        raise NotImplementedError(
            f"{self.name} defines only awrap_model_call: run the agent with "
            "ainvoke()/astream(), or implement wrap_model_call too."
        )

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelCallResult:
        """Async twin of :meth:`wrap_model_call`."""
        raise NotImplementedError(
            f"{self.name} defines only wrap_model_call: run the agent with "
            "invoke()/stream(), or implement awrap_model_call too."
        )

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Any],
    ) -> Any:
        """Surround one tool call: return its tool message or ``Command``."""
        raise NotImplementedError(
            f"{self.name} defines only awrap_tool_call: run the agent with "
            "ainvoke()/astream(), or implement wrap_tool_call too."
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Any]],
    ) -> Any:
        """Async twin of :meth:`wrap_tool_call`."""
        raise NotImplementedError(
            f"{self.name} defines only wrap_tool_call: run the agent with "
            "invoke()/stream(), or implement awrap_tool_call too."
        )


def hook_config(
    *, can_jump_to: list[JumpTo] | None = None
) -> Callable[[CallableT], CallableT]:
    """Declare where a hook method may jump (``"model"``, ``"tools"``, ``"end"``)."""

    def decorate(func: CallableT) -> CallableT:
        if can_jump_to is not None:
            _check_targets(can_jump_to)
            func.__can_jump_to__ = list(can_jump_to)  # type: ignore[attr-defined]
        return func

    return decorate


def _check_targets(targets: Sequence[str]) -> None:
    unknown = [t for t in targets if t not in ("model", "tools", "end")]
    if unknown:
        raise ValueError(
            f"Unknown jump target(s) {unknown}: use 'model', 'tools' or 'end'."
        )


def _middleware_class(
    name: str, attrs: dict[str, Any], state_schema: type[Any] | None, tools: Any
) -> AgentMiddleware[Any, Any]:
    attrs = {
        "state_schema": state_schema or AgentState,
        "tools": list(tools or ()),
        "__module__": __name__,
        **attrs,
    }
    cls = type(name, (AgentMiddleware,), attrs)
    return cast(AgentMiddleware[Any, Any], cls())


def _hook_method(f: Callable[..., Any], hook: str) -> tuple[str, Any]:
    """The middleware method that calls ``f(first, second)`` and the attribute it
    goes in: ``hook`` for a plain function, ``a<hook>`` for a coroutine function."""
    if inspect.iscoroutinefunction(f):

        async def amethod(self: Any, first: Any, second: Any) -> Any:
            return await f(first, second)

        return f"a{hook}", amethod

    def method(self: Any, first: Any, second: Any) -> Any:
        return f(first, second)

    return hook, method


class _HookDecorator(Protocol):
    """``@before_model`` and its kin: used bare, or called with options first."""

    @overload
    def __call__(self, func: Callable[..., Any]) -> AgentMiddleware[Any, Any]: ...
    @overload
    def __call__(
        self,
        func: None = None,
        *,
        state_schema: type[Any] | None = None,
        tools: Sequence[Any] | None = None,
        can_jump_to: list[JumpTo] | None = None,
        name: str | None = None,
    ) -> Callable[[Callable[..., Any]], AgentMiddleware[Any, Any]]: ...


def _hook_decorator(hook: str, when: str) -> _HookDecorator:
    def decorator(
        func: Callable[..., Any] | None = None,
        *,
        state_schema: type[Any] | None = None,
        tools: Sequence[Any] | None = None,
        can_jump_to: list[JumpTo] | None = None,
        name: str | None = None,
    ) -> Any:
        def build(f: Callable[..., Any]) -> AgentMiddleware[Any, Any]:
            targets = (
                can_jump_to
                if can_jump_to is not None
                else getattr(f, "__can_jump_to__", [])
            )
            attr, method = _hook_method(f, hook)
            if targets:
                hook_config(can_jump_to=list(targets))(method)
            return _middleware_class(
                str(name or getattr(f, "__name__", hook)),
                {attr: method},
                state_schema,
                tools,
            )

        return build(func) if func is not None else build

    decorator.__name__ = decorator.__qualname__ = hook
    decorator.__doc__ = (
        f"A middleware from a function ``(state, runtime) -> update | None`` run as "
        f"its ``{hook}`` hook ({when}). Bare or with ``state_schema``, ``tools``, "
        "``can_jump_to`` and ``name`` (default: the function's name)."
    )
    return cast(_HookDecorator, decorator)


before_agent = _hook_decorator("before_agent", "once per run, first")
before_model = _hook_decorator("before_model", "before each model call")
after_model = _hook_decorator("after_model", "after each model call")
after_agent = _hook_decorator("after_agent", "once per run, last")


def _wrapper_decorator(
    hook: str,
    func: Callable[..., Any] | None,
    state_schema: type[Any] | None,
    tools: Sequence[Any] | None,
    name: str | None,
) -> Any:
    def build(f: Callable[..., Any]) -> AgentMiddleware[Any, Any]:
        attr, method = _hook_method(f, hook)
        return _middleware_class(
            str(name or getattr(f, "__name__", hook)),
            {attr: method},
            state_schema,
            tools,
        )

    return build(func) if func is not None else build


def wrap_model_call(
    func: Callable[..., Any] | None = None,
    *,
    state_schema: type[Any] | None = None,
    tools: Sequence[Any] | None = None,
    name: str | None = None,
) -> Any:
    """A middleware from a function ``(request, handler) -> ModelResponse | AI message``
    surrounding each model call (sync or async)."""
    return _wrapper_decorator("wrap_model_call", func, state_schema, tools, name)


def wrap_tool_call(
    func: Callable[..., Any] | None = None,
    *,
    tools: Sequence[Any] | None = None,
    name: str | None = None,
) -> Any:
    """A middleware from a function ``(request, handler) -> tool message | Command``
    surrounding each tool call (sync or async)."""
    return _wrapper_decorator("wrap_tool_call", func, None, tools, name)


def dynamic_prompt(
    func: Callable[[ModelRequest], Any] | None = None,
) -> Any:
    """A middleware setting the system prompt of each model call from
    ``func(request) -> str`` (sync or async)."""

    def build(f: Callable[[ModelRequest], Any]) -> AgentMiddleware[Any, Any]:
        if inspect.iscoroutinefunction(f):

            async def awrap(self: Any, request: ModelRequest, handler: Any) -> Any:
                return await handler(request.override(system_prompt=await f(request)))

            def swrap_async_only(self: Any, request: ModelRequest, handler: Any) -> Any:
                raise NotImplementedError(
                    f"{getattr(f, '__name__', 'dynamic_prompt')} is async: run the "
                    "agent with ainvoke()/astream()."
                )

            attrs: dict[str, Any] = {
                "awrap_model_call": awrap,
                "wrap_model_call": swrap_async_only,
            }
        else:

            def swrap(self: Any, request: ModelRequest, handler: Any) -> Any:
                return handler(request.override(system_prompt=f(request)))

            async def awrap_sync(self: Any, request: ModelRequest, handler: Any) -> Any:
                return await handler(request.override(system_prompt=f(request)))

            attrs = {"wrap_model_call": swrap, "awrap_model_call": awrap_sync}
        return _middleware_class(
            str(getattr(f, "__name__", "dynamic_prompt")), attrs, None, None
        )

    return build(func) if func is not None else build

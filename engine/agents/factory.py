"""create_agent: a model, tools, middleware and a response format compiled to a graph.

The graph has LangChain 1.x's shape, so drawings, streams and checkpoints read
the same:

- nodes ``model``, ``tools`` (when there are tools, or a middleware wraps tool
  calls) and one per middleware hook: ``"<name>.before_agent"``,
  ``"<name>.before_model"``, ``"<name>.after_model"``, ``"<name>.after_agent"``;
- ``START -> before_agent hooks -> [before_model hooks -> model -> after_model
  hooks (last registered first)] -> ... -> after_agent hooks (last registered
  first) -> END``; the bracket is the loop;
- leaving the loop: pending tool calls go to ``tools`` as one ``Send`` per call
  (each task carries its call and sees the step's state; the answers merge with
  ``add_messages`` at the barrier); an answer without tool calls, or a structured
  answer, ends the loop; tool answers go back to the loop's first node, unless
  every tool called has ``return_direct`` or a structured output tool answered;
- ``jump_to`` set by a hook overrides the normal route (see
  :mod:`engine.agents.middleware.types`).

The compiled graph runs with ``recursion_limit=10000`` unless the call sets one.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import (
    Any,
    NotRequired,
    Required,
    TypedDict,
    get_args,
    get_origin,
    get_type_hints,
)

from engine._internal._constants import END, START
from engine.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    OmitFromSchema,
)
from engine.agents.structured_output import (
    AutoStrategy,
    MultipleStructuredOutputsError,
    OutputToolBinding,
    ProviderStrategy,
    ProviderStrategyBinding,
    StructuredOutputError,
    StructuredOutputValidationError,
    ToolStrategy,
    _error_answer,
)
from engine.graph.state import CompiledStateGraph, StateGraph
from engine.prebuilt._chat import (
    in_conversation_form,
    is_ai,
    is_tool,
    message_name,
    system_message,
    tool_call_id,
    tool_calls,
    tool_message,
    with_name,
)
from engine.prebuilt.chat_agent_executor import _Node, _resolve_string_model
from engine.prebuilt.chat_model import acall_model, call_model, is_langchain_model
from engine.prebuilt.tool_node import ToolCallRequest, ToolCallWithContext, ToolNode
from engine.prebuilt.tools import Tool
from engine.runtime import get_runtime
from engine.types import Send

__all__ = ("create_agent",)

ModelHandler = Callable[[ModelRequest], ModelResponse]
AsyncModelHandler = Callable[[ModelRequest], Awaitable[ModelResponse]]

_FALLBACK_STRUCTURED_MODELS = (
    "grok",
    "gpt-5",
    "gpt-4.1",
    "gpt-4o",
    "gpt-oss",
    "o3-pro",
    "o3-mini",
)


# -- composing wrappers -------------------------------------------------------------


def _as_response(result: Any) -> ModelResponse:
    """A wrapper's answer as a ModelResponse (an AI message alone is accepted)."""
    if isinstance(result, ModelResponse):
        return result
    return ModelResponse(result=[result])


def _chain_model_wrappers(
    wrappers: Sequence[Callable[[ModelRequest, ModelHandler], Any]],
) -> Callable[[ModelRequest, ModelHandler], ModelResponse] | None:
    """One ``wrap_model_call`` from many: the first is outermost."""
    if not wrappers:
        return None

    def compose(
        outer: Callable[[ModelRequest, ModelHandler], Any],
        inner: Callable[[ModelRequest, ModelHandler], Any],
    ) -> Callable[[ModelRequest, ModelHandler], ModelResponse]:
        def composed(request: ModelRequest, handler: ModelHandler) -> ModelResponse:
            return _as_response(
                outer(request, lambda r: _as_response(inner(r, handler)))
            )

        return composed

    result: Callable[[ModelRequest, ModelHandler], Any] = wrappers[-1]
    for wrapper in reversed(wrappers[:-1]):
        result = compose(wrapper, result)
    last = result
    return lambda request, handler: _as_response(last(request, handler))


def _chain_async_model_wrappers(
    wrappers: Sequence[Callable[[ModelRequest, AsyncModelHandler], Awaitable[Any]]],
) -> Callable[[ModelRequest, AsyncModelHandler], Awaitable[ModelResponse]] | None:
    """Async twin of :func:`_chain_model_wrappers`."""
    if not wrappers:
        return None

    def compose(
        outer: Callable[[ModelRequest, AsyncModelHandler], Awaitable[Any]],
        inner: Callable[[ModelRequest, AsyncModelHandler], Awaitable[Any]],
    ) -> Callable[[ModelRequest, AsyncModelHandler], Awaitable[ModelResponse]]:
        async def composed(
            request: ModelRequest, handler: AsyncModelHandler
        ) -> ModelResponse:
            async def call_inner(r: ModelRequest) -> ModelResponse:
                return _as_response(await inner(r, handler))

            return _as_response(await outer(request, call_inner))

        return composed

    result: Callable[[ModelRequest, AsyncModelHandler], Awaitable[Any]] = wrappers[-1]
    for wrapper in reversed(wrappers[:-1]):
        result = compose(wrapper, result)
    last = result

    async def chained(
        request: ModelRequest, handler: AsyncModelHandler
    ) -> ModelResponse:
        return _as_response(await last(request, handler))

    return chained


def _chain_tool_wrappers(
    wrappers: Sequence[Callable[..., Any]],
) -> Callable[..., Any] | None:
    """One ``wrap_tool_call`` from many (sync or async alike): the first is outermost."""
    if not wrappers:
        return None
    result = wrappers[-1]
    for outer in reversed(wrappers[:-1]):
        inner = result

        def composed(
            request: ToolCallRequest,
            execute: Callable[[ToolCallRequest], Any],
            outer: Callable[..., Any] = outer,
            inner: Callable[..., Any] = inner,
        ) -> Any:
            return outer(request, lambda r: inner(r, execute))

        result = composed
    return result


# -- state schemas ------------------------------------------------------------------


def _metadata(annotation: Any) -> tuple[Any, ...]:
    while get_origin(annotation) in (Required, NotRequired):
        annotation = get_args(annotation)[0]
    return tuple(getattr(annotation, "__metadata__", ()))


def _merged_schema(
    schemas: Sequence[type[Any]], name: str, omit: str | None
) -> type[Any]:
    """One TypedDict with every schema's keys, later schemas winning; keys marked
    ``OmitFromSchema(<omit>=True)`` are left out."""
    fields: dict[str, Any] = {}
    for schema in schemas:
        for key, annotation in get_type_hints(schema, include_extras=True).items():
            if omit is not None and any(
                isinstance(m, OmitFromSchema) and getattr(m, omit)
                for m in _metadata(annotation)
            ):
                fields.pop(key, None)
                continue
            fields[key] = annotation
    return TypedDict(name, fields)  # type: ignore[operator, no-any-return]


# -- nodes ---------------------------------------------------------------------------


class _HookNode:
    """One middleware hook as a graph node (sync and async)."""

    def __init__(self, middleware: AgentMiddleware[Any, Any], hook: str) -> None:
        self.middleware = middleware
        self.hook = hook
        self.__name__ = f"{middleware.name}.{hook}"
        base = AgentMiddleware
        self.has_sync = getattr(type(middleware), hook) is not getattr(base, hook)
        self.has_async = getattr(type(middleware), f"a{hook}") is not getattr(
            base, f"a{hook}"
        )
        self.targets = set(middleware.can_jump_to(hook))

    def _checked(self, result: Any) -> Any:
        if result is None:
            return {}
        target = result.get("jump_to") if isinstance(result, dict) else None
        if target and target not in self.targets:
            raise ValueError(
                f"{self.__name__} returned jump_to={target!r} but declares "
                f"can_jump_to={sorted(self.targets)}: declare the target with "
                f"@hook_config(can_jump_to=[{target!r}]) (or the decorator's "
                "can_jump_to)."
            )
        return result

    def invoke(self, state: Any, config: Any = None, **kwargs: Any) -> Any:
        if not self.has_sync:
            raise NotImplementedError(
                f"{self.__name__} is async only: run the agent with ainvoke()/astream()."
            )
        return self._checked(getattr(self.middleware, self.hook)(state, get_runtime()))

    async def ainvoke(self, state: Any, config: Any = None, **kwargs: Any) -> Any:
        runtime: Any = get_runtime()
        if self.has_async:
            result = await getattr(self.middleware, f"a{self.hook}")(state, runtime)
        else:
            result = getattr(self.middleware, self.hook)(state, runtime)
        return self._checked(result)


def _supports_provider_strategy(model: Any, tools: Sequence[Any]) -> bool:
    declared = getattr(model, "supports_structured_output", None)
    if isinstance(declared, bool):
        return declared
    if not is_langchain_model(model):
        return False
    name = (
        getattr(model, "model_name", None)
        or getattr(model, "model", None)
        or getattr(model, "model_id", "")
    )
    profile = getattr(model, "profile", None)
    if (
        isinstance(profile, dict)
        and profile.get("structured_output")
        and not (tools and isinstance(name, str) and "gemini" in name.lower())
    ):
        return True
    return isinstance(name, str) and any(
        part in name.lower() for part in _FALLBACK_STRUCTURED_MODELS
    )


def _last_ai_and_tool_messages(messages: Sequence[Any]) -> tuple[Any, list[Any]]:
    for index in range(len(messages) - 1, -1, -1):
        if is_ai(messages[index]):
            return messages[index], [m for m in messages[index + 1 :] if is_tool(m)]
    return None, []


def _invalid_tool_call_answers(message: Any) -> list[Any]:
    answers = []
    for call in getattr(message, "invalid_tool_calls", None) or ():
        answers.append(
            tool_message(
                f"Error: the arguments of this tool call are not valid JSON "
                f"({call.get('error') or 'unparsable'}). Call the tool again with "
                "valid JSON arguments.",
                tool_call_id=call.get("id"),
                name=call.get("name"),
                status="error",
            )
        )
    return answers


# -- the factory -------------------------------------------------------------------


def create_agent(
    model: Any,
    tools: Sequence[Any] | None = None,
    *,
    system_prompt: Any = None,
    middleware: Sequence[AgentMiddleware[Any, Any]] = (),
    response_format: Any = None,
    state_schema: type[Any] | None = None,
    context_schema: type[Any] | None = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    name: str | None = None,
    cache: Any = None,
) -> CompiledStateGraph:
    """An agent graph calling ``model`` and ``tools`` in a loop, shaped by ``middleware``.

    Args:
        model: a chat model (this engine's protocol, e.g. ``ScriptedChatModel``,
            or a LangChain chat model), or a ``"provider:model"`` string (needs
            ``langchain``).
        tools: functions, ``Tool`` objects, LangChain tools, or dicts (provider
            built-in tools, passed to the model only). None or empty: a single
            model call, no tool loop.
        system_prompt: text or a system message put before the conversation on
            each model call.
        middleware: :class:`~engine.agents.middleware.AgentMiddleware` objects, in
            order: hooks run in this order before the model and in reverse after
            it; wrappers nest with the first outermost; state schemas merge in
            this order.
        response_format: a :class:`ToolStrategy`, :class:`ProviderStrategy`, or a
            bare schema (auto: provider strategy when the model supports it).
        state_schema: a TypedDict extending ``AgentState``; merged last.
        context_schema: the schema of the run's ``context``.
        checkpointer, store, interrupt_before, interrupt_after, debug, name,
            cache: as for :meth:`StateGraph.compile`; ``name`` is also set on the
            model's messages.

    Raises:
        ValueError: two middlewares share a name.
    """
    if isinstance(model, str):
        model = _resolve_string_model(model)
    sys_message = (
        system_prompt
        if system_prompt is None or not isinstance(system_prompt, str)
        else system_message(system_prompt)
    )
    tools = list(tools or ())
    middleware = list(middleware)
    names = [m.name for m in middleware]
    if duplicates := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(
            f"Please remove duplicate middleware instances: {duplicates} appear more "
            "than once (give each instance its own name)."
        )

    # structured output
    initial_format: Any
    if response_format is None or isinstance(
        response_format, (ToolStrategy, ProviderStrategy, AutoStrategy)
    ):
        initial_format = response_format
    else:
        initial_format = AutoStrategy(schema=response_format)
    setup_strategy: ToolStrategy[Any] | None = None
    if isinstance(initial_format, AutoStrategy):
        setup_strategy = ToolStrategy(initial_format.schema)
    elif isinstance(initial_format, ToolStrategy):
        setup_strategy = initial_format
    structured_tools: dict[str, OutputToolBinding[Any]] = {}
    if setup_strategy is not None:
        for spec in setup_strategy.schema_specs:
            binding = OutputToolBinding.from_schema_spec(spec)
            structured_tools[binding.tool.name] = binding

    # tools and tool call wrappers
    def wraps(m: AgentMiddleware[Any, Any], hook: str) -> bool:
        return m.has(hook)

    tool_wrapping = [m for m in middleware if wraps(m, "wrap_tool_call")]
    sync_tool_wrapper = _chain_tool_wrappers([m.wrap_tool_call for m in tool_wrapping])
    async_tool_wrapper = _chain_tool_wrappers(
        [m.awrap_tool_call for m in tool_wrapping]
    )
    builtin_tools = [t for t in tools if isinstance(t, dict)]
    client_tools = [t for m in middleware for t in m.tools] + [
        t for t in tools if not isinstance(t, dict)
    ]
    tool_node = (
        ToolNode(
            client_tools,
            wrap_tool_call=sync_tool_wrapper,
            awrap_tool_call=async_tool_wrapper,
        )
        if client_tools or tool_wrapping
        else None
    )
    default_tools: list[Any] = [
        *(tool_node.tools_by_name.values() if tool_node is not None else ()),
        *builtin_tools,
    ]

    # hooks and model call wrappers
    with_hook = {
        hook: [m for m in middleware if m.has(hook)]
        for hook in ("before_agent", "before_model", "after_model", "after_agent")
    }
    model_wrapping = [m for m in middleware if m.has("wrap_model_call")]
    sync_model_wrapper = _chain_model_wrappers(
        [m.wrap_model_call for m in model_wrapping]
    )
    async_model_wrapper = _chain_async_model_wrappers(
        [m.awrap_model_call for m in model_wrapping]
    )

    # state
    schemas: list[type[Any]] = [AgentState]
    for m in middleware:
        if m.state_schema not in schemas:
            schemas.append(m.state_schema)
    if state_schema is not None:
        schemas.append(state_schema)
    resolved_schema = _merged_schema(schemas, "StateSchema", None)
    input_schema = _merged_schema(schemas, "InputSchema", "input")
    output_schema = _merged_schema(schemas, "OutputSchema", "output")

    # -- the model call ----------------------------------------------------------

    def effective_format(request: ModelRequest) -> Any:
        unknown = [
            t.name
            for t in request.tools
            if isinstance(t, Tool)
            and (tool_node is None or t.name not in tool_node.tools_by_name)
        ]
        if unknown and not tool_wrapping:
            raise ValueError(
                f"Middleware offered tools the agent cannot run: {unknown}. Pass them "
                "to create_agent(tools=[...]) (or a middleware's tools), or run them "
                "yourself in a wrap_tool_call middleware."
            )
        chosen = request.response_format
        if chosen is not None and not isinstance(
            chosen, (AutoStrategy, ToolStrategy, ProviderStrategy)
        ):
            chosen = AutoStrategy(schema=chosen)
        if isinstance(chosen, AutoStrategy):
            if _supports_provider_strategy(request.model, request.tools):
                return ProviderStrategy(chosen.schema)
            if chosen is initial_format and setup_strategy is not None:
                return setup_strategy
            return ToolStrategy(chosen.schema)
        return chosen

    def model_call(
        request: ModelRequest,
    ) -> tuple[list[Any], list[Any], dict[str, Any], Any]:
        strategy = effective_format(request)
        offered = list(request.tools)
        options = dict(request.model_settings)
        if isinstance(strategy, ProviderStrategy):
            options.update(strategy.to_model_kwargs())
            if is_langchain_model(request.model):
                options["strict"] = True
        elif isinstance(strategy, ToolStrategy):
            for spec in strategy.schema_specs:
                if spec.name not in structured_tools:
                    raise ValueError(
                        f"ToolStrategy specifies tool '{spec.name}' which wasn't "
                        "declared in the original response format when creating the "
                        "agent."
                    )
            offered.extend(binding.tool for binding in structured_tools.values())
            options["tool_choice"] = "any" if structured_tools else request.tool_choice
        elif request.tool_choice is not None:
            options["tool_choice"] = request.tool_choice
        if options.get("tool_choice") is None:
            options.pop("tool_choice", None)
        messages = list(request.messages)
        if request.system_message is not None:
            messages = [request.system_message, *messages]
        return messages, offered, options, strategy

    def execute(request: ModelRequest) -> ModelResponse:
        messages, offered, options, strategy = model_call(request)
        output = call_model(request.model, messages, offered, **options)
        return handle_output(output, strategy)

    async def aexecute(request: ModelRequest) -> ModelResponse:
        messages, offered, options, strategy = model_call(request)
        output = await acall_model(request.model, messages, offered, **options)
        return handle_output(output, strategy)

    def handle_output(output: Any, strategy: Any) -> ModelResponse:
        output = with_name(in_conversation_form(output), name)
        calls = tool_calls(output)
        if isinstance(strategy, ProviderStrategy):
            if calls:
                return ModelResponse([output])
            binding = ProviderStrategyBinding.from_schema_spec(strategy.schema_spec)
            try:
                parsed = binding.parse(output)
            except Exception as exc:
                raise StructuredOutputValidationError(
                    strategy.schema_spec.name, exc, output
                ) from exc
            return ModelResponse([output], parsed)
        if isinstance(strategy, ToolStrategy) and calls:
            structured = [c for c in calls if c["name"] in structured_tools]
            if len(structured) > 1:
                error: StructuredOutputError = MultipleStructuredOutputsError(
                    [c["name"] for c in structured], output
                )
                answer = _error_answer(error, strategy)
                if answer is None:
                    raise error
                return ModelResponse(
                    [
                        output,
                        *(
                            tool_message(answer, tool_call_id=c["id"], name=c["name"])
                            for c in structured
                        ),
                    ]
                )
            if structured:
                call = structured[0]
                try:
                    parsed = structured_tools[call["name"]].parse(
                        call.get("args") or {}
                    )
                except Exception as exc:
                    error = StructuredOutputValidationError(call["name"], exc, output)
                    answer = _error_answer(error, strategy)
                    if answer is None:
                        raise error from exc
                    return ModelResponse(
                        [
                            output,
                            tool_message(
                                answer, tool_call_id=call["id"], name=call["name"]
                            ),
                        ]
                    )
                content = (
                    strategy.tool_message_content
                    or f"Returning structured response: {parsed}"
                )
                return ModelResponse(
                    [
                        output,
                        tool_message(
                            content, tool_call_id=call["id"], name=call["name"]
                        ),
                    ],
                    parsed,
                )
        if invalid := _invalid_tool_call_answers(output):
            return ModelResponse([output, *invalid])
        return ModelResponse([output])

    def request_for(state: Any, runtime: Any) -> ModelRequest:
        return ModelRequest(
            model=model,
            messages=list(state["messages"]),
            system_message=sys_message,
            tool_choice=None,
            tools=list(default_tools),
            response_format=initial_format,
            state=state,
            runtime=runtime,
        )

    def update_of(response: ModelResponse) -> dict[str, Any]:
        update: dict[str, Any] = {"messages": list(response.result)}
        if response.structured_response is not None:
            update["structured_response"] = response.structured_response
        return update

    def model_node(state: Any, runtime: Any) -> dict[str, Any]:
        request = request_for(state, runtime)
        if sync_model_wrapper is None:
            return update_of(execute(request))
        return update_of(sync_model_wrapper(request, execute))

    async def amodel_node(state: Any, runtime: Any) -> dict[str, Any]:
        request = request_for(state, runtime)
        if async_model_wrapper is None:
            return update_of(await aexecute(request))
        return update_of(await async_model_wrapper(request, aexecute))

    # -- the graph -----------------------------------------------------------------

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(
        resolved_schema,
        context_schema=context_schema,
        input_schema=input_schema,
        output_schema=output_schema,
    )
    graph.add_node("model", _Node("model", model_node, amodel_node))
    if tool_node is not None:
        graph.add_node("tools", tool_node)
    for m in middleware:
        for hook in ("before_agent", "before_model", "after_model", "after_agent"):
            if m.has(hook):
                graph.add_node(
                    f"{m.name}.{hook}",
                    _HookNode(m, hook),
                    input_schema=resolved_schema,
                )

    before_agent = with_hook["before_agent"]
    before_model = with_hook["before_model"]
    after_model = with_hook["after_model"]
    after_agent = with_hook["after_agent"]
    loop_entry = f"{before_model[0].name}.before_model" if before_model else "model"
    entry = f"{before_agent[0].name}.before_agent" if before_agent else loop_entry
    loop_exit = f"{after_model[0].name}.after_model" if after_model else "model"
    exit_node = f"{after_agent[-1].name}.after_agent" if after_agent else END

    def jump(target: Any) -> str | None:
        if target == "model":
            return loop_entry
        if target == "end":
            return exit_node
        if target == "tools":
            return "tools"
        return None

    def add_hook_edge(m: AgentMiddleware[Any, Any], hook: str, default: str) -> None:
        source = f"{m.name}.{hook}"
        targets = m.can_jump_to(hook)
        if not targets:
            graph.add_edge(source, default)
            return
        if "tools" in targets and tool_node is None:
            raise ValueError(
                f"{source} may jump to 'tools' but the agent has no tools."
            )

        def route(state: Any) -> str:
            return jump(state.get("jump_to")) or default

        destinations = [default]
        if "end" in targets:
            destinations.append(exit_node)
        if "tools" in targets:
            destinations.append("tools")
        if "model" in targets and source != loop_entry:
            destinations.append(loop_entry)
        route.__name__ = f"{source}_jump"
        graph.add_conditional_edges(source, route, list(dict.fromkeys(destinations)))

    graph.add_edge(START, entry)
    if tool_node is not None:
        tools_by_name = tool_node.tools_by_name

        def model_to_tools(state: Any) -> str | list[Send]:
            if target := state.get("jump_to"):
                return jump(target) or exit_node
            last_ai, answers = _last_ai_and_tool_messages(state["messages"])
            if last_ai is None:
                return exit_node
            calls = tool_calls(last_ai)
            if not calls:
                if getattr(last_ai, "invalid_tool_calls", None):
                    return loop_entry
                return exit_node
            answered = {tool_call_id(m) for m in answers}
            pending = [
                c
                for c in calls
                if c["id"] not in answered and c["name"] not in structured_tools
            ]
            if pending:
                return [
                    Send(
                        "tools",
                        ToolCallWithContext(
                            __type="tool_call_with_context",
                            tool_call=call,
                            state=state,
                        ),
                    )
                    for call in pending
                ]
            if "structured_response" in state:
                return exit_node
            return loop_entry

        def tools_to_model(state: Any) -> str:
            last_ai, answers = _last_ai_and_tool_messages(state["messages"])
            if last_ai is None:
                return loop_entry
            client_calls = [
                c for c in tool_calls(last_ai) if c["name"] in tools_by_name
            ]
            if client_calls and all(
                tools_by_name[c["name"]].return_direct for c in client_calls
            ):
                return exit_node
            if any(message_name(m) in structured_tools for m in answers):
                return exit_node
            return loop_entry

        tools_destinations = [loop_entry]
        if any(t.return_direct for t in tools_by_name.values()) or structured_tools:
            tools_destinations.append(exit_node)
        graph.add_conditional_edges("tools", tools_to_model, tools_destinations)
        model_destinations = list(dict.fromkeys(["tools", exit_node, loop_entry]))
        graph.add_conditional_edges(loop_exit, model_to_tools, model_destinations)
    elif structured_tools:

        def model_to_model(state: Any) -> str:
            if target := state.get("jump_to"):
                return jump(target) or exit_node
            if "structured_response" in state:
                return exit_node
            return loop_entry

        graph.add_conditional_edges(loop_exit, model_to_model, [loop_entry, exit_node])
    elif loop_exit == "model":
        graph.add_edge("model", exit_node)
    else:
        add_hook_edge(after_model[0], "after_model", exit_node)

    for first, second in itertools.pairwise(before_agent):
        add_hook_edge(first, "before_agent", f"{second.name}.before_agent")
    if before_agent:
        add_hook_edge(before_agent[-1], "before_agent", loop_entry)
    for first, second in itertools.pairwise(before_model):
        add_hook_edge(first, "before_model", f"{second.name}.before_model")
    if before_model:
        add_hook_edge(before_model[-1], "before_model", "model")
    if after_model:
        graph.add_edge("model", f"{after_model[-1].name}.after_model")
        for later, earlier in itertools.pairwise(reversed(after_model)):
            add_hook_edge(later, "after_model", f"{earlier.name}.after_model")
    if after_agent:
        for later, earlier in itertools.pairwise(reversed(after_agent)):
            add_hook_edge(later, "after_agent", f"{earlier.name}.after_agent")
        add_hook_edge(after_agent[0], "after_agent", END)

    config: dict[str, Any] = {"recursion_limit": 10_000}
    if name:
        config["metadata"] = {"lc_agent_name": name}
    compiled = graph.compile(
        checkpointer=checkpointer,
        store=store,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        debug=debug,
        name=name,
        cache=cache,
    )
    return compiled.with_config(config)  # type: ignore[return-value]

"""create_react_agent: a model that calls tools in a loop until it answers.

The graph LangGraph 1.2 builds, node for node:

- ``agent`` calls the model with the conversation (after ``prompt``) and the
  tools; ``tools`` (a :class:`~engine.prebuilt.ToolNode`) runs the calls and the
  loop goes back to the model, until an answer has no tool calls.
- ``version="v2"`` (default) sends each tool call to ``tools`` as its own task
  (one ``Send`` per call, each seeing the step's state); ``"v1"`` runs all the
  calls of a message in one ``tools`` task.
- ``pre_model_hook`` runs before every model call (node ``pre_model_hook``); it
  may return ``llm_input_messages`` (what the model sees, not stored in
  ``messages``) or ``messages`` (a state update). ``post_model_hook`` runs after
  every model call (node ``post_model_hook``), and routing then continues with the
  pending tool calls, the model, the structured answer or the end.
- ``response_format`` adds ``generate_structured_response``, which asks the
  model once more, at the end, for an answer in that schema and stores it in
  ``structured_response``. LangChain models use ``with_structured_output``; other
  models get ``response_format=<JSON Schema>`` and answer JSON text.
- With ``remaining_steps`` in the state (``AgentState`` has it), a model answer
  that asks for tools when the recursion limit would not let them run is
  replaced by "Sorry, need more steps to process this request.".
- Tools with ``return_direct`` end the run after they ran.

Deprecated in LangGraph 1.0 in favour of LangChain's ``create_agent``
(here :func:`engine.agents.create_agent`); it is kept, without a warning, for
programs written against ``langgraph.prebuilt``.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict, get_type_hints

from pydantic import BaseModel, create_model

from engine._internal._constants import END, START
from engine.errors import ErrorCode, error_message
from engine.graph.message import add_messages, message_role
from engine.graph.state import CompiledStateGraph, StateGraph
from engine.managed import RemainingSteps
from engine.prebuilt._chat import (
    ai_message,
    in_conversation_form,
    is_ai,
    is_tool,
    message_id,
    message_name,
    system_message,
    text_of,
    tool_call_id,
    tool_calls,
    with_name,
)
from engine.prebuilt._structured import (
    parse_json_text,
    parse_structured,
    schema_json,
    schema_name,
)
from engine.prebuilt.chat_model import acall_model, call_model, is_langchain_model
from engine.prebuilt.tool_node import ToolCallWithContext, ToolNode
from engine.runtime import get_runtime
from engine.types import Send
from engine.warnings import LangGraphDeprecatedSinceV10

__all__ = (
    "AgentState",
    "AgentStatePydantic",
    "AgentStateWithStructuredResponse",
    "AgentStateWithStructuredResponsePydantic",
    "create_react_agent",
    "create_tool_calling_executor",
)

StructuredResponse = dict[str, Any] | BaseModel
StructuredResponseSchema = dict[str, Any] | type[Any]

NEED_MORE_STEPS = "Sorry, need more steps to process this request."


class AgentState(TypedDict):
    """The agent's state: the conversation and the steps left before the limit."""

    messages: Annotated[Sequence[Any], add_messages]
    remaining_steps: NotRequired[RemainingSteps]


class AgentStatePydantic(BaseModel):
    """:class:`AgentState` as a pydantic model."""

    messages: Annotated[Sequence[Any], add_messages]
    remaining_steps: RemainingSteps = 25


class AgentStateWithStructuredResponse(AgentState):
    """:class:`AgentState` with the structured answer (``response_format``)."""

    structured_response: StructuredResponse


class AgentStateWithStructuredResponsePydantic(AgentStatePydantic):
    """:class:`AgentStatePydantic` with the structured answer."""

    structured_response: StructuredResponse


def _get(state: Any, key: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)


def _is_system_message(prompt: Any) -> bool:
    return not isinstance(prompt, str) and message_role(prompt) == "system"


def _apply_prompt(prompt: Any, state: Any) -> Any:
    """The model's input for ``state`` (sync); may return an awaitable for async prompts."""
    messages = list(_get(state, "messages") or ())
    if prompt is None:
        return messages
    if isinstance(prompt, str):
        return [system_message(prompt), *messages]
    if _is_system_message(prompt):
        return [prompt, *messages]
    if callable(getattr(prompt, "invoke", None)):
        return prompt.invoke(state)
    if callable(prompt):
        return prompt(state)
    raise ValueError(f"Got unexpected type for `prompt`: {type(prompt)}")


def _as_messages(value: Any) -> list[Any]:
    """A prompt's output as a message list (LangChain prompt values included)."""
    to_messages = getattr(value, "to_messages", None)
    if callable(to_messages):
        return list(to_messages())
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value)


def _validate_chat_history(messages: Sequence[Any]) -> None:
    """Every tool call of an AI message must have a tool message answering it."""
    answered = {tool_call_id(m) for m in messages if is_tool(m)}
    missing = [
        call
        for m in messages
        if is_ai(m)
        for call in tool_calls(m)
        if call.get("id") not in answered
    ]
    if missing:
        raise ValueError(
            error_message(
                "Found AIMessages with tool_calls that do not have a corresponding "
                f"ToolMessage. Here are the first few of those tool calls: "
                f"{missing[:3]}.\n\nEvery tool call (LLM requesting to call a tool) in "
                "the message history MUST have a corresponding ToolMessage (result of "
                "a tool invocation to return to the LLM) - this is required by most "
                "LLM providers.",
                ErrorCode.INVALID_CHAT_HISTORY,
            )
        )


def _resolve_string_model(model: str) -> Any:
    try:
        from langchain.chat_models import (  # type: ignore[import-not-found]  # noqa: PLC0415
            init_chat_model,
        )
    except ImportError as exc:
        raise ImportError(
            "Please install langchain (`pip install langchain`) to use "
            "'<provider>:<model>' string syntax for `model` parameter, or pass a "
            "chat model object."
        ) from exc
    return init_chat_model(model)


def _is_dynamic(model: Any) -> bool:
    return (
        not isinstance(model, str)
        and callable(model)
        and not callable(getattr(model, "invoke", None))
    )


class _Node:
    """A node with a sync and an async body, both given the state and the runtime."""

    def __init__(
        self,
        name: str,
        sync: Callable[[Any, Any], Any],
        asynchronous: Callable[[Any, Any], Any],
    ) -> None:
        self.__name__ = name
        self.sync = sync
        self.asynchronous = asynchronous

    def invoke(self, state: Any, config: Any = None, **kwargs: Any) -> Any:
        return self.sync(state, get_runtime())

    async def ainvoke(self, state: Any, config: Any = None, **kwargs: Any) -> Any:
        return await self.asynchronous(state, get_runtime())


def create_react_agent(
    model: Any,
    tools: Sequence[Any] | ToolNode,
    *,
    prompt: Any = None,
    response_format: StructuredResponseSchema
    | tuple[str, StructuredResponseSchema]
    | None = None,
    pre_model_hook: Any = None,
    post_model_hook: Any = None,
    state_schema: type[Any] | None = None,
    context_schema: type[Any] | None = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    version: Literal["v1", "v2"] = "v2",
    name: str | None = None,
    **deprecated_kwargs: Any,
) -> CompiledStateGraph:
    """A graph ``agent -> (tools -> agent)* -> END`` over a ``messages`` state.

    Args:
        model: a chat model (this engine's protocol or a LangChain chat model), a
            ``"provider:model"`` string (needs ``langchain``), or a function
            ``(state, runtime) -> model`` (sync or async) choosing it per call.
        tools: functions, tools, or a ready :class:`ToolNode`; empty for a single
            model call.
        prompt: a string or system message put first, or a function (or
            runnable) of the state returning the model's input.
        response_format: a schema for a final structured answer, or ``(prompt,
            schema)``.
        pre_model_hook: a node run before each model call.
        post_model_hook: a node run after each model call (``version="v2"``).
        state_schema: the state (needs ``messages`` and ``remaining_steps``, and
            ``structured_response`` with a ``response_format``).
        context_schema: the schema of the run's ``context``.
        checkpointer, store, interrupt_before, interrupt_after, debug, name: as
            for :meth:`StateGraph.compile`.
        version: ``"v2"`` sends each tool call as its own task; ``"v1"`` runs a
            message's calls in one task.

    Raises:
        ValueError: an unknown ``version``, or a ``state_schema`` missing a key.
        TypeError: an unknown keyword argument.
    """
    if (config_schema := deprecated_kwargs.pop("config_schema", None)) is not None:
        warnings.warn(
            "`config_schema` is deprecated and will be removed. Please use "
            "`context_schema` instead.",
            category=LangGraphDeprecatedSinceV10,
            stacklevel=2,
        )
        if context_schema is None:
            context_schema = config_schema
    if deprecated_kwargs:
        raise TypeError(
            "create_react_agent() got unexpected keyword arguments: "
            f"{deprecated_kwargs}"
        )
    if version not in ("v1", "v2"):
        raise ValueError(
            f"Invalid version {version}. Supported versions are 'v1' and 'v2'."
        )
    if state_schema is not None:
        required = {"messages", "remaining_steps"}
        if response_format is not None:
            required.add("structured_response")
        if missing := required - set(get_type_hints(state_schema)):
            raise ValueError(f"Missing required key(s) {missing} in state_schema")
    else:
        state_schema = (
            AgentStateWithStructuredResponse
            if response_format is not None
            else AgentState
        )

    if isinstance(tools, ToolNode):
        tool_node = tools
    else:
        builtin = [t for t in tools if isinstance(t, dict)]
        if builtin:
            raise ValueError(
                "Provider built-in tools (dicts) are not supported: pass functions "
                "or tools the ToolNode can run."
            )
        tool_node = ToolNode(list(tools))
    tool_list = list(tool_node.tools_by_name.values())
    tool_calling = bool(tool_list)
    return_direct = {t.name for t in tool_list if t.return_direct}

    if isinstance(model, str):
        model = _resolve_string_model(model)
    dynamic = _is_dynamic(model)
    async_dynamic = dynamic and inspect.iscoroutinefunction(model)

    def resolve(state: Any, runtime: Any) -> Any:
        if async_dynamic:
            raise RuntimeError(
                "Async model callable provided but agent invoked synchronously. Use "
                "agent.ainvoke() or agent.astream(), or provide a sync model callable."
            )
        return model(state, runtime) if dynamic else model

    async def aresolve(state: Any, runtime: Any) -> Any:
        if async_dynamic:
            return await model(state, runtime)
        return model(state, runtime) if dynamic else model

    def model_input(state: Any) -> Any:
        messages = (
            _get(state, "llm_input_messages") or _get(state, "messages")
            if pre_model_hook is not None
            else _get(state, "messages")
        )
        if messages is None:
            keys = (
                "'llm_input_messages' or 'messages' key"
                if pre_model_hook is not None
                else "'messages' key"
            )
            raise ValueError(
                f"Expected input to call_model to have {keys}, but got {state}"
            )
        _validate_chat_history(messages)
        if isinstance(state, dict):
            return {**state, "messages": list(messages)}
        return state.model_copy(update={"messages": list(messages)})

    def more_steps_needed(state: Any, response: Any) -> bool:
        calls = tool_calls(response) if is_ai(response) else []
        all_direct = (
            all(call["name"] in return_direct for call in calls)
            if is_ai(response)
            else False
        )
        remaining = _get(state, "remaining_steps")
        if remaining is not None:
            if remaining < 1 and all_direct:
                return True
            if remaining < 2 and calls:
                return True
        return False

    def finish(state: Any, response: Any) -> dict[str, Any]:
        response = with_name(in_conversation_form(response), name)
        if more_steps_needed(state, response):
            return {"messages": [ai_message(NEED_MORE_STEPS, id=message_id(response))]}
        return {"messages": [response]}

    def call_agent(state: Any, runtime: Any) -> dict[str, Any]:
        chosen = resolve(state, runtime)
        prompted = _apply_prompt(prompt, model_input(state))
        if inspect.isawaitable(prompted):
            raise RuntimeError(
                "An async prompt needs an async run: use ainvoke() or astream()."
            )
        response = call_model(chosen, _as_messages(prompted), tool_list)
        return finish(state, response)

    async def acall_agent(state: Any, runtime: Any) -> dict[str, Any]:
        chosen = await aresolve(state, runtime)
        prompted = _apply_prompt(prompt, model_input(state))
        if inspect.isawaitable(prompted):
            prompted = await prompted
        response = await acall_model(chosen, _as_messages(prompted), tool_list)
        return finish(state, response)

    def structured_request(state: Any) -> tuple[list[Any], Any]:
        messages = list(_get(state, "messages") or ())
        schema: Any = response_format
        if isinstance(response_format, tuple):
            instructions, schema = response_format
            messages = [system_message(instructions), *messages]
        return messages, schema

    def structured_answer(chosen: Any, schema: Any) -> tuple[Any, dict[str, Any]]:
        if is_langchain_model(chosen):
            bound = getattr(chosen, "bound", chosen)
            return bound.with_structured_output(schema), {}
        return chosen, {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name(schema),
                    "schema": schema_json(schema),
                },
            }
        }

    def generate_structured_response(state: Any, runtime: Any) -> dict[str, Any]:
        messages, schema = structured_request(state)
        chosen, options = structured_answer(resolve(state, runtime), schema)
        if not options:
            return {"structured_response": chosen.invoke(messages)}
        answer = chosen.invoke(messages, **options)
        return {
            "structured_response": parse_structured(
                schema, parse_json_text(text_of(answer))
            )
        }

    async def agenerate_structured_response(state: Any, runtime: Any) -> dict[str, Any]:
        messages, schema = structured_request(state)
        chosen, options = structured_answer(await aresolve(state, runtime), schema)
        if not options:
            return {"structured_response": await chosen.ainvoke(messages)}
        answer = await acall_model(chosen, messages, (), **options)
        return {
            "structured_response": parse_structured(
                schema, parse_json_text(text_of(answer))
            )
        }

    input_schema = _with_llm_input(state_schema) if pre_model_hook is not None else None
    agent_node = _Node("agent", call_agent, acall_agent)
    structured_node = _Node(
        "generate_structured_response",
        generate_structured_response,
        agenerate_structured_response,
    )
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        state_schema, context_schema=context_schema
    )
    builder.add_node("agent", agent_node, input_schema=input_schema)
    if pre_model_hook is not None:
        builder.add_node("pre_model_hook", pre_model_hook)
        builder.add_edge("pre_model_hook", "agent")
        entry = "pre_model_hook"
    else:
        entry = "agent"
    builder.add_edge(START, entry)
    if post_model_hook is not None:
        builder.add_node("post_model_hook", post_model_hook)
        builder.add_edge("agent", "post_model_hook")
    if response_format is not None:
        builder.add_node("generate_structured_response", structured_node)

    if not tool_calling:
        if response_format is not None:
            source = "post_model_hook" if post_model_hook is not None else "agent"
            builder.add_edge(source, "generate_structured_response")
            builder.add_edge("generate_structured_response", END)
        return builder.compile(
            checkpointer=checkpointer,
            store=store,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            debug=debug,
            name=name,
        )

    builder.add_node("tools", tool_node)

    def sends(calls: list[dict[str, Any]], state: Any) -> list[Send]:
        return [
            Send(
                "tools",
                ToolCallWithContext(
                    __type="tool_call_with_context",
                    tool_call=call,
                    state=state,
                ),
            )
            for call in calls
        ]

    def should_continue(state: Any) -> str | list[Send]:
        last = _get(state, "messages")[-1]
        calls = tool_calls(last) if is_ai(last) else []
        if not calls:
            if post_model_hook is not None:
                return "post_model_hook"
            if response_format is not None:
                return "generate_structured_response"
            return END
        if version == "v1":
            return "tools"
        if post_model_hook is not None:
            return "post_model_hook"
        return sends(calls, state)

    agent_paths: list[str] = []
    hook_paths = [entry, "tools"]
    if post_model_hook is not None:
        agent_paths.append("post_model_hook")
    else:
        agent_paths.append("tools")
    if response_format is not None:
        builder.add_edge("generate_structured_response", END)
        if post_model_hook is not None:
            hook_paths.append("generate_structured_response")
        else:
            agent_paths.append("generate_structured_response")
    elif post_model_hook is not None:
        hook_paths.append(END)
    else:
        agent_paths.append(END)

    if post_model_hook is not None:

        def post_model_hook_router(state: Any) -> str | list[Send]:
            """Pending tool calls -> tools; a tool answer last -> the model again;
            else the structured answer or the end."""
            messages = list(_get(state, "messages"))
            answered = {tool_call_id(m) for m in messages if is_tool(m)}
            last_ai = next(m for m in reversed(messages) if is_ai(m))
            pending = [c for c in tool_calls(last_ai) if c["id"] not in answered]
            if pending:
                return sends(pending, state)
            if is_tool(messages[-1]):
                return entry
            if response_format is not None:
                return "generate_structured_response"
            return END

        builder.add_conditional_edges(
            "post_model_hook", post_model_hook_router, path_map=hook_paths
        )
    builder.add_conditional_edges("agent", should_continue, path_map=agent_paths)

    def route_tool_responses(state: Any) -> str:
        message: Any = None
        for message in reversed(_get(state, "messages")):
            if not is_tool(message):
                break
            if message_name(message) in return_direct:
                return END
        # a return_direct tool may have run in another Send of the same step
        if (
            message is not None
            and is_ai(message)
            and any(call["name"] in return_direct for call in tool_calls(message))
        ):
            return END
        return entry

    if return_direct:
        builder.add_conditional_edges(
            "tools", route_tool_responses, path_map=[entry, END]
        )
    else:
        builder.add_edge("tools", entry)
    return builder.compile(
        checkpointer=checkpointer,
        store=store,
        interrupt_before=interrupt_before,
        interrupt_after=interrupt_after,
        debug=debug,
        name=name,
    )


def _with_llm_input(state_schema: type[Any]) -> type[Any]:
    """The agent node's input: the state plus ``llm_input_messages``."""
    if isinstance(state_schema, type) and issubclass(state_schema, BaseModel):
        return create_model(
            "CallModelInputSchema",
            llm_input_messages=(list[Any], ...),
            __base__=state_schema,
        )
    hints = get_type_hints(state_schema, include_extras=True)
    return TypedDict(  # type: ignore[operator, no-any-return]
        "CallModelInputSchema",
        {**hints, "llm_input_messages": NotRequired[list[Any]]},
    )


create_tool_calling_executor = create_react_agent
"""The old name of :func:`create_react_agent`."""

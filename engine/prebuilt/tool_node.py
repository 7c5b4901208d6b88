"""ToolNode: run the tool calls of the latest AI message; tools_condition: route to it.

As in ``langgraph.prebuilt``:

- Each tool call gets a tool message answering it (``status="error"`` for one
  that failed and was handled). Calls run in parallel.
- Errors: arguments the tool's signature refuses become an error message (the
  model can fix them: :data:`TOOL_INVOCATION_ERROR_TEMPLATE`); an unknown tool
  name too (:data:`INVALID_TOOL_NAME_ERROR_TEMPLATE`); any other exception a tool
  raises fails the run, unless ``handle_tool_errors`` says to answer it instead
  (``True``: :data:`TOOL_CALL_ERROR_TEMPLATE`; a string; a function of the
  exception, which handles the types its parameter is annotated with; an
  exception type or a tuple of them). Interrupts always propagate.
- A tool may return a ``Command``: its update and ``goto`` are applied by the
  graph, and it must include a tool message answering its call (unless it
  addresses the parent graph).
- ``wrap_tool_call`` / ``awrap_tool_call`` intercept each call
  (``wrapper(request, execute)``) to retry, rewrite or short-circuit it.

Messages follow the conversation: when the AI message is a LangChain message,
the answers are LangChain ``ToolMessage`` objects; with plain dict messages they
are dicts (``{"role": "tool", ...}``), so langchain-core stays optional.

Tools may ask for the graph state, the store or a :class:`ToolRuntime` with
``InjectedState`` / ``InjectedStore`` annotations (see ``_injected``); the ToolNode
fills those arguments in and the model never sees them.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypedDict

from engine._internal._constants import END
from engine._internal._typing import RunnableConfig
from engine.errors import GraphBubbleUp
from engine.graph.message import REMOVE_ALL_MESSAGES, message_role
from engine.prebuilt._injected import (
    InjectedState,
    InjectedStore,
    ToolRuntime,
    injected_values,
    tool_runtime,
)
from engine.prebuilt._tool_events import ToolCallReport, reporting_tool_call
from engine.prebuilt.tools import Tool, as_tool
from engine.types import Command, Send

__all__ = (
    "INVALID_TOOL_NAME_ERROR_TEMPLATE",
    "TOOL_CALL_ERROR_TEMPLATE",
    "TOOL_EXECUTION_ERROR_TEMPLATE",
    "TOOL_INVOCATION_ERROR_TEMPLATE",
    "AsyncToolCallWrapper",
    "InjectedState",
    "InjectedStore",
    "ToolCallRequest",
    "ToolCallWithContext",
    "ToolCallWrapper",
    "ToolInvocationError",
    "ToolNode",
    "ToolRuntime",
    "msg_content_output",
    "tools_condition",
)

INVALID_TOOL_NAME_ERROR_TEMPLATE = (
    "Error: {requested_tool} is not a valid tool, try one of [{available_tools}]."
)
"""Content of the error message answering a call to a tool the node does not have."""
TOOL_CALL_ERROR_TEMPLATE = "Error: {error}\n Please fix your mistakes."
"""Content of the error message for a handled exception (``{error}`` is its repr)."""
TOOL_EXECUTION_ERROR_TEMPLATE = (
    "Error executing tool '{tool_name}' with kwargs {tool_kwargs} with error:\n"
    " {error}\n"
    " Please fix the error and try again."
)
"""LangGraph's wording for a failed tool run, for handlers that want it."""
TOOL_INVOCATION_ERROR_TEMPLATE = (
    "Error invoking tool '{tool_name}' with kwargs {tool_kwargs} with error:\n"
    " {error}\n"
    " Please fix the error and try again."
)
"""Content of the error message for arguments the tool's signature refuses."""

# Content blocks a tool may return as they are (anything else is sent as JSON).
_BLOCK_TYPES = frozenset(
    {
        "text",
        "image_url",
        "image",
        "json",
        "search_result",
        "custom_tool_call_output",
        "document",
        "file",
    }
)

InputType = Literal["list", "dict", "tool_calls"]


class ToolInvocationError(Exception):
    """The model called a tool with arguments its signature refuses.

    Raised (and, by default, answered with an error message the model can act
    on) only by the ToolNode.

    Args:
        tool_name: the tool called.
        source: the validation error.
        tool_kwargs: the arguments the model sent.
        filtered_errors: pydantic's error details for the model's arguments only.
    """

    def __init__(
        self,
        tool_name: str,
        source: Exception,
        tool_kwargs: dict[str, Any],
        filtered_errors: list[Any] | None = None,
    ) -> None:
        if filtered_errors is not None:
            shown = "\n".join(
                f"{'.'.join(str(p) for p in e.get('loc', ()))}: "
                f"{e.get('msg', 'Unknown error')}"
                for e in filtered_errors
            )
        else:
            shown = str(source)
        self.message = TOOL_INVOCATION_ERROR_TEMPLATE.format(
            tool_name=tool_name, tool_kwargs=tool_kwargs, error=shown
        )
        self.tool_name = tool_name
        self.tool_kwargs = tool_kwargs
        self.source = source
        self.filtered_errors = filtered_errors
        super().__init__(self.message)


def msg_content_output(output: Any) -> str | list[dict[str, Any]]:
    """A tool's result as tool message content.

    A string, or a list of content blocks (dicts with a known ``type``), is kept;
    anything else is sent as JSON (non-ASCII kept), or as ``str()`` when it is
    not JSON.
    """
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(
        isinstance(block, dict) and block.get("type") in _BLOCK_TYPES
        for block in output
    ):
        return output
    try:
        return json.dumps(output, ensure_ascii=False)
    except Exception:
        return str(output)


def _default_handle_tool_errors(e: Exception) -> str:
    """LangGraph 1.2's default: answer bad arguments, let other errors fail the run."""
    if isinstance(e, ToolInvocationError):
        return e.message
    raise e


@dataclasses.dataclass
class ToolCallRequest:
    """One tool call, as a ``wrap_tool_call`` interceptor sees it.

    Use :meth:`override` to change it: the request itself is not modified.
    """

    tool_call: dict[str, Any]
    """The call: ``name``, ``args``, ``id``."""
    tool: Tool | None
    """The tool called, ``None`` when the node has no tool of that name."""
    state: Any
    """The graph state the node was given."""
    runtime: Any
    """The call's :class:`ToolRuntime`."""

    def override(self, **overrides: Any) -> ToolCallRequest:
        """A copy with ``tool_call``, ``tool`` or ``state`` replaced (a new state is
        also the one tools get injected)."""
        request = dataclasses.replace(self, **overrides)
        if "state" in overrides and isinstance(request.runtime, ToolRuntime):
            request = dataclasses.replace(
                request,
                runtime=dataclasses.replace(request.runtime, state=request.state),
            )
        return request


ToolCallWrapper = Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]
"""``wrapper(request, execute)``: call ``execute(request)`` (any number of times, with
the request or an override of it) or answer without it; return the tool message or
``Command``."""

AsyncToolCallWrapper = Callable[
    [ToolCallRequest, Callable[[ToolCallRequest], Awaitable[Any]]], Awaitable[Any]
]
"""Async twin of :data:`ToolCallWrapper`."""


class ToolCallWithContext(TypedDict):
    """A tool call sent to the node with ``Send``, with the state it should see."""

    tool_call: dict[str, Any]
    __type: Literal["tool_call_with_context"]
    state: Any


def _lc_messages() -> Any:
    try:
        import langchain_core.messages as messages  # noqa: PLC0415 - optional
    except ImportError:
        return None
    return messages


def _is_lc(message: Any) -> bool:
    return type(message).__module__.startswith("langchain_core.messages")


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    calls = (
        message.get("tool_calls")
        if isinstance(message, dict)
        else getattr(message, "tool_calls", None)
    )
    return [dict(c) for c in calls or ()]


def _messages(state: Any, key: str) -> list[Any]:
    if isinstance(state, dict):
        return list(state.get(key) or ())
    return list(getattr(state, key, None) or ())


def _handled_types(handler: Callable[..., Any]) -> tuple[type[BaseException], ...]:
    """The exception types a handler function takes, from its first parameter's
    annotation (``Exception`` when it has none)."""
    params = list(inspect.signature(handler).parameters.values())
    if not params:
        return (Exception,)
    first = (
        params[1]
        if params[0].name in ("self", "cls") and len(params) == 2
        else params[0]
    )
    hints = typing.get_type_hints(handler)
    if first.name not in hints:
        return (Exception,)
    annotation = hints[first.name]
    members = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    if all(isinstance(m, type) and issubclass(m, Exception) for m in members):
        return tuple(members)
    raise ValueError(
        "An error handler's parameter must be annotated with exception types "
        f"(e: ValueError, or e: ValueError | TypeError); got {annotation!r}."
    )


def _error_content(error: Exception, flag: Any) -> str:
    if isinstance(flag, (bool, tuple)) or (
        isinstance(flag, type) and issubclass(flag, Exception)
    ):
        return TOOL_CALL_ERROR_TEMPLATE.format(error=repr(error))
    if isinstance(flag, str):
        return flag
    if callable(flag):
        return str(flag(error))
    raise ValueError(
        f"handle_tool_errors must be a bool, a str, a callable or exception types, "
        f"got {flag!r}"
    )


class ToolNode:
    """A graph node that executes the tool calls of the latest AI message.

    Args:
        tools: functions, :class:`~engine.prebuilt.tools.Tool` objects or LangChain
            tools.
        name: the node's name (default ``"tools"``).
        tags: tags of the node (kept for LangGraph compatibility).
        handle_tool_errors: what a tool's exception becomes. By default bad
            arguments are answered with an error message and anything else fails
            the run; ``True`` answers every exception, ``False`` none, a string is
            the answer, a function of the exception returns it (for the types its
            parameter is annotated with), exception types answer those types.
        messages_key: the state key holding the conversation.
        wrap_tool_call: intercepts each call: ``wrapper(request, execute)``.
        awrap_tool_call: the same for async runs (``wrap_tool_call`` is used when
            it is not given).

    Example:
        >>> builder.add_node("tools", ToolNode([search], handle_tool_errors=True))
        >>> builder.add_conditional_edges("agent", tools_condition)
    """

    name: str = "tools"
    """The node's name."""
    tools_by_name: dict[str, Tool]
    """The tools this node runs, by the name the model calls them."""

    def __init__(
        self,
        tools: Sequence[Any],
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: bool
        | str
        | Callable[..., str]
        | type[Exception]
        | tuple[type[Exception], ...] = _default_handle_tool_errors,
        messages_key: str = "messages",
        wrap_tool_call: ToolCallWrapper | None = None,
        awrap_tool_call: AsyncToolCallWrapper | None = None,
    ) -> None:
        self.tools_by_name = {t.name: t for t in map(as_tool, tools)}
        self.name = name
        self.__name__ = name
        self.tags = list(tags or ())
        self.handle_tool_errors = handle_tool_errors
        self.messages_key = messages_key
        self.wrap_tool_call = wrap_tool_call
        self.awrap_tool_call = awrap_tool_call

    # -- input ---------------------------------------------------------------------

    def _parse_input(
        self, input: Any
    ) -> tuple[list[dict[str, Any]], InputType, Any, bool]:
        """The calls to run, the input's shape, the state tools see, and whether
        the answers are LangChain messages."""
        messages: list[Any]
        input_type: InputType
        if isinstance(input, list) and input:
            last = input[-1]
            if isinstance(last, dict) and last.get("type") == "tool_call":
                return [dict(c) for c in input], "tool_calls", {}, _has_lc()
            messages, input_type = input, "list"
        elif (
            isinstance(input, dict) and input.get("__type") == "tool_call_with_context"
        ):
            return [dict(input["tool_call"])], "tool_calls", input["state"], _has_lc()
        else:
            messages, input_type = _messages(input, self.messages_key), "dict"
        if not messages:
            raise ValueError("No message found in input")
        for message in reversed(messages):
            if message_role(message) == "assistant":
                return _tool_calls(message), input_type, input, _is_lc(message)
        raise ValueError("No AIMessage found in input")

    def _request(
        self, call: dict[str, Any], state: Any, config: RunnableConfig | None
    ) -> ToolCallRequest:
        tools = list(self.tools_by_name.values())
        return ToolCallRequest(
            tool_call=call,
            tool=self.tools_by_name.get(call.get("name", "")),
            state=state,
            runtime=tool_runtime(state, call, tools, config),
        )

    # -- answers -------------------------------------------------------------------

    def _message(
        self,
        call: dict[str, Any],
        content: Any,
        status: str = "success",
        *,
        lc: bool,
    ) -> Any:
        if lc and (messages := _lc_messages()) is not None:
            return messages.ToolMessage(
                content=content,
                name=call.get("name"),
                tool_call_id=call.get("id"),
                status=status,
            )
        return {
            "role": "tool",
            "content": content,
            "tool_call_id": call.get("id"),
            "name": call.get("name"),
            "status": status,
        }

    def _unknown_tool(self, call: dict[str, Any], lc: bool) -> Any:
        content = INVALID_TOOL_NAME_ERROR_TEMPLATE.format(
            requested_tool=call.get("name"),
            available_tools=", ".join(self.tools_by_name),
        )
        return self._message(call, content, "error", lc=lc)

    def _arguments(
        self, request: ToolCallRequest
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The model's arguments (without injected names) and the injected values."""
        call, tool = request.tool_call, request.tool
        assert tool is not None
        args = dict(call.get("args") or {})
        if not tool.injected:
            return args, {}
        hidden = {i.name for i in tool.injected}
        injected = injected_values(
            tool.injected, request.runtime, tool.name, self.messages_key
        )
        return {k: v for k, v in args.items() if k not in hidden}, injected

    def _call_tool(
        self,
        tool: Tool,
        request: ToolCallRequest,
        args: dict[str, Any],
        injected: dict[str, Any],
        asynchronous: bool = False,
    ) -> Any:
        """Call the tool with the model's arguments (checked) and the injected ones;
        an awaitable when ``asynchronous``.

        Raises:
            ToolInvocationError: the arguments do not fit the tool's signature.
        """
        from pydantic import ValidationError  # noqa: PLC0415 - loaded on first use

        call = request.tool_call
        try:
            if tool.lc_tool is not None:
                payload = {**call, "args": {**args, **injected}, "type": "tool_call"}
                config = request.runtime.config
                if asynchronous:
                    return tool.lc_tool.ainvoke(payload, config)
                return tool.lc_tool.invoke(payload, config)
            checked = {**tool.parse_args(args), **injected}
        except ValidationError as exc:
            hidden = {i.name for i in tool.injected}
            errors = [e for e in exc.errors() if e["loc"] and e["loc"][0] not in hidden]
            raise ToolInvocationError(
                tool.name, exc, dict(call.get("args") or {}), errors
            ) from exc
        return tool.ainvoke(checked) if asynchronous else tool.invoke(checked)

    def _handle(self, error: Exception, call: dict[str, Any], lc: bool) -> Any:
        flag = self.handle_tool_errors
        if isinstance(flag, type) and issubclass(flag, Exception):
            handled: tuple[type[BaseException], ...] = (flag,)
        elif isinstance(flag, tuple):
            handled = flag
        elif callable(flag) and not isinstance(flag, type):
            handled = _handled_types(flag)
        else:
            handled = (Exception,)
        if not flag or not isinstance(error, handled):
            raise error
        return self._message(call, _error_content(error, flag), "error", lc=lc)

    def _execute(
        self, request: ToolCallRequest, input_type: InputType, lc: bool
    ) -> Any:
        call, tool = request.tool_call, request.tool
        if tool is None:
            return self._unknown_tool(call, lc)
        # injection errors (no store...) are the graph's, never answered
        args, injected = self._arguments(request)
        with reporting_tool_call(call, tool.name, args) as report:
            try:
                response = self._call_tool(tool, request, args, injected)
            except Exception as exc:
                return self._failed(exc, call, lc, report)
            return self._answer(response, call, input_type, lc, report)

    async def _aexecute(
        self, request: ToolCallRequest, input_type: InputType, lc: bool
    ) -> Any:
        call, tool = request.tool_call, request.tool
        if tool is None:
            return self._unknown_tool(call, lc)
        args, injected = self._arguments(request)
        with reporting_tool_call(call, tool.name, args) as report:
            try:
                response = await self._call_tool(
                    tool, request, args, injected, asynchronous=True
                )
            except Exception as exc:
                return self._failed(exc, call, lc, report)
            return self._answer(response, call, input_type, lc, report)

    def _failed(
        self,
        error: Exception,
        call: dict[str, Any],
        lc: bool,
        report: ToolCallReport | None,
    ) -> Any:
        """The tool raised: report it, then answer it (or raise, see
        ``handle_tool_errors``)."""
        if report is not None:
            # bad arguments are reported as the validation error, as LangChain's
            # tools report them
            report.failed(
                error.source if isinstance(error, ToolInvocationError) else error
            )
        return self._handle(error, call, lc)

    def _answer(
        self,
        response: Any,
        call: dict[str, Any],
        input_type: InputType,
        lc: bool,
        report: ToolCallReport | None,
    ) -> Any:
        """The tool's result as its answer; reported as the call's output."""
        try:
            answer = self._normalize(response, call, input_type, lc)
        except Exception as exc:  # an ill-formed Command or list: the tool did finish
            if report is not None:
                report.finished(response)
            return self._handle(exc, call, lc)
        if report is not None:
            report.finished(answer)
        return answer

    def _wrapper_failed(self, error: Exception, call: dict[str, Any], lc: bool) -> Any:
        if not self.handle_tool_errors:
            raise error
        return self._message(
            call, _error_content(error, self.handle_tool_errors), "error", lc=lc
        )

    def _run_one(
        self, request: ToolCallRequest, input_type: InputType, lc: bool
    ) -> Any:
        if self.wrap_tool_call is None:
            return self._execute(request, input_type, lc)
        try:
            return self.wrap_tool_call(
                request, lambda r: self._execute(r, input_type, lc)
            )
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return self._wrapper_failed(exc, request.tool_call, lc)

    async def _arun_one(
        self, request: ToolCallRequest, input_type: InputType, lc: bool
    ) -> Any:
        if self.awrap_tool_call is None and self.wrap_tool_call is None:
            return await self._aexecute(request, input_type, lc)
        try:
            if self.awrap_tool_call is not None:

                async def execute(r: ToolCallRequest) -> Any:
                    return await self._aexecute(r, input_type, lc)

                return await self.awrap_tool_call(request, execute)
            assert self.wrap_tool_call is not None
            return self.wrap_tool_call(
                request, lambda r: self._execute(r, input_type, lc)
            )
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return self._wrapper_failed(exc, request.tool_call, lc)

    # -- results -------------------------------------------------------------------

    def _normalize(
        self, response: Any, call: dict[str, Any], input_type: InputType, lc: bool
    ) -> Any:
        if isinstance(response, Command):
            return self._checked_command(response, call, input_type)
        if _is_tool_message(response):
            response.content = msg_content_output(response.content)
            return response
        if (
            isinstance(response, list)
            and response
            and all(isinstance(r, Command) or _is_tool_message(r) for r in response)
        ):
            return self._checked_list(response, call, input_type)
        return self._message(call, msg_content_output(response), lc=lc)

    def _checked_list(
        self, response: list[Any], call: dict[str, Any], input_type: InputType
    ) -> list[Any]:
        answers = 0
        for item in response:
            if isinstance(item, Command):
                if isinstance(item.update, dict):
                    answers += sum(
                        _answers(m, call)
                        for m in item.update.get(self.messages_key, ())
                    )
            elif _answers(item, call):
                answers += 1
        if answers != 1:
            raise ValueError(
                f"Tool {call.get('name')!r} returned a list with {answers} tool "
                f"messages answering call {call.get('id')!r}; exactly one must."
            )
        checked: list[Any] = []
        for item in response:
            if isinstance(item, Command):
                checked.append(
                    self._checked_command(item, call, input_type, needs_answer=False)
                )
            else:
                item.content = msg_content_output(item.content)
                checked.append(item)
        return checked

    def _checked_command(
        self,
        command: Command[Any],
        call: dict[str, Any],
        input_type: InputType,
        *,
        needs_answer: bool = True,
    ) -> Command[Any]:
        if isinstance(command.update, dict):
            if input_type not in ("dict", "tool_calls"):
                raise ValueError(
                    f"Tool {call.get('name')!r} returned Command(update={{...}}): a dict "
                    f"update needs the ToolNode's input to be a dict with "
                    f"{self.messages_key!r}."
                )
            command = copy.deepcopy(command)
            update = command.update
            assert isinstance(update, dict)
            messages = update.get(self.messages_key, [])
        elif isinstance(command.update, list):
            if input_type != "list":
                raise ValueError(
                    f"Tool {call.get('name')!r} returned Command(update=[...]): a list "
                    "update needs the ToolNode's input to be a list of messages."
                )
            command = copy.deepcopy(command)
            messages = command.update
        else:
            return command
        if not isinstance(messages, list):
            messages = [messages]
        if len(messages) == 1 and _removes_all(messages[0]):
            return command
        answered = False
        for message in messages:
            if _answers(message, call):
                answered = True
                if not isinstance(message, dict):
                    message.name = call.get("name")
        if needs_answer and command.graph is None and not answered:
            raise ValueError(
                f"Tool {call.get('name')!r} returned a Command whose update has no "
                f"tool message answering its call (tool_call_id {call.get('id')!r}): "
                "every tool call needs one. Add one to the update, e.g. "
                f"{{{self.messages_key!r}: [ToolMessage('done', "
                "tool_call_id=runtime.tool_call_id)]}."
            )
        return command

    def _combine(self, outputs: list[Any], input_type: InputType) -> Any:
        flat: list[Any] = []
        for output in outputs:
            if isinstance(output, list):
                flat.extend(output)
            else:
                flat.append(output)
        if not any(isinstance(o, Command) for o in flat):
            return flat if input_type == "list" else {self.messages_key: flat}
        combined: list[Any] = []
        sends: list[Send] = []
        for output in flat:
            if not isinstance(output, Command):
                combined.append(
                    [output] if input_type == "list" else {self.messages_key: [output]}
                )
            elif (
                output.graph == Command.PARENT
                and isinstance(output.goto, list)
                and all(isinstance(s, Send) for s in output.goto)
            ):
                sends.extend(output.goto)  # parent Sends go up as one Command
            else:
                combined.append(output)
        if sends:
            combined.append(Command(graph=Command.PARENT, goto=sends))
        return combined

    # -- running -------------------------------------------------------------------

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Run the tool calls of ``input``'s latest AI message (in parallel).

        Returns ``{messages_key: [tool messages]}`` (a list for a list input), or
        a list of updates and ``Command``s when a tool returned a ``Command``.
        """
        calls, input_type, state, lc = self._parse_input(input)
        requests = [self._request(call, state, config) for call in calls]
        if len(requests) <= 1:
            outputs = [self._run_one(r, input_type, lc) for r in requests]
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(requests))) as pool:
                futures = [
                    pool.submit(
                        contextvars.copy_context().run,
                        self._run_one,
                        request,
                        input_type,
                        lc,
                    )
                    for request in requests
                ]
                outputs = [f.result() for f in futures]
        return self._combine(outputs, input_type)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke` (the calls run concurrently)."""
        calls, input_type, state, lc = self._parse_input(input)
        requests = [self._request(call, state, config) for call in calls]
        outputs = await asyncio.gather(
            *(self._arun_one(r, input_type, lc) for r in requests)
        )
        return self._combine(list(outputs), input_type)

    def __call__(self, state: Any) -> Any:
        return self.invoke(state)


def _has_lc() -> bool:
    return _lc_messages() is not None


def _is_tool_message(value: Any) -> bool:
    return _is_lc(value) and getattr(value, "type", None) == "tool"


def _answers(message: Any, call: dict[str, Any]) -> bool:
    """Whether ``message`` is a tool message answering ``call``."""
    if isinstance(message, dict):
        return message_role(message) == "tool" and message.get(
            "tool_call_id"
        ) == call.get("id")
    return getattr(message, "type", None) == "tool" and getattr(
        message, "tool_call_id", None
    ) == call.get("id")


def _removes_all(message: Any) -> bool:
    if isinstance(message, dict):
        return (
            message.get("type") == "remove" and message.get("id") == REMOVE_ALL_MESSAGES
        )
    return type(message).__name__ == "RemoveMessage" and (
        getattr(message, "id", None) == REMOVE_ALL_MESSAGES
    )


def tools_condition(
    state: Any, messages_key: str = "messages"
) -> Literal["tools", "__end__"]:
    """Route to ``"tools"`` when the last message asks for tools, else to END.

    Args:
        state: a list of messages, or a state holding them under ``messages_key``.
        messages_key: the state key of the conversation.

    Raises:
        ValueError: the state holds no messages.
    """
    if isinstance(state, list):
        last = state[-1]
    elif messages := _messages(state, messages_key):
        last = messages[-1]
    else:
        raise ValueError(f"No messages found in input state to tool_edge: {state}")
    return "tools" if _tool_calls(last) else END  # type: ignore[return-value]

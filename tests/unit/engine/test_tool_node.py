"""ToolNode and tools_condition, as LangGraph 1.2 documents them.

Error handling: by default arguments a tool's signature refuses are answered
with an error ``ToolMessage`` (``TOOL_INVOCATION_ERROR_TEMPLATE``) and any other
exception fails the run; ``handle_tool_errors`` answers more (``True``, a string,
a function of the exception, exception types). An unknown tool name is always
answered. Tools may return a ``Command`` (its update and ``goto`` apply), and
``wrap_tool_call`` intercepts calls. The expected contents below are LangGraph
1.2's, message for message.

Most tests use LangChain messages (``MessagesState``), as LangGraph programs do;
the last ones run with plain dict messages and langchain-core hidden, the
engine's own form when langchain-core is not installed.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId
from langchain_core.tools import tool as lc_tool

import engine.graph.message as message_module
import engine.prebuilt.tool_node as tool_node_module
from engine.checkpoint.memory import InMemorySaver
from engine.func import entrypoint
from engine.graph import START, MessagesState, StateGraph
from engine.prebuilt import InjectedState, ToolNode, ToolRuntime, tools_condition
from engine.prebuilt.tool_node import (
    INVALID_TOOL_NAME_ERROR_TEMPLATE,
    TOOL_CALL_ERROR_TEMPLATE,
    TOOL_INVOCATION_ERROR_TEMPLATE,
    ToolCallRequest,
    ToolInvocationError,
    msg_content_output,
)
from engine.types import Command, Send, interrupt


class Opaque:
    def __str__(self) -> str:
        return "an opaque thing"


def greet(name: str) -> str:
    """Say hello."""
    return f"hello {name}"


def measure(n: int, unit: str, state: Annotated[dict, InjectedState]) -> str:
    """Typed arguments, and the state injected."""
    return f"{n}{unit}"


def boom(x: int) -> str:
    """Always fails."""
    raise ValueError(f"bad {x}")


def lookup(key: str) -> str:
    """Fails with a KeyError."""
    raise KeyError(key)


TOOLS = [greet, measure, boom, lookup]


class Notes(MessagesState):
    note: str


def ai(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [
        {"name": name, "args": args, "id": f"call-{i}"}
        for i, (name, args) in enumerate(calls)
    ]
    return {"messages": [AIMessage("", tool_calls=tool_calls)]}


def graph_of(node: ToolNode, **compile_kwargs: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Notes)
    builder.add_node("tools", node)
    builder.add_node("after", lambda s: {"note": f"{s.get('note', '')}+after"})
    builder.add_edge(START, "tools")
    return builder.compile(**compile_kwargs)


def answers(node: ToolNode, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """The tool messages the node adds, run in a graph."""
    return graph_of(node).invoke(ai(*calls))["messages"][1:]


def invoke_in_a_run(node: ToolNode, input: Any) -> Any:
    """``node.invoke(input)`` called from inside a running graph, as a node would."""

    @entrypoint()
    def run(_: Any) -> Any:
        return node.invoke(input)

    return run.invoke(0)


# -- errors ----------------------------------------------------------------------


def test_by_default_bad_arguments_are_answered_with_langgraphs_message() -> None:
    (missing, wrong) = answers(
        ToolNode(TOOLS),
        ("measure", {"unit": "cm"}),
        ("measure", {"n": "ten", "unit": "cm"}),
    )

    assert isinstance(missing, ToolMessage)
    assert missing.content == (
        "Error invoking tool 'measure' with kwargs {'unit': 'cm'} with error:\n"
        " n: Field required\n"
        " Please fix the error and try again."
    )
    assert (missing.status, missing.name, missing.tool_call_id) == (
        "error",
        "measure",
        "call-0",
    )
    assert wrong.content == TOOL_INVOCATION_ERROR_TEMPLATE.format(
        tool_name="measure",
        tool_kwargs={"n": "ten", "unit": "cm"},
        error="n: Input should be a valid integer, unable to parse string as an integer",
    )


def test_by_default_a_tool_that_raises_fails_the_run() -> None:
    with pytest.raises(ValueError, match="bad 1"):
        answers(ToolNode(TOOLS), ("boom", {"x": 1}))


def test_arguments_are_coerced_like_langchain_tools_and_extras_dropped() -> None:
    (answer,) = answers(ToolNode(TOOLS), ("measure", {"n": "5", "unit": "m", "x": 1}))

    assert answer.content == "5m"
    assert answer.status == "success"


def test_handle_tool_errors_true_answers_every_exception() -> None:
    node = ToolNode(TOOLS, handle_tool_errors=True)

    (failed, invalid) = answers(node, ("boom", {"x": 1}), ("measure", {"n": 1}))

    assert failed.content == "Error: ValueError('bad 1')\n Please fix your mistakes."
    assert failed.status == "error"
    assert invalid.content == TOOL_CALL_ERROR_TEMPLATE.format(
        error=repr(
            ToolInvocationError(
                "measure",
                ValueError(),
                {"n": 1},
                [{"loc": ("unit",), "msg": "Field required"}],
            )
        )
    )


def test_handle_tool_errors_false_raises_even_bad_arguments() -> None:
    with pytest.raises(ToolInvocationError) as caught:
        answers(ToolNode(TOOLS, handle_tool_errors=False), ("measure", {"n": 1}))

    assert caught.value.tool_name == "measure"
    assert caught.value.tool_kwargs == {"n": 1}
    assert "unit: Field required" in caught.value.message


def test_handle_tool_errors_as_a_string_is_the_answer() -> None:
    node = ToolNode(TOOLS, handle_tool_errors="try something else")

    assert [m.content for m in answers(node, ("boom", {"x": 1}))] == [
        "try something else"
    ]


def test_a_handler_function_answers_the_types_it_is_annotated_with() -> None:
    def on_value_error(e: ValueError) -> str:
        return f"handled {e}"

    node = ToolNode(TOOLS, handle_tool_errors=on_value_error)

    assert answers(node, ("boom", {"x": 2}))[0].content == "handled bad 2"
    with pytest.raises(KeyError):
        answers(node, ("lookup", {"key": "k"}))


def test_a_handler_function_without_annotation_answers_everything() -> None:
    node = ToolNode(TOOLS, handle_tool_errors=lambda e: f"any {type(e).__name__}")

    assert [
        m.content for m in answers(node, ("boom", {"x": 2}), ("lookup", {"key": "k"}))
    ] == ["any ValueError", "any KeyError"]


@pytest.mark.parametrize("handled", [ValueError, (KeyError, ValueError)])
def test_exception_types_answer_only_those_types(handled: Any) -> None:
    node = ToolNode(TOOLS, handle_tool_errors=handled)

    assert answers(node, ("boom", {"x": 3}))[0].content == (
        "Error: ValueError('bad 3')\n Please fix your mistakes."
    )
    with pytest.raises(ToolInvocationError):
        answers(node, ("measure", {"n": 1}))  # not a ValueError: the run fails


@pytest.mark.parametrize("flag", [True, False])
def test_an_unknown_tool_is_always_answered(flag: bool) -> None:
    (answer,) = answers(ToolNode(TOOLS, handle_tool_errors=flag), ("nope", {}))

    assert answer.content == INVALID_TOOL_NAME_ERROR_TEMPLATE.format(
        requested_tool="nope", available_tools="greet, measure, boom, lookup"
    )
    assert (answer.status, answer.name) == ("error", "nope")


def test_an_interrupt_in_a_tool_always_pauses_the_run() -> None:
    def ask(question: str) -> str:
        """Ask a person."""
        return f"they said {interrupt(question)}"

    graph = graph_of(
        ToolNode([ask], handle_tool_errors=True), checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}

    paused = graph.invoke(ai(("ask", {"question": "ok?"})), config)
    done = graph.invoke(Command(resume="yes"), config)

    assert paused["__interrupt__"][0].value == "ok?"
    assert done["messages"][-1].content == "they said yes"


# -- results ---------------------------------------------------------------------


def test_results_become_message_content_like_langgraph() -> None:
    assert msg_content_output("text") == "text"
    assert msg_content_output({"a": 1, "b": "é"}) == '{"a": 1, "b": "é"}'
    assert msg_content_output(5) == "5"
    assert msg_content_output(["a", "b"]) == '["a", "b"]'
    assert msg_content_output(None) == "null"
    assert msg_content_output(Opaque()) == "an opaque thing"
    blocks = [{"type": "text", "text": "hi"}]
    assert msg_content_output(blocks) is blocks


def test_a_tool_message_answers_each_call_in_order() -> None:
    (first, second) = answers(
        ToolNode(TOOLS), ("greet", {"name": "ann"}), ("greet", {"name": "bo"})
    )

    assert [(m.content, m.name, m.tool_call_id, m.status) for m in (first, second)] == [
        ("hello ann", "greet", "call-0", "success"),
        ("hello bo", "greet", "call-1", "success"),
    ]


def test_the_latest_ai_message_is_answered_even_if_not_the_last() -> None:
    state = ai(("greet", {"name": "cy"}))
    state["messages"].append(HumanMessage("meanwhile"))

    out = invoke_in_a_run(ToolNode(TOOLS), state)

    assert [m.content for m in out["messages"]] == ["hello cy"]


def test_a_list_of_messages_gets_a_list_back() -> None:
    out = invoke_in_a_run(ToolNode(TOOLS), ai(("greet", {"name": "di"}))["messages"])

    assert isinstance(out, list)
    assert out[0].content == "hello di"


@pytest.mark.parametrize(
    ("state", "error"),
    [
        ({"messages": []}, "No message found in input"),
        ({}, "No message found in input"),
        ({"messages": [HumanMessage("x")]}, "No AIMessage found in input"),
    ],
)
def test_input_without_an_ai_message_is_refused(state: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        invoke_in_a_run(ToolNode(TOOLS), state)


def test_tool_calls_sent_directly_are_run() -> None:
    call = {"name": "greet", "args": {"name": "ed"}, "id": "c9", "type": "tool_call"}
    with_context = {
        "__type": "tool_call_with_context",
        "tool_call": call,
        "state": {"messages": [], "note": "n"},
    }

    direct = invoke_in_a_run(ToolNode(TOOLS), [call])
    assert direct["messages"][0].content == "hello ed"
    sent = invoke_in_a_run(ToolNode(TOOLS), with_context)
    assert sent["messages"][0].tool_call_id == "c9"


def test_langchain_tools_run_with_langchains_validation() -> None:
    @lc_tool
    def convert(amount: int, currency: str = "EUR") -> dict[str, Any]:
        """Convert an amount."""
        return {"amount": amount, "currency": currency}

    ok, invalid = answers(
        ToolNode([convert]), ("convert", {"amount": "3"}), ("convert", {})
    )

    assert ok.content == '{"amount": 3, "currency": "EUR"}'
    assert invalid.content == (
        "Error invoking tool 'convert' with kwargs {} with error:\n"
        " amount: Field required\n"
        " Please fix the error and try again."
    )


# -- Command ---------------------------------------------------------------------


def set_note(text: str, runtime: ToolRuntime) -> Command[Any]:
    """Update the state and move on."""
    return Command(
        update={
            "note": text,
            "messages": [ToolMessage("noted", tool_call_id=runtime.tool_call_id)],
        },
        goto="after",
    )


def test_a_tool_returning_a_command_updates_the_state_and_goes_to() -> None:
    out = graph_of(ToolNode([set_note, greet])).invoke(
        ai(("set_note", {"text": "hi"}), ("greet", {"name": "fay"}))
    )

    assert out["note"] == "hi+after"
    assert [(m.content, m.name) for m in out["messages"][1:]] == [
        ("noted", "set_note"),  # the ToolNode names the answer after its tool
        ("hello fay", "greet"),
    ]


@lc_tool
def lc_set_note(
    text: str, tool_call_id: Annotated[str, InjectedToolCallId]
) -> Command[Any]:
    """Update the state and move on (a LangChain tool)."""
    return Command(
        update={
            "note": text,
            "messages": [ToolMessage("noted", tool_call_id=tool_call_id)],
        },
        goto="after",
    )


def test_a_langchain_tool_returning_a_command_updates_the_state_and_goes_to() -> None:
    # LangChain turns a tool's output into a ToolMessage's text unless it is a
    # ToolOutputMixin, as LangGraph's Command is (and so ours, with langchain-core).
    out = graph_of(ToolNode([lc_set_note])).invoke(ai(("lc_set_note", {"text": "hi"})))

    assert out["note"] == "hi+after"
    assert [(m.content, m.name) for m in out["messages"][1:]] == [
        ("noted", "lc_set_note")
    ]


def test_a_command_must_answer_its_tool_call() -> None:
    def silent(text: str) -> Command[Any]:
        """Forgets to answer."""
        return Command(update={"note": text})

    with pytest.raises(ValueError, match="'silent'"):
        graph_of(ToolNode([silent])).invoke(ai(("silent", {"text": "x"})))


def test_commands_for_the_parent_with_sends_are_merged_into_one() -> None:
    def fan_out(x: int) -> Command[Any]:
        """Send work to the parent graph."""
        return Command(graph=Command.PARENT, goto=[Send("work", {"x": x})])

    out = invoke_in_a_run(
        ToolNode([fan_out]), ai(("fan_out", {"x": 1}), ("fan_out", {"x": 2}))
    )

    assert out == [
        Command(
            graph=Command.PARENT, goto=[Send("work", {"x": 1}), Send("work", {"x": 2})]
        )
    ]


# -- wrappers --------------------------------------------------------------------


def test_wrap_tool_call_can_rewrite_a_call_or_answer_it_alone() -> None:
    seen: list[str] = []

    def wrapper(request: ToolCallRequest, execute: Any) -> Any:
        seen.append(request.tool_call["name"])
        if request.tool is None:
            return ToolMessage("no such tool", tool_call_id=request.tool_call["id"])
        return execute(
            request.override(tool_call={**request.tool_call, "args": {"name": "gus"}})
        )

    out = answers(
        ToolNode(TOOLS, wrap_tool_call=wrapper),
        ("greet", {"name": "x"}),
        ("ghost", {}),
    )

    assert [m.content for m in out] == ["hello gus", "no such tool"]
    assert sorted(seen) == ["ghost", "greet"]


def test_a_failing_wrapper_is_handled_like_a_failing_tool() -> None:
    def wrapper(request: ToolCallRequest, execute: Any) -> Any:
        raise KeyError("wrapper broke")

    with pytest.raises(KeyError):
        answers(ToolNode(TOOLS, wrap_tool_call=wrapper), ("greet", {"name": "x"}))
    handled = ToolNode(TOOLS, wrap_tool_call=wrapper, handle_tool_errors="oops")
    assert [m.content for m in answers(handled, ("greet", {"name": "x"}))] == ["oops"]


def test_override_of_the_state_is_what_tools_get_injected() -> None:
    def peek(state: Annotated[dict, InjectedState]) -> str:
        """Reads the state."""
        return state["note"]

    def wrapper(request: ToolCallRequest, execute: Any) -> Any:
        return execute(request.override(state={**request.state, "note": "swapped"}))

    state = {**ai(("peek", {})), "note": "original"}

    out = invoke_in_a_run(ToolNode([peek], wrap_tool_call=wrapper), state)

    assert out["messages"][0].content == "swapped"


def test_async_runs_use_the_async_wrapper_or_the_sync_one() -> None:
    async def awrapper(request: ToolCallRequest, execute: Any) -> Any:
        return await execute(
            request.override(tool_call={**request.tool_call, "args": {"name": "hal"}})
        )

    def wrapper(request: ToolCallRequest, execute: Any) -> Any:
        return execute(
            request.override(tool_call={**request.tool_call, "args": {"name": "ivy"}})
        )

    async def run(node: ToolNode) -> str:
        out = await graph_of(node).ainvoke(ai(("greet", {"name": "x"})))
        return str(out["messages"][-1].content)

    assert asyncio.run(run(ToolNode(TOOLS, awrap_tool_call=awrapper))) == "hello hal"
    assert asyncio.run(run(ToolNode(TOOLS, wrap_tool_call=wrapper))) == "hello ivy"


# -- tools_condition ---------------------------------------------------------------


def test_tools_condition_routes_on_the_last_messages_tool_calls() -> None:
    assert tools_condition(ai(("greet", {"name": "x"}))) == "tools"
    assert tools_condition([AIMessage("done")]) == "__end__"
    assert (
        tools_condition(
            {
                "chat": [
                    AIMessage("", tool_calls=[{"name": "g", "args": {}, "id": "1"}])
                ]
            },
            messages_key="chat",
        )
        == "tools"
    )
    with pytest.raises(ValueError, match="No messages found"):
        tools_condition({"messages": []})


# -- plain dict messages (langchain-core absent) ------------------------------------


class DictChat(TypedDict):
    messages: Annotated[list[Any], operator.add]


@pytest.fixture
def without_langchain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(message_module, "_lc", lambda: None)
    monkeypatch.setattr(tool_node_module, "_lc_messages", lambda: None)


@pytest.mark.usefixtures("without_langchain")
def test_with_dict_messages_the_answers_are_dicts_with_the_same_content() -> None:
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"name": "greet", "args": {"name": "jo"}, "id": "a"},
            {"name": "measure", "args": {"n": 1}, "id": "b"},
        ],
    }
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(DictChat)
    builder.add_node("tools", ToolNode(TOOLS))
    builder.add_edge(START, "tools")

    out = builder.compile().invoke({"messages": [message]})["messages"][1:]

    assert out == [
        {
            "role": "tool",
            "content": "hello jo",
            "tool_call_id": "a",
            "name": "greet",
            "status": "success",
        },
        {
            "role": "tool",
            "content": TOOL_INVOCATION_ERROR_TEMPLATE.format(
                tool_name="measure", tool_kwargs={"n": 1}, error="unit: Field required"
            ),
            "tool_call_id": "b",
            "name": "measure",
            "status": "error",
        },
    ]
    assert tools_condition({"messages": [message]}) == "tools"
    assert tools_condition({"messages": [{"role": "assistant", "content": "ok"}]}) == (
        "__end__"
    )

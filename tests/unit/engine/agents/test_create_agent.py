"""create_agent compiled to a graph: shape, loop, structured output, middleware, streaming."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, NotRequired

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from engine.agents import AgentState, create_agent
from engine.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    OmitFromInput,
    OmitFromOutput,
    PrivateStateAttr,
    after_agent,
    after_model,
    before_agent,
    before_model,
    hook_config,
    wrap_model_call,
    wrap_tool_call,
)
from engine.agents.structured_output import (
    ProviderStrategy,
    StructuredOutputValidationError,
    ToolStrategy,
)
from engine.checkpoint.memory import InMemorySaver
from engine.errors import GraphRecursionError, InvalidUpdateError
from engine.graph import START, MessagesState, StateGraph
from engine.prebuilt import ScriptedChatModel, tool
from engine.types import Command

QUESTION = {"messages": [{"role": "user", "content": "hi"}]}


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def boom(x: int) -> int:
    """Always fails."""
    raise RuntimeError("tool broke")


@tool(return_direct=True)
def lookup(q: str) -> str:
    """Look it up and answer directly."""
    return f"found {q}"


def calls(*items: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [
            {"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(items)
        ],
    }


def shape(graph: Any) -> tuple[list[str], list[tuple[str, str, bool]]]:
    drawn = graph.get_graph()
    return sorted(drawn.nodes), sorted(
        {(e.source, e.target, e.conditional) for e in drawn.edges}
    )


# -- shape -----------------------------------------------------------------------


class Both(AgentMiddleware):
    def before_agent(self, state: Any, runtime: Any) -> None:
        return None

    def before_model(self, state: Any, runtime: Any) -> None:
        return None

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Any, runtime: Any) -> None:
        return None

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None


@before_model(can_jump_to=["end"])
def gate(state: Any, runtime: Any) -> None:
    return None


def test_nodes_and_edges_follow_langchain() -> None:
    model = ScriptedChatModel([{"content": "x"}])
    assert shape(create_agent(model, [add])) == (
        ["__end__", "__start__", "model", "tools"],
        [
            ("__start__", "model", False),
            ("model", "__end__", True),
            ("model", "model", True),  # back to the model (as LangChain: retries)
            ("model", "tools", True),
            ("tools", "model", True),
        ],
    )
    assert shape(create_agent(model)) == (
        ["__end__", "__start__", "model"],
        [("__start__", "model", False), ("model", "__end__", False)],
    )
    nodes, edges = shape(create_agent(model, [add], middleware=[Both(), gate]))
    assert nodes == [
        "Both.after_agent",
        "Both.after_model",
        "Both.before_agent",
        "Both.before_model",
        "__end__",
        "__start__",
        "gate.before_model",
        "model",
        "tools",
    ]
    assert edges == [
        ("Both.after_agent", "__end__", False),
        ("Both.after_model", "Both.after_agent", True),
        ("Both.after_model", "Both.before_model", True),
        ("Both.after_model", "tools", True),
        ("Both.before_agent", "Both.before_model", False),
        ("Both.before_model", "gate.before_model", False),
        ("__start__", "Both.before_agent", False),
        ("gate.before_model", "Both.after_agent", True),
        ("gate.before_model", "model", True),
        ("model", "Both.after_model", False),
        ("tools", "Both.before_model", True),
    ]


def test_duplicate_middleware_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate middleware"):
        create_agent(ScriptedChatModel([{"content": "x"}]), middleware=[Both(), Both()])


# -- the loop --------------------------------------------------------------------


def test_parallel_tool_calls_run_as_one_task_each_and_merge() -> None:
    model = ScriptedChatModel(
        [calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})), {"content": "10"}]
    )
    agent = create_agent(model, [add])

    updates = list(agent.stream(QUESTION, stream_mode="updates"))
    out = agent.invoke(QUESTION)

    assert [list(u) for u in updates] == [["model"], ["tools"], ["tools"], ["model"]]
    assert [m.content for m in out["messages"]] == ["hi", "", "3", "7", "10"]
    assert model.requests[-1]["tools"] == ["add"]


def test_two_commands_writing_a_plain_key_in_one_step_conflict() -> None:
    class State(AgentState):
        status: NotRequired[str]

    def mark(value: str, runtime: Any = None) -> Command:
        """Set the status."""
        from engine.prebuilt import ToolRuntime  # noqa: PLC0415

        assert isinstance(runtime, ToolRuntime)
        return Command(
            update={
                "status": value,
                "messages": [
                    {
                        "role": "tool",
                        "content": "ok",
                        "tool_call_id": runtime.tool_call_id,
                    }
                ],
            }
        )

    model = ScriptedChatModel(
        [calls(("mark", {"value": "a"}), ("mark", {"value": "b"})), {"content": "done"}]
    )
    with pytest.raises(InvalidUpdateError):
        create_agent(model, [mark], state_schema=State).invoke(QUESTION)


def test_bad_arguments_and_unknown_tools_are_answered_and_raising_tools_fail_the_run() -> (
    None
):
    model = ScriptedChatModel(
        [calls(("add", {"a": "x"}), ("nope", {})), {"content": "sorry"}]
    )
    out = create_agent(model, [add]).invoke(QUESTION)
    errors = [m for m in out["messages"] if m.type == "tool"]
    assert [m.status for m in errors] == ["error", "error"]
    assert "Error invoking tool 'add'" in errors[0].content
    assert "nope is not a valid tool" in errors[1].content

    failing = ScriptedChatModel([calls(("boom", {"x": 1})), {"content": "x"}])
    with pytest.raises(RuntimeError, match="tool broke"):
        create_agent(failing, [boom]).invoke(QUESTION)


def test_return_direct_ends_the_run_after_the_tool() -> None:
    model = ScriptedChatModel([calls(("lookup", {"q": "x"})), {"content": "never"}])
    out = create_agent(model, [lookup]).invoke(QUESTION)

    assert out["messages"][-1].content == "found x"
    assert model.calls == 1


def test_recursion_limit_defaults_high_and_the_call_can_lower_it() -> None:
    model = ScriptedChatModel([calls(("add", {"a": 1, "b": 1}))], advance="call")
    agent = create_agent(model, [add])
    assert agent.config["recursion_limit"] == 10_000
    with pytest.raises(GraphRecursionError):
        agent.invoke(QUESTION, {"recursion_limit": 5})


# -- structured output -----------------------------------------------------------


class Weather(BaseModel):
    city: str
    degrees: int


def test_tool_strategy_parses_the_answer_call_and_retries_a_bad_one() -> None:
    model = ScriptedChatModel(
        [
            calls(("Weather", {"city": "Oslo"})),
            calls(("Weather", {"city": "Oslo", "degrees": 3})),
        ]
    )
    out = create_agent(model, [add], response_format=ToolStrategy(Weather)).invoke(
        QUESTION
    )

    assert out["structured_response"] == Weather(city="Oslo", degrees=3)
    answers = [m for m in out["messages"] if m.type == "tool"]
    assert answers[0].content.startswith("Error:") and "degrees" in answers[0].content
    assert (
        answers[1].content
        == f"Returning structured response: {Weather(city='Oslo', degrees=3)}"
    )
    assert model.requests[0]["tools"] == ["add", "Weather"]
    assert model.requests[0]["options"]["tool_choice"] == "any"


def test_tool_strategy_without_error_handling_raises() -> None:
    model = ScriptedChatModel([calls(("Weather", {"city": "Oslo"}))])
    agent = create_agent(
        model, response_format=ToolStrategy(Weather, handle_errors=False)
    )
    with pytest.raises(StructuredOutputValidationError):
        agent.invoke(QUESTION)


def test_provider_strategy_parses_json_text() -> None:
    model = ScriptedChatModel([{"content": '{"city": "Rome", "degrees": 20}'}])
    out = create_agent(model, [add], response_format=ProviderStrategy(Weather)).invoke(
        QUESTION
    )

    assert out["structured_response"] == Weather(city="Rome", degrees=20)
    assert (
        model.requests[0]["options"]["response_format"]["json_schema"]["name"]
        == "Weather"
    )


def test_a_bare_schema_picks_the_strategy_from_the_model() -> None:
    provider = ScriptedChatModel(
        [{"content": '{"city": "Rome", "degrees": 1}'}], supports_structured_output=True
    )
    tools = ScriptedChatModel([calls(("Weather", {"city": "Rome", "degrees": 1}))])

    assert (
        create_agent(provider, response_format=Weather)
        .invoke(QUESTION)["structured_response"]
        .city
        == "Rome"
    )
    assert (
        create_agent(tools, response_format=Weather)
        .invoke(QUESTION)["structured_response"]
        .degrees
        == 1
    )
    assert "response_format" in provider.requests[0]["options"]
    assert tools.requests[0]["tools"] == ["Weather"]


# -- middleware ------------------------------------------------------------------


class Trace(AgentMiddleware):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label, self.log = label, log

    @property
    def name(self) -> str:
        return self.label

    def before_agent(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.label}.before_agent")

    def before_model(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.label}.before_model")

    def after_model(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.label}.after_model")

    def after_agent(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.label}.after_agent")

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.log.append(f"{self.label}.wrap:in")
        response = handler(request)
        self.log.append(f"{self.label}.wrap:out")
        return response

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.log.append(f"{self.label}.tool:in")
        result = handler(request)
        self.log.append(f"{self.label}.tool:out")
        return result


def test_hooks_and_wrappers_run_in_registration_order_outermost_first() -> None:
    log: list[str] = []
    model = ScriptedChatModel([calls(("add", {"a": 1, "b": 2})), {"content": "3"}])
    create_agent(model, [add], middleware=[Trace("A", log), Trace("B", log)]).invoke(
        QUESTION
    )

    turn = [
        "A.before_model",
        "B.before_model",
        "A.wrap:in",
        "B.wrap:in",
        "B.wrap:out",
        "A.wrap:out",
        "B.after_model",
        "A.after_model",
    ]
    assert log == [
        "A.before_agent",
        "B.before_agent",
        *turn,
        "A.tool:in",
        "B.tool:in",
        "B.tool:out",
        "A.tool:out",
        *turn,
        "B.after_agent",
        "A.after_agent",
    ]


class CountState(AgentState):
    count: NotRequired[int]
    secret: NotRequired[Annotated[str, PrivateStateAttr]]
    note: NotRequired[Annotated[str, OmitFromOutput]]
    computed: NotRequired[Annotated[str, OmitFromInput]]


class Counter(AgentMiddleware):
    state_schema = CountState

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"count": state.get("count", 0) + 1, "secret": "s", "computed": "c"}


class Override(TypedDict):
    messages: Annotated[list[Any], lambda a, b: [*a, *b]]
    count: NotRequired[int]
    extra: NotRequired[str]


def test_state_schemas_merge_and_annotations_decide_input_and_output() -> None:
    agent = create_agent(ScriptedChatModel([{"content": "x"}]), middleware=[Counter()])
    input_keys = set(agent.get_input_jsonschema()["properties"])
    output_keys = set(agent.get_output_jsonschema()["properties"])

    assert {"messages", "count", "note"} <= input_keys
    assert not {"secret", "computed", "jump_to", "structured_response"} & input_keys
    assert {"messages", "count", "computed", "structured_response"} <= output_keys
    assert not {"secret", "note", "jump_to"} & output_keys
    out = agent.invoke({**QUESTION, "note": "n"})
    assert out["count"] == 1 and out["computed"] == "c" and "secret" not in out

    merged = create_agent(
        ScriptedChatModel([{"content": "x"}]),
        middleware=[Counter()],
        state_schema=Override,
    )
    assert "extra" in merged.get_input_jsonschema()["properties"]


class Stopper(AgentMiddleware):
    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {
            "jump_to": "end",
            "messages": [{"role": "assistant", "content": "stopped"}],
        }


def test_jump_to_routes_and_never_leaks() -> None:
    saver = InMemorySaver()
    model = ScriptedChatModel([{"content": "x"}])
    agent = create_agent(model, middleware=[Stopper()], checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}

    # the values stream shows every state key, jump_to too, as LangGraph's does
    values = list(agent.stream(QUESTION, config, stream_mode="values"))
    out = agent.invoke(QUESTION, {"configurable": {"thread_id": "u"}})

    assert model.calls == 0
    assert out["messages"][-1].content == "stopped" and "jump_to" not in out
    assert values[-1]["jump_to"] == "end"
    assert "jump_to" not in agent.get_input_jsonschema()["properties"]
    for saved in saver.list(config):
        assert "jump_to" not in saved.checkpoint["channel_values"]
    assert "jump_to" not in agent.get_state(config).values


def test_an_undeclared_jump_is_an_error() -> None:
    @before_model
    def sneaky(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    with pytest.raises(ValueError, match="can_jump_to"):
        create_agent(ScriptedChatModel([{"content": "x"}]), middleware=[sneaky]).invoke(
            QUESTION
        )


def test_decorated_wrappers_change_the_request_and_the_tool_call() -> None:
    @wrap_model_call
    def prompt(request: ModelRequest, handler: Any) -> Any:
        return handler(request.override(system_prompt="Be terse", tools=[]))

    @wrap_tool_call
    def double(request: Any, handler: Any) -> Any:
        call = request.tool_call
        return handler(
            request.override(
                tool_call={**call, "args": {"a": call["args"]["a"] * 2, "b": 0}}
            )
        )

    model = ScriptedChatModel([calls(("add", {"a": 5, "b": 1})), {"content": "ok"}])
    out = create_agent(model, [add], middleware=[prompt, double]).invoke(QUESTION)

    assert model.requests[0]["messages"][0] == {"role": "system", "content": "Be terse"}
    assert model.requests[0]["tools"] == []
    assert out["messages"][2].content == "10"


def test_agent_level_hooks_run_once_per_invocation() -> None:
    seen: list[str] = []

    @before_agent
    def start(state: Any, runtime: Any) -> None:
        seen.append("start")

    @after_agent
    def end(state: Any, runtime: Any) -> None:
        seen.append("end")

    @after_model
    def each(state: Any, runtime: Any) -> None:
        seen.append("model")

    model = ScriptedChatModel([calls(("add", {"a": 1, "b": 2})), {"content": "3"}])
    create_agent(model, [add], middleware=[start, each, end]).invoke(QUESTION)
    assert seen == ["start", "model", "model", "end"]


def test_async_runs_use_async_hooks() -> None:
    seen: list[str] = []

    @before_model
    async def note(state: Any, runtime: Any) -> None:
        seen.append("async")

    model = ScriptedChatModel([calls(("add", {"a": 1, "b": 2})), {"content": "3"}])
    out = asyncio.run(create_agent(model, [add], middleware=[note]).ainvoke(QUESTION))
    assert out["messages"][-1].content == "3" and seen == ["async", "async"]
    with pytest.raises(NotImplementedError, match="async only"):
        create_agent(model, [add], middleware=[note]).invoke(QUESTION)


def test_hook_decorators_say_what_they_are_and_take_options_first() -> None:
    for decorator, hook in (
        (before_agent, "before_agent"),
        (before_model, "before_model"),
        (after_model, "after_model"),
        (after_agent, "after_agent"),
    ):
        assert decorator.__name__ == hook and f"``{hook}`` hook" in (
            decorator.__doc__ or ""
        )

        def act(state: Any, runtime: Any) -> None:
            return None

        named = decorator(name="custom")(act)
        assert named.name == "custom" and hook in type(named).__dict__

        async def aact(state: Any, runtime: Any) -> None:
            return None

        assert f"a{hook}" in type(decorator(aact)).__dict__


# -- streaming -------------------------------------------------------------------


def test_tokens_stream_in_order_with_their_metadata() -> None:
    model = ScriptedChatModel(
        [calls(("add", {"a": 1, "b": 2})), {"content": "The sum is 3."}]
    )
    agent = create_agent(model, [add], name="calc")

    parts = list(agent.stream(QUESTION, stream_mode="messages"))

    tokens = [
        c["content"]
        for c, meta in parts
        if meta["langgraph_node"] == "model" and isinstance(c, dict)
    ]
    assert tokens[-4:] == ["The", " sum", " is", " 3."]
    assert [meta["langgraph_node"] for _, meta in parts] == [
        "model",
        "tools",
        "model",
        "model",
        "model",
        "model",
    ]
    assert parts[-1][1]["langgraph_step"] == 3


def test_async_runs_stream_tokens_too() -> None:
    model = ScriptedChatModel([{"content": "one two"}])

    async def collect() -> list[Any]:
        return [
            c
            async for c in create_agent(model).astream(QUESTION, stream_mode="messages")
        ]

    assert [c["content"] for c, _ in asyncio.run(collect())] == ["one", " two"]


def test_tokens_of_an_agent_inside_a_subgraph_carry_its_namespace() -> None:
    agent = create_agent(ScriptedChatModel([{"content": "deep answer"}]), name="inner")
    outer: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    outer.add_node("helper", agent)
    outer.add_edge(START, "helper")

    parts = list(
        outer.compile().stream(QUESTION, stream_mode="messages", subgraphs=True)
    )

    model_parts = [
        (ns, c, meta) for ns, (c, meta) in parts if meta["langgraph_node"] == "model"
    ]
    assert [c["content"] for _, c, _ in model_parts] == ["deep", " answer"]
    assert all(ns and ns[0].startswith("helper:") for ns, _, _ in model_parts)

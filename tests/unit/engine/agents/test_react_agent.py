"""create_react_agent with LangGraph 1.2's options, and ValidationNode (scripted models).

The expected graph shapes were observed on LangGraph 1.2 with the same options.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine.prebuilt import ScriptedChatModel, ValidationNode, create_react_agent, tool
from engine.prebuilt.chat_agent_executor import AgentState, create_tool_calling_executor
from engine.warnings import LangGraphDeprecatedSinceV10


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(return_direct=True)
def finish(x: str) -> str:
    """Finish with x."""
    return f"done {x}"


class Answer(BaseModel):
    total: int


def shape(graph: Any) -> tuple[list[str], list[tuple[str, str]]]:
    drawn = graph.get_graph()
    return sorted(drawn.nodes), sorted({(e.source, e.target) for e in drawn.edges})


def two_calls() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            {
                "content": "",
                "tool_calls": [
                    {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"},
                    {"name": "add", "args": {"a": 3, "b": 4}, "id": "c2"},
                ],
            },
            {"content": "10"},
        ]
    )


QUESTION = {"messages": [{"role": "user", "content": "add"}]}
MODEL = ScriptedChatModel([{"content": "x"}])


@pytest.mark.parametrize(
    ("options", "nodes", "edges"),
    [
        (
            {},
            ["__end__", "__start__", "agent", "tools"],
            [
                ("__start__", "agent"),
                ("agent", "__end__"),
                ("agent", "tools"),
                ("tools", "agent"),
            ],
        ),
        (
            {"pre_model_hook": lambda s: {"llm_input_messages": s["messages"]}},
            ["__end__", "__start__", "agent", "pre_model_hook", "tools"],
            [
                ("__start__", "pre_model_hook"),
                ("agent", "__end__"),
                ("agent", "tools"),
                ("pre_model_hook", "agent"),
                ("tools", "pre_model_hook"),
            ],
        ),
        (
            {"post_model_hook": lambda s: {}, "response_format": Answer},
            [
                "__end__",
                "__start__",
                "agent",
                "generate_structured_response",
                "post_model_hook",
                "tools",
            ],
            [
                ("__start__", "agent"),
                ("agent", "post_model_hook"),
                ("generate_structured_response", "__end__"),
                ("post_model_hook", "agent"),
                ("post_model_hook", "generate_structured_response"),
                ("post_model_hook", "tools"),
                ("tools", "agent"),
            ],
        ),
    ],
)
def test_graph_shape_matches_langgraph(
    options: dict[str, Any], nodes: list[str], edges: list[tuple[str, str]]
) -> None:
    assert shape(create_react_agent(MODEL, [add], **options)) == (nodes, edges)


def test_a_route_drawn_as_a_plain_edge_is_not_drawn_again() -> None:
    # agent -> post_model_hook is a plain edge and one of the agent's routes;
    # LangGraph 1.2 draws it once, plain
    drawn = create_react_agent(MODEL, [add], post_model_hook=lambda s: {}).get_graph()

    assert sorted((e.source, e.target, e.conditional) for e in drawn.edges) == [
        ("__start__", "agent", False),
        ("agent", "post_model_hook", False),
        ("post_model_hook", "__end__", True),
        ("post_model_hook", "agent", True),
        ("post_model_hook", "tools", True),
        ("tools", "agent", False),
    ]


def test_return_direct_tools_route_to_end_and_no_tools_is_one_node() -> None:
    assert ("tools", "__end__") in shape(create_react_agent(MODEL, [add, finish]))[1]
    assert shape(create_react_agent(MODEL, [])) == (
        ["__end__", "__start__", "agent"],
        [("__start__", "agent"), ("agent", "__end__")],
    )


def test_v2_sends_one_task_per_tool_call_and_v1_one_task() -> None:
    v2 = list(
        create_react_agent(two_calls(), [add]).stream(QUESTION, stream_mode="updates")
    )
    v1 = list(
        create_react_agent(two_calls(), [add], version="v1").stream(
            QUESTION, stream_mode="updates"
        )
    )

    assert [list(u) for u in v2] == [["agent"], ["tools"], ["tools"], ["agent"]]
    assert [list(u) for u in v1] == [["agent"], ["tools"], ["agent"]]
    assert len(v1[1]["tools"]["messages"]) == 2


def test_remaining_steps_stop_the_loop_with_an_apology() -> None:
    model = ScriptedChatModel(
        [{"content": "", "tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}],
        advance="call",
    )
    out = create_react_agent(model, [add]).invoke(QUESTION, {"recursion_limit": 4})

    assert [m.content for m in out["messages"]][-1] == (
        "Sorry, need more steps to process this request."
    )
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]


def test_pre_model_hook_llm_input_messages_reach_the_model_not_the_state() -> None:
    model = ScriptedChatModel([{"content": "ok"}])

    def hook(state: Any) -> dict[str, Any]:
        return {"llm_input_messages": [{"role": "user", "content": "trimmed"}]}

    out = create_react_agent(model, [add], pre_model_hook=hook).invoke(QUESTION)

    assert [m["content"] for m in model.requests[0]["messages"]] == ["trimmed"]
    assert [m.content for m in out["messages"]] == ["add", "ok"]


def test_post_model_hook_runs_after_each_model_call() -> None:
    seen: list[int] = []

    def hook(state: Any) -> dict[str, Any]:
        seen.append(len(state["messages"]))
        return {}

    create_react_agent(two_calls(), [add], post_model_hook=hook).invoke(QUESTION)

    assert seen == [2, 5]


def test_response_format_asks_for_json_and_stores_the_parsed_answer() -> None:
    model = ScriptedChatModel([{"content": "10"}, {"content": '{"total": 10}'}])
    out = create_react_agent(
        model, [], response_format=("Answer in JSON", Answer)
    ).invoke(QUESTION)

    assert out["structured_response"] == Answer(total=10)
    last = model.requests[-1]
    assert last["options"]["response_format"]["json_schema"]["name"] == "Answer"
    assert last["messages"][0] == {"role": "system", "content": "Answer in JSON"}


def test_name_is_set_on_the_answers_and_prompt_goes_first() -> None:
    model = ScriptedChatModel([{"content": "hi"}])
    out = create_react_agent(model, [], prompt="Be brief", name="helper").invoke(
        QUESTION
    )

    assert out["messages"][-1].name == "helper"
    assert model.requests[0]["messages"][0] == {"role": "system", "content": "Be brief"}


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="Invalid version"):
        create_react_agent(MODEL, [add], version="v3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="remaining_steps"):
        create_react_agent(MODEL, [add], state_schema=dict)
    with pytest.raises(TypeError, match="unexpected keyword"):
        create_react_agent(MODEL, [add], bogus=1)
    assert create_tool_calling_executor is create_react_agent
    assert set(AgentState.__annotations__) == {"messages", "remaining_steps"}


def test_unanswered_tool_calls_in_history_are_refused() -> None:
    history = {
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c9", "name": "add", "args": {}}],
            },
        ]
    }
    with pytest.raises(ValueError, match="INVALID_CHAT_HISTORY"):
        create_react_agent(MODEL, [add]).invoke(history)


class Pick(BaseModel):
    a: int


def test_validation_node_answers_valid_and_invalid_calls() -> None:
    with pytest.warns(LangGraphDeprecatedSinceV10):
        node = ValidationNode([Pick])
    ai = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "1", "name": "Pick", "args": {"a": 3}},
            {"id": "2", "name": "Pick", "args": {"a": "x"}},
        ],
    }

    good, bad = node.invoke([ai])

    assert good["content"] == '{"a":3}' and "additional_kwargs" not in good
    assert bad["additional_kwargs"] == {"is_error": True}
    assert bad["content"].endswith("Respond after fixing all validation errors.")
    with pytest.raises(ValueError, match="Last message is not an AIMessage"):
        node.invoke({"messages": [{"role": "user", "content": "x"}]})

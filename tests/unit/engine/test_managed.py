"""Managed values (``engine.managed``): ``RemainingSteps`` and ``IsLastStep``.

Expected values were learned by running the same graphs on LangGraph 1.2: a
node reading ``RemainingSteps`` under ``recursion_limit=5`` sees 4, 3, 2, 1 and
``IsLastStep`` is True only with 1 left. Managed keys are computed for each
task: never stored in a checkpoint, never in the output, writes to them ignored.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pydantic

from engine.checkpoint.memory import InMemorySaver
from engine.graph import END, START, StateGraph
from engine.managed import IsLastStep, RemainingSteps
from engine.managed.base import ManagedScope, ManagedValue, is_managed_value
from engine.managed.is_last_step import IsLastStepManager, RemainingStepsManager


class Loop(TypedDict):
    seen: Annotated[list[Any], operator.add]
    remaining: RemainingSteps
    last: IsLastStep


def looping(max_rounds: int = 100) -> Any:
    def look(state: Loop) -> dict[str, Any]:
        return {"seen": [(state["remaining"], state["last"])], "remaining": 99}

    def again(state: Loop) -> str:
        if state["seen"][-1][1] or len(state["seen"]) >= max_rounds:
            return END
        return "look"

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Loop)
    builder.add_node("look", look)
    builder.add_edge(START, "look")
    builder.add_conditional_edges("look", again)
    return builder


def test_remaining_steps_counts_down_to_the_recursion_limit() -> None:
    result = looping().compile().invoke({"seen": []}, {"recursion_limit": 5})

    assert result == {"seen": [(4, False), (3, False), (2, False), (1, True)]}


def test_with_the_default_limit_the_first_node_has_10006_steps_left() -> None:
    result = looping(max_rounds=2).compile().invoke({"seen": []})

    assert result["seen"] == [(10006, False), (10005, False)]


def test_managed_keys_are_not_stored_and_each_run_counts_from_its_start() -> None:
    graph = looping().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}, "recursion_limit": 4}

    assert graph.invoke({"seen": []}, config)["seen"] == [
        (3, False),
        (2, False),
        (1, True),
    ]
    second = graph.invoke({"seen": []}, config)["seen"]

    assert second[3:] == [(3, False), (2, False), (1, True)]
    assert set(graph.get_state(config).values) == {"seen"}
    for snapshot in graph.get_state_history(config):
        assert "remaining" not in snapshot.values
        assert "last" not in snapshot.values


def test_a_pydantic_state_reads_remaining_steps_as_a_field() -> None:
    class State(pydantic.BaseModel):
        seen: Annotated[list[int], operator.add] = []
        remaining_steps: RemainingSteps = 25

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("look", lambda s: {"seen": [s.remaining_steps]})
    builder.add_edge(START, "look")

    assert builder.compile().invoke({"seen": []}, {"recursion_limit": 7}) == {
        "seen": [6]
    }


class Agent(TypedDict):
    turns: int
    is_last_step: IsLastStep


def test_a_path_function_sees_the_managed_values_of_its_node() -> None:
    # LangGraph 1.2: the route after the last allowed step sees is_last_step=True
    seen: list[Any] = []

    def route(state: Agent) -> str:
        seen.append(dict(state))
        return END if state["is_last_step"] else "think"

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Agent)
    builder.add_node("think", lambda s: {"turns": s["turns"] + 1})
    builder.add_edge(START, "think")
    builder.add_conditional_edges("think", route)

    assert builder.compile().invoke({"turns": 0}, {"recursion_limit": 3}) == {
        "turns": 2
    }
    assert seen == [
        {"turns": 1, "is_last_step": False},
        {"turns": 2, "is_last_step": True},
    ]


class StepNumber(ManagedValue[int]):
    @staticmethod
    def get(scratchpad: ManagedScope) -> int:
        return scratchpad.step


class Numbered(TypedDict):
    steps: Annotated[list[int], operator.add]
    step: Annotated[int, StepNumber]


def test_a_custom_managed_value_gets_the_step() -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Numbered)
    builder.add_node("a", lambda s: {"steps": [s["step"]]})
    builder.add_node("b", lambda s: {"steps": [s["step"]]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")

    assert builder.compile().invoke({"steps": []}) == {"steps": [1, 2]}


def test_the_managers_are_managed_values() -> None:
    assert is_managed_value(IsLastStepManager)
    assert is_managed_value(RemainingStepsManager)
    assert not is_managed_value(int)
    assert RemainingStepsManager.get(ManagedScope(step=3, stop=10)) == 7
    assert IsLastStepManager.get(ManagedScope(step=9, stop=10)) is True

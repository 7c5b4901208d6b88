"""Managed values (``RemainingSteps``, ``IsLastStep``) are never input: no form field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, TypedDict

from pydantic import BaseModel

from engine.graph.message import add_messages
from engine.managed import IsLastStep, RemainingSteps
from studio.input_fields import input_fields


class Agent(TypedDict):
    messages: Annotated[list[Any], add_messages]
    remaining_steps: NotRequired[RemainingSteps]


class Counter(TypedDict):
    count: int
    is_last_step: IsLastStep


class AgentModel(BaseModel):
    messages: list[Any]
    remaining_steps: RemainingSteps = 25


@dataclass
class Loop:
    topic: str
    remaining_steps: RemainingSteps = 25


def keys(schema: Any, kind: str) -> list[str]:
    return [f.key for f in input_fields(schema, kind)]


def test_a_typeddict_agent_state_is_one_message_box() -> None:
    fields = input_fields(Agent, "typeddict")

    assert [(f.key, f.widget) for f in fields] == [("messages", "message")]


def test_managed_values_are_skipped_in_every_schema_kind() -> None:
    assert keys(Counter, "typeddict") == ["count"]
    assert keys(AgentModel, "pydantic") == ["messages"]
    assert keys(Loop, "dataclass") == ["topic"]

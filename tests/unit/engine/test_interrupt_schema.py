"""``interrupt(response_schema=...)`` and the details of ``Interrupt``, ``Overwrite``,
``ensure_valid_checkpointer`` and ``is_invalid_resume``.

As LangGraph 1.2 behaves (checked on 1.2.24): a JSON Schema ``dict`` is shown
on the interrupt as given and answers are not checked; a pydantic model,
dataclass or ``TypedDict`` is shown as its JSON Schema and the answer comes back
validated, as that type. An answer that does not fit raises pydantic's
``ValidationError`` from the resuming call, marked for ``is_invalid_resume``,
and is not kept: the interrupt stays pending and can be answered again.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel, ValidationError

from engine.channels.binop import BinaryOperatorAggregate
from engine.checkpoint.base import BaseCheckpointSaver
from engine.checkpoint.memory import InMemorySaver
from engine.checkpoint.sqlite import SqliteSaver
from engine.errors import is_invalid_resume
from engine.func import entrypoint
from engine.graph import START, StateGraph
from engine.types import (
    Command,
    Interrupt,
    Overwrite,
    ensure_valid_checkpointer,
    interrupt,
)
from engine.warnings import LangGraphDeprecatedSinceV10
from tests._support.graphs import thread


class Decision(BaseModel):
    approve: bool
    note: str = ""


@dataclass
class Amount:
    cents: int


class Reason(TypedDict):
    text: str


class Answers(TypedDict, total=False):
    first: Any
    second: Any


def two_questions(first_schema: Any, second_schema: Any) -> Any:
    """One node asking two questions, each with its schema."""

    def ask(state: Answers) -> Answers:
        first = interrupt("first?", response_schema=first_schema)
        second = interrupt("second?", response_schema=second_schema)
        return {"first": first, "second": second}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Answers)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver]:
    if request.param == "memory":
        yield InMemorySaver()
        return
    with SqliteSaver.from_conn_string(":memory:") as sqlite_saver:
        yield sqlite_saver


# -- interrupt(response_schema=...) ------------------------------------------------------


def test_a_model_schema_is_shown_as_json_schema_and_its_answer_validated(
    saver: BaseCheckpointSaver,
) -> None:
    graph = two_questions(Decision, {"type": "string"}).compile(checkpointer=saver)
    config = thread("typed")

    (pending,) = graph.invoke({}, config)["__interrupt__"]
    assert pending.response_schema == Decision.model_json_schema()
    (second,) = graph.invoke(Command(resume={"approve": True}), config)["__interrupt__"]
    assert second.response_schema == {"type": "string"}  # a dict is shown as given
    result = graph.invoke(Command(resume=123), config)  # ...and not checked

    assert result == {"first": Decision(approve=True), "second": 123}


def test_an_answer_that_does_not_fit_is_refused_and_can_be_given_again(
    saver: BaseCheckpointSaver,
) -> None:
    graph = two_questions(Decision, None).compile(checkpointer=saver)
    config = thread("refused")
    graph.invoke({}, config)
    before = graph.get_state(config)

    with pytest.raises(ValidationError) as info:
        graph.invoke(Command(resume={"approve": "not a bool"}), config)

    assert is_invalid_resume(info.value)
    after = graph.get_state(config)
    assert after.interrupts == before.interrupts
    assert after.config == before.config
    (second,) = graph.invoke(Command(resume={"approve": False}), config)[
        "__interrupt__"
    ]
    assert second.value == "second?"
    assert graph.invoke(Command(resume="n/a"), config) == {
        "first": Decision(approve=False),
        "second": "n/a",
    }


def test_a_refused_answer_given_by_interrupt_id_is_forgotten_too() -> None:
    graph = two_questions(Amount, None).compile(checkpointer=InMemorySaver())
    config = thread("by-id")
    (pending,) = graph.invoke({}, config)["__interrupt__"]

    with pytest.raises(ValidationError):
        graph.invoke(Command(resume={pending.id: {"cents": "many"}}), config)
    (second,) = graph.invoke(Command(resume={pending.id: {"cents": "12"}}), config)[
        "__interrupt__"
    ]

    assert second.value == "second?"
    assert graph.invoke(Command(resume="ok"), config)["first"] == Amount(cents=12)


def test_dataclass_and_typeddict_schemas_validate_their_answers() -> None:
    graph = two_questions(Amount, Reason).compile(checkpointer=InMemorySaver())
    config = thread("shapes")
    (first,) = graph.invoke({}, config)["__interrupt__"]
    assert first.response_schema["properties"] == {
        "cents": {"title": "Cents", "type": "integer"}
    }

    (second,) = graph.invoke(Command(resume={"cents": "5"}), config)["__interrupt__"]
    assert second.response_schema["required"] == ["text"]
    with pytest.raises(ValidationError):
        graph.invoke(Command(resume={"words": "no text"}), config)
    result = graph.invoke(Command(resume={"text": "fine"}), config)

    assert result == {"first": Amount(cents=5), "second": {"text": "fine"}}


def test_an_entrypoint_interrupt_takes_a_schema_too() -> None:
    @entrypoint(checkpointer=InMemorySaver())
    def review(amount: int) -> Decision:
        decision: Decision = interrupt({"amount": amount}, response_schema=Decision)
        return decision

    config = thread("functional")
    (pending,) = review.invoke(10, config)["__interrupt__"]

    assert pending.response_schema["title"] == "Decision"
    assert review.invoke(Command(resume={"approve": True}), config) == Decision(
        approve=True
    )


def test_other_errors_are_not_invalid_resumes() -> None:
    assert not is_invalid_resume(ValueError("x"))
    try:
        Decision.model_validate({"approve": "no way"})
    except ValidationError as exc:
        assert not is_invalid_resume(exc)  # only interrupt() marks its refusals


# -- Interrupt ------------------------------------------------------------------------------


def test_an_interrupt_made_by_hand_has_a_placeholder_id() -> None:
    made = Interrupt("question")

    assert made.id == "placeholder-id"
    assert made.response_schema is None
    assert (
        repr(made)
        == "Interrupt(value='question', id='placeholder-id', response_schema=None)"
    )


def test_an_old_style_interrupt_namespace_gives_its_id() -> None:
    legacy = Interrupt("q", ns=["ask:1", "inner:2"], when="during", resumable=True)

    assert legacy.id == Interrupt.from_ns("q", "ask:1|inner:2").id
    assert Interrupt("q", "mine", ns=["ask:1"]).id == "mine"  # an explicit id wins
    with pytest.raises(TypeError, match="unexpected"):
        Interrupt("q", colour="red")


def test_from_ns_takes_a_response_schema() -> None:
    made = Interrupt.from_ns("q", "ask:1", response_schema={"type": "boolean"})

    assert made.response_schema == {"type": "boolean"}
    assert made.id == Interrupt.from_ns("q", "ask:1").id


def test_interrupts_differ_by_their_schema() -> None:
    assert Interrupt("v", "i") == Interrupt("v", "i")
    assert Interrupt("v", "i", response_schema={}) != Interrupt("v", "i")


def test_interrupt_id_is_a_deprecated_spelling_of_id() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = Interrupt("q", "abc").interrupt_id

    assert value == "abc"
    assert [w.category for w in caught] == [LangGraphDeprecatedSinceV10]


# -- Overwrite ------------------------------------------------------------------------------


def test_overwrite_carries_its_type_tag() -> None:
    made = Overwrite([1])

    assert made.type == "__overwrite__"
    assert made == Overwrite(value=[1], type="__overwrite__")


@pytest.mark.parametrize(
    "write",
    [
        Overwrite(["b"]),
        {"__overwrite__": ["b"]},
        {"value": ["b"], "type": "__overwrite__"},  # an Overwrite gone through JSON
    ],
)
def test_every_form_of_overwrite_replaces_a_reducers_value(write: Any) -> None:
    channel: BinaryOperatorAggregate[Any] = BinaryOperatorAggregate(
        list, lambda a, b: a + b
    )
    channel.update([["a"]])

    channel.update([write])

    assert channel.get() == ["b"]


def test_a_dict_that_only_looks_a_bit_like_an_overwrite_is_reduced() -> None:
    channel: BinaryOperatorAggregate[Any] = BinaryOperatorAggregate(
        list, lambda a, b: [*a, b]
    )
    channel.update([{"value": 1, "type": "note"}])

    assert channel.get() == [{"value": 1, "type": "note"}]


# -- ensure_valid_checkpointer -------------------------------------------------------------


def test_ensure_valid_checkpointer_passes_savers_and_flags_through() -> None:
    saver = InMemorySaver()

    for value in (None, True, False, saver):
        assert ensure_valid_checkpointer(value) is value


@pytest.mark.parametrize(
    ("value", "named"),
    [("memory", "a str"), (InMemorySaver, "the class InMemorySaver")],
)
def test_anything_else_is_refused_at_compile_and_by_entrypoint(
    value: Any, named: str
) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Answers)
    builder.add_node("n", lambda state: {})
    builder.add_edge(START, "n")

    with pytest.raises(TypeError, match=named):
        ensure_valid_checkpointer(value)
    with pytest.raises(TypeError, match="Invalid checkpointer"):
        builder.compile(checkpointer=value)
    with pytest.raises(TypeError, match="Invalid checkpointer"):
        entrypoint(checkpointer=value)

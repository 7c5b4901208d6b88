"""The fork-with-edits form (studio.presentation.fork_edits): fields and checking. Pure."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, model_validator

from engine.graph.message import add_messages
from studio.presentation.fork_edits import bind_fork, fork_fields


class State(TypedDict, total=False):
    title: str
    count: int
    ratio: float
    ok: bool
    mode: Literal["fast", "slow"]
    meta: dict[str, int]
    note: str | None
    log: Annotated[list[str], operator.add]
    messages: Annotated[list[Any], add_messages]


KINDS = {"log": "append", "messages": "messages"}
VALUES = {
    "title": "t",
    "count": 2,
    "ratio": 0.5,
    "ok": True,
    "mode": "fast",
    "meta": {"a": 1},
    "log": ["x"],
}
KEYS = tuple(State.__annotations__)


def fields() -> Any:
    return fork_fields(State, "typeddict", KEYS, KINDS, VALUES)


def bind(posted: dict[str, str], values: dict[str, Any] = VALUES, **kw: Any) -> Any:
    blank = fork_fields(
        kw.get("schema", State),
        kw.get("kind", "typeddict"),
        tuple(kw.get("keys", KEYS)),
        KINDS,
        values,
    )
    return bind_fork(
        blank,
        posted,
        schema=kw.get("schema", State),
        schema_kind=kw.get("kind", "typeddict"),
        values=values,
        reducers=kw.get("reducers", {"log": operator.add}),
    )


def errors_of(bound: Any) -> dict[str, tuple[str, ...]]:
    return {f.key: f.errors for f in bound.fields if f.errors}


def test_fork_fields_pick_widgets_from_the_schema_and_prefill_values() -> None:
    by_key = {f.key: f for f in fields()}

    assert (by_key["title"].widget, by_key["title"].value) == ("text", "t")
    assert (by_key["count"].widget, by_key["count"].value, by_key["count"].step) == (
        "number",
        "2",
        "1",
    )
    assert (by_key["ratio"].widget, by_key["ratio"].step) == ("number", "any")
    assert (by_key["ok"].widget, by_key["ok"].value) == ("choice", "true")
    assert ("", "— not set —") in by_key["ok"].choices
    assert (by_key["mode"].widget, by_key["mode"].value) == ("choice", "fast")
    assert (by_key["meta"].widget, by_key["meta"].value) == ("json", '{\n  "a": 1\n}')
    assert (by_key["note"].widget, by_key["note"].value) == ("text", "")


def test_fork_fields_of_reducer_keys_start_empty_and_say_what_they_do() -> None:
    by_key = {f.key: f for f in fields()}

    assert (by_key["log"].widget, by_key["log"].value, by_key["log"].kind) == (
        "json",
        "",
        "append",
    )
    assert "append" in by_key["log"].help
    assert by_key["messages"].kind == "messages"
    assert "replace by id" in by_key["messages"].help


def test_bind_fork_keeps_only_the_changed_fields() -> None:
    posted = {f.name: f.value for f in fields()} | {
        "state.count": "3",
        "state.log": '["y"]',
    }

    bound = bind(posted)

    assert bound.is_valid
    assert bound.update == {"count": 3, "log": ["y"]}


def test_bind_fork_missing_fields_keep_their_values() -> None:
    bound = bind({"state.title": "new"})

    assert bound.update == {"title": "new"}


def test_bind_fork_unchanged_form_is_refused() -> None:
    bound = bind({f.name: f.value for f in fields()})

    assert not bound.is_valid
    assert bound.errors == ("Nothing to change: edit at least one field.",)


def test_bind_fork_parses_each_widget_strictly() -> None:
    bound = bind(
        {
            "state.ratio": "0.75",
            "state.ok": "false",
            "state.mode": "slow",
            "state.meta": '{"a": 2, "b": 3}',
            "state.note": "hi",
        }
    )

    assert bound.update == {
        "ratio": 0.75,
        "ok": False,
        "mode": "slow",
        "meta": {"a": 2, "b": 3},
        "note": "hi",
    }


def test_bind_fork_reports_errors_by_field() -> None:
    bound = bind(
        {
            "state.count": "x",
            "state.ratio": "fast",
            "state.mode": "warp",
            "state.meta": '{"a": "1"}',
            "state.log": '"one"',
            "state.messages": "[oops",
        }
    )

    found = errors_of(bound)
    assert found["count"] == ("Enter a whole number.",)
    assert found["ratio"] == ("Enter a number.",)
    assert found["mode"][0].startswith("Choose one of: fast, slow")
    assert (
        "a: Input should be a valid integer" in found["meta"][0]
    )  # strict: "1" is not 1
    assert "Input should be a valid array" in found["log"][0]
    assert found["messages"][0].startswith("Not valid JSON")
    assert bound.update.keys() <= {"title"}
    assert not bound.is_valid


def test_bind_fork_clearing_a_required_number_or_json_is_an_error() -> None:
    found = errors_of(bind({"state.count": "", "state.meta": ""}))

    assert found["count"] == ("Enter a number (the field cannot be emptied).",)
    assert found["meta"] == ("Enter a JSON value (null to clear it).",)


def test_bind_fork_choice_left_unset_changes_nothing() -> None:
    assert bind({"state.ok": "", "state.title": "x"}).update == {"title": "x"}


def test_bind_fork_refuses_unknown_fields() -> None:
    bound = bind({"state.title": "x", "state.nope": "1", "evil": "2"})

    assert bound.errors == ("Unknown field 'state.nope'.", "Unknown field 'evil'.")


def test_bind_fork_crlf_from_textareas_is_normalized() -> None:
    assert bind({"state.title": "a\r\nb"}).update == {"title": "a\nb"}


class Ledger(BaseModel):
    balance: int = 0
    limit: int = 100

    @model_validator(mode="after")
    def _within(self) -> Ledger:
        if self.balance > self.limit:
            raise ValueError("balance over the limit")
        return self


def test_bind_fork_validates_a_pydantic_state_as_a_whole() -> None:
    values = {"balance": 5, "limit": 100}
    kw = {
        "schema": Ledger,
        "kind": "pydantic",
        "keys": ("balance", "limit"),
        "reducers": {},
    }

    over = bind({"state.balance": "500"}, values, **kw)
    fine = bind({"state.balance": "50"}, values, **kw)

    assert not over.is_valid
    assert over.errors == ("Value error, balance over the limit",)
    assert fine.update == {"balance": 50}


def test_bind_fork_reports_a_refusing_reducer_on_its_field() -> None:
    def picky(current: Any, update: Any) -> Any:
        raise ValueError("no thanks")

    values = {"balance": 5, "limit": 100}
    bound = bind(
        {"state.balance": "6"},
        values,
        schema=Ledger,
        kind="pydantic",
        keys=("balance", "limit"),
        reducers={"balance": picky},
    )

    assert errors_of(bound) == {"balance": ("The reducer refused it: no thanks",)}

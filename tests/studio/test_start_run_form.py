"""Starting a run from the browser: the generated form, strict validation, the queue."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Required, TypedDict

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pydantic import BaseModel, ConfigDict, Field

from engine.graph import MessagesState
from studio.demo_graphs.purchase import PurchaseInput
from studio.forms import RunInputForm, StrictForm
from studio.input_fields import (
    MINOR_DIGITS,
    MONEY_MINOR,
    UNIT,
    InputField,
    input_fields,
)
from studio.models import Run, Thread
from tests._support.studio import serve_graphs
from tests.studio import ui_graphs_for_tests as ui

GRAPHS = {
    "purchase": "studio.demo_graphs.purchase:build",
    "tool_agent": "studio.demo_graphs.tool_agent:build",
    "order": "tests.studio.ui_graphs_for_tests:pydantic_input",
    "typed": "tests.studio.ui_graphs_for_tests:typed_input",
    "trip": "tests.studio.ui_graphs_for_tests:dataclass_input",
    "broken": "tests.studio.ui_graphs_for_tests:broken",
}


def by_key(fields: tuple[InputField, ...]) -> dict[str, InputField]:
    return {f.key: f for f in fields}


def form_for(schema: Any, kind: str) -> RunInputForm:
    return RunInputForm(input_fields(schema, kind), schema)


# -- schema -> fields (pure) -----------------------------------------------------


def test_typeddict_fields_pick_widgets_by_type() -> None:
    fields = by_key(input_fields(ui.Typed, "typeddict"))

    assert fields["title"].widget == "text"
    assert fields["title"].required
    assert fields["level"].widget == "choice"
    assert [text for text, _ in fields["level"].choices] == ["1", "2", "3"]
    assert fields["urgent"].widget == "checkbox"
    assert not fields["note"].required  # NotRequired, even under `from __future__`
    assert fields["flagged"].widget == "choice"  # an optional bool: true/false/unset
    assert fields["limit"].widget == "number"
    assert fields["limit"].nullable
    assert fields["extra"].widget == "json"


def test_pydantic_fields_keep_defaults_and_constraints() -> None:
    fields = by_key(input_fields(ui.Order, "pydantic"))

    assert fields["name"].required
    assert fields["count"].widget == "number"
    assert fields["count"].step == "1"
    assert fields["count"].constraints  # Field(ge=1)
    assert fields["ratio"].step == "any"
    assert not fields["ratio"].required
    assert fields["mode"].initial == "fast"
    assert fields["color"].widget == "choice"
    assert fields["color"].initial == "red"
    assert fields["express"].widget == "checkbox"
    assert fields["tags"].widget == "json"


def test_dataclass_fields_are_required_without_a_default() -> None:
    fields = by_key(input_fields(ui.Trip, "dataclass"))

    assert fields["city"].required
    assert not fields["days"].required
    assert fields["days"].initial == "3"
    assert fields["stops"].widget == "json"


def test_a_messages_only_schema_is_one_message_box() -> None:
    (field,) = input_fields(MessagesState, "typeddict")

    assert field.key == "messages"
    assert field.widget == "message"


def test_an_untyped_schema_has_no_fields() -> None:
    assert input_fields(dict, "dict") == ()


# -- binding (pure) --------------------------------------------------------------


def test_bind_reads_form_strings_strictly() -> None:
    form = form_for(ui.Typed, "typeddict").bind(
        {
            "input.title": "Ship it",
            "input.level": "2",
            "input.limit": "40",
            "input.extra": '{"a": [1]}',
            "input.flagged": "false",
        }
    )

    assert form.input == {
        "title": "Ship it",
        "level": 2,
        "urgent": False,  # an unchecked box is false
        "flagged": False,
        "limit": 40,
        "extra": {"a": [1]},
    }


def test_bind_refuses_non_numbers_and_unknown_choices() -> None:
    form = form_for(ui.Typed, "typeddict").bind(
        {"input.title": "x", "input.level": "7", "input.limit": "abc"}
    )

    assert form.input is None
    errors = {row.field.key: row.errors for row in form.rows}
    assert errors["level"] == ("Input should be '1', '2' or '3'",)
    assert errors["limit"] == (
        "Input should be a valid integer, unable to parse string as an integer",
    )
    assert errors["title"] == ()


def test_bind_reports_missing_required_fields_and_unknown_ones() -> None:
    form = form_for(ui.Typed, "typeddict").bind({"input.bogus": "1", "requester": "x"})

    assert form.input is None
    errors = {row.field.key: row.errors for row in form.rows}
    assert errors["title"] == ("This field is required.",)
    assert form.form_errors == (
        "Unknown field 'input.bogus'.",
        "Unknown field 'requester'.",
    )


def test_bind_sends_null_for_an_empty_nullable_required_field() -> None:
    class Maybe(StrictForm):
        limit: int | None

    form = form_for(Maybe, "pydantic").bind({"input.limit": ""})

    assert form.input == {"limit": None}


def test_bind_checks_nested_json_against_the_type() -> None:
    form = form_for(ui.Order, "pydantic").bind(
        {"input.name": "n", "input.count": "1", "input.tags": "[1, 2]"}
    )

    errors = {row.field.key: row.errors for row in form.rows}
    assert errors["tags"] == (
        "0: Input should be a valid string",
        "1: Input should be a valid string",
    )


def test_bind_runs_a_pydantic_schemas_own_validators() -> None:
    form = form_for(ui.Order, "pydantic").bind(
        {"input.name": "n", "input.count": "11", "input.express": "true"}
    )

    assert form.input is None
    assert form.form_errors == ("express orders hold at most 10 items",)


def test_bind_maps_choices_back_to_their_values() -> None:
    form = form_for(ui.Order, "pydantic").bind(
        {
            "input.name": "n",
            "input.count": "2",
            "input.color": "blue",
            "input.mode": "slow",
        }
    )

    assert form.input == {
        "name": "n",
        "count": 2,
        "color": "blue",
        "mode": "slow",
        "express": False,
    }


def test_bind_raw_json_must_be_an_object_with_known_keys() -> None:
    form = form_for(ui.Typed, "typeddict")

    assert form.bind({"input": "[1]"}).raw_errors == (
        "The input must be a JSON object: {...}.",
    )
    assert form.bind({"input": "{"}).raw_errors[0].startswith("Not valid JSON")
    assert form.bind({"input": '{"nope": 1}'}).raw_errors == (
        "Unknown key 'nope'; the input schema has: title, level, urgent, note, "
        "flagged, limit, extra.",
    )
    assert form.bind({"input": '{"title": "t"}'}).raw_errors == (
        "level: Field required",
        "urgent: Field required",
    )
    assert form.bind(
        {"input": '{"title": 5, "level": 1, "urgent": true}'}
    ).raw_errors == ("title: Input should be a valid string",)
    whole = '{"title": "t", "level": 1, "urgent": false}'
    assert form.bind({"input": whole}).input == {
        "title": "t",
        "level": 1,
        "urgent": False,
    }


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        # before: RecursionError and IntegrityError, each a 500
        ("[" * 10_000 + "]" * 10_000, "nested more than 64 levels deep"),
        ('{"title": "t", "level": NaN, "urgent": true}', "NaN is not a JSON number"),
        ('{"title": "t", "level": Infinity, "urgent": true}', "Infinity is not a"),
        # a float beyond a double is infinity to Python: stored, it failed the same way
        ('{"title": "t", "level": 1e400, "urgent": true}', "too large for a JSON"),
        ('{"title": "t", "title": "u"}', "appears more than once"),
    ],
)
def test_bind_raw_json_refuses_what_cannot_be_stored(raw: str, error: str) -> None:
    bound = form_for(ui.Typed, "typeddict").bind({"input": raw})

    assert bound.input is None
    assert error in bound.raw_errors[0]


def test_deeply_nested_raw_json_is_a_form_error_and_queues_nothing(
    signed_in: Client,
) -> None:
    response = signed_in.post(
        "/graphs/purchase/runs/",
        {"input": '{"vendor": ' + "[" * 10_000 + "]" * 10_000 + "}"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 422
    assert "nested more than 64 levels deep" in response.content.decode()
    assert Run.objects.count() == 0


def test_bind_message_becomes_a_user_message() -> None:
    form = form_for(MessagesState, "typeddict").bind({"input.messages": "Hello?"})

    assert form.input == {"messages": [{"role": "user", "content": "Hello?"}]}


# -- the endpoint ----------------------------------------------------------------


_graphs = serve_graphs(GRAPHS)


PURCHASE = {
    "input.request_id": "R-1",
    "input.approval_version": "1",
    "input.amount_minor": "1200.00",  # CNY: the schema says fen, the form takes yuan
    "input.vendor": "Acme",
}


def test_graph_page_renders_the_generated_form(signed_in: Client) -> None:
    html = signed_in.get("/graphs/purchase/").content.decode()

    assert (
        '<form class="run-form__fields" method="post" action="/graphs/purchase/runs/"'
        in html
    )
    assert (
        'hx-post="/graphs/purchase/runs/" hx-target="#run-form" hx-swap="outerHTML"'
        in html
    )
    assert (
        '<input type="text" inputmode="decimal" id="input-amount_minor" '
        'name="input.amount_minor" value="" autocomplete="off" placeholder="480.50" '
        'required aria-describedby="input-amount_minor-hint">' in html
    )
    assert '<span class="money-input__currency" aria-hidden="true">CNY</span>' in html
    assert '<textarea id="input-items" name="input.items"' in html
    assert '<textarea id="run-input-json" name="input"' in html
    assert html.count('name="csrfmiddlewaretoken"') >= 2


def test_tool_agent_gets_a_single_message_box(signed_in: Client) -> None:
    html = signed_in.get("/graphs/tool_agent/").content.decode()

    assert (
        '<textarea id="input-messages" name="input.messages" rows="3" required' in html
    )
    assert "Message" in html


def test_valid_post_queues_one_run_for_the_user_and_redirects(
    signed_in: Client, ada: User
) -> None:
    response = signed_in.post("/graphs/purchase/runs/", PURCHASE)

    run = Run.objects.get()
    assert response.status_code == 303
    assert response.headers["Location"] == f"/threads/{run.thread_id}/"
    assert run.graph == "purchase"
    assert run.created_by == ada
    assert run.thread.owner == ada
    assert run.status == Run.Status.PENDING
    assert run.input == {
        "request_id": "R-1",
        "approval_version": 1,
        "amount_minor": 120000,
        "vendor": "Acme",
    }


def test_htmx_post_redirects_with_hx_redirect(signed_in: Client) -> None:
    response = signed_in.post(
        "/graphs/purchase/runs/", PURCHASE, HTTP_HX_REQUEST="true"
    )

    run = Run.objects.get()
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == f"/threads/{run.thread_id}/"


def test_message_box_queues_a_messages_input(signed_in: Client) -> None:
    signed_in.post("/graphs/tool_agent/runs/", {"input.messages": "What is A-1001?"})

    assert Run.objects.get().input == {
        "messages": [{"role": "user", "content": "What is A-1001?"}]
    }


def test_raw_json_post_queues_that_input(signed_in: Client) -> None:
    payload = {"request_id": "R-2", "approval_version": 1, "amount_minor": 5}

    response = signed_in.post("/graphs/purchase/runs/", {"input": json.dumps(payload)})

    assert response.status_code == 303
    assert Run.objects.get().input == payload


def test_invalid_post_is_422_with_the_page_and_errors_and_queues_nothing(
    signed_in: Client,
) -> None:
    response = signed_in.post(
        "/graphs/purchase/runs/", {**PURCHASE, "input.amount_minor": "abc"}
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert "<html" in html  # without JS: the whole page, the form filled in
    assert '<figure id="graph-svg"' in html
    assert 'value="abc"' in html
    assert re.search(
        r'id="input-amount_minor" name="input.amount_minor" value="abc" '
        r'autocomplete="off" placeholder="480.50" required '
        r'aria-describedby="input-amount_minor-hint input-amount_minor-errors" '
        r'aria-invalid="true">',
        html,
    )
    assert (
        '<div class="field__errors" id="input-amount_minor-errors"><p>Enter an amount '
        "in CNY, like 480.50.</p></div>"
    ) in html
    assert Run.objects.count() == 0
    assert Thread.objects.count() == 0


def test_invalid_htmx_post_is_the_form_partial(signed_in: Client) -> None:
    response = signed_in.post(
        "/graphs/purchase/runs/",
        {**PURCHASE, "input.items": '[{"sku": 1'},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 422
    html = response.content.decode().strip()
    assert html.startswith('<div id="run-form" class="run-form">')
    assert "<html" not in html
    assert "Invalid JSON" in html
    assert "HX-Retarget" not in response.headers  # swapped into the form, not #flash
    assert Run.objects.count() == 0


def test_invalid_raw_json_opens_the_json_box_with_its_error(signed_in: Client) -> None:
    response = signed_in.post(
        "/graphs/purchase/runs/",
        {"input": '{"requester": "mallory"}'},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert '<details class="raw-json" open>' in html
    assert "Unknown key &#x27;requester&#x27;" in html
    assert "{&quot;requester&quot;: &quot;mallory&quot;}</textarea>" in html
    assert Run.objects.count() == 0


def test_posted_values_are_echoed_as_text(signed_in: Client) -> None:
    response = signed_in.post(
        "/graphs/typed/runs/", {"input.title": '"><script>alert(1)</script>'}
    )

    html = response.content.decode()
    assert response.status_code == 422
    assert "<script>alert(1)" not in html
    assert 'value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in html


def test_start_run_needs_post(signed_in: Client) -> None:
    assert signed_in.get("/graphs/purchase/runs/").status_code == 405


def test_start_run_on_unknown_graph_is_404_and_queues_nothing(
    signed_in: Client,
) -> None:
    response = signed_in.post("/graphs/nope/runs/", {"input": "{}"})

    assert response.status_code == 404
    assert Run.objects.count() == 0


def test_start_run_on_broken_graph_is_503(signed_in: Client) -> None:
    assert signed_in.post("/graphs/broken/runs/", {"input": "{}"}).status_code == 503


def test_start_run_requires_the_csrf_token(ada: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)

    refused = client.post("/graphs/purchase/runs/", PURCHASE)
    client.get("/graphs/purchase/")
    token = client.cookies["csrftoken"].value
    accepted = client.post(
        "/graphs/purchase/runs/",
        PURCHASE,
        HTTP_X_CSRFTOKEN=token,
        HTTP_HX_REQUEST="true",
    )

    assert refused.status_code == 403
    assert accepted.status_code == 200
    assert Run.objects.count() == 1


class Opaque:
    """A type pydantic cannot check."""


class WithOpaque(TypedDict):
    thing: Opaque


def test_a_type_pydantic_cannot_check_is_any_json() -> None:
    (field,) = input_fields(WithOpaque, "typeddict")
    form = form_for(WithOpaque, "typeddict")

    assert field.widget == "json"
    assert form.bind({"input.thing": '{"any": ["json"]}'}).input == {
        "thing": {"any": ["json"]}
    }
    assert form.bind({"input.thing": "nope"}).input is None


# -- what the schema says about its fields (issue 14) -------------------------------


class Described(TypedDict, total=False):
    """Field metadata read from ``Annotated[..., Field(...)]`` in a TypedDict."""

    city: Required[Annotated[str, Field(description="Where to go.", examples=["Oslo"])]]
    price_minor: Annotated[
        int,
        Field(ge=0, examples=[1999], json_schema_extra={MONEY_MINOR: "EUR"}),
    ]
    yen_minor: Annotated[
        int, Field(json_schema_extra={MONEY_MINOR: "JPY", MINOR_DIGITS: 0})
    ]
    wait: Annotated[float, Field(json_schema_extra={UNIT: "seconds"})]


class Defaulted(BaseModel):
    model_config = ConfigDict(strict=True)

    budget_minor: int = Field(
        default=250_00, description="Per night.", json_schema_extra={MONEY_MINOR: "CNY"}
    )


def test_field_metadata_gives_descriptions_examples_units_and_money() -> None:
    fields = by_key(input_fields(Described, "typeddict"))

    assert fields["city"].required
    assert fields["city"].description == "Where to go."
    assert fields["city"].placeholder == "Oslo"
    price = fields["price_minor"]
    assert (price.widget, price.unit, price.minor_digits) == ("money", "EUR", 2)
    assert price.examples == ("19.99",)  # examples in fen-like minor units, shown major
    assert price.step == "0.01"
    assert fields["yen_minor"].minor_digits == 0
    assert fields["wait"].widget == "number" and fields["wait"].unit == "seconds"
    assert (
        by_key(input_fields(Defaulted, "pydantic"))["budget_minor"].initial == "250.00"
    )


def test_the_purchase_schema_marks_what_is_required_and_says_the_amount_is_cny() -> (
    None
):
    fields = by_key(input_fields(PurchaseInput, "typeddict"))

    required = [key for key, f in fields.items() if f.required]
    assert required == ["request_id", "approval_version", "amount_minor"]
    amount = fields["amount_minor"]
    assert (amount.widget, amount.unit, amount.examples) == (
        "money",
        "CNY",
        ("480.50",),
    )
    assert "fen" in amount.description
    assert fields["request_id"].examples == ("PO-1001",)
    assert fields["approval_version"].constraints  # Field(ge=1)


def test_money_is_typed_in_the_currency_and_sent_in_minor_units_exactly() -> None:
    form = form_for(Described, "typeddict")

    def amount(text: str) -> Any:
        bound = form.bind({"input.city": "Oslo", "input.price_minor": text})
        errors = {row.field.key: row.errors for row in bound.rows}["price_minor"]
        return bound.input["price_minor"] if bound.input else errors

    assert amount("19.99") == 1999
    assert amount(" 0.1 ") == 10  # Decimal, never a float: 0.1 is 10 cents
    assert amount("1200") == 120000
    assert amount("19.999") == ("Use at most 2 decimals, like 19.99.",)
    assert amount("1,200") == ("Enter an amount in EUR, like 19.99.",)
    assert amount("-1") == ("Input should be greater than or equal to 0",)
    yen = form.bind({"input.city": "x", "input.yen_minor": "5.5"})
    assert {r.field.key: r.errors for r in yen.rows}["yen_minor"] == (
        "Enter a whole amount in JPY.",
    )


def test_an_empty_purchase_form_is_refused_next_to_its_fields_and_queues_nothing(
    signed_in: Client,
) -> None:
    """Issue 14: an empty form used to queue a thread that failed with
    "request_id: Field required" (the input schema marked nothing required)."""
    response = signed_in.post("/graphs/purchase/runs/", {}, HTTP_HX_REQUEST="true")

    assert response.status_code == 422
    html = response.content.decode()
    for key in ("request_id", "approval_version", "amount_minor"):
        assert (
            f'<div class="field__errors" id="input-{key}-errors"><p>This field is '
            "required.</p></div>" in html
        )
    assert Run.objects.count() == 0
    assert Thread.objects.count() == 0


def test_raw_json_is_checked_against_the_input_schema_before_queueing(
    signed_in: Client,
) -> None:
    response = signed_in.post(
        "/graphs/purchase/runs/",
        {"input": '{"request_id": "", "amount_minor": "5"}'},
        HTTP_HX_REQUEST="true",
    )

    html = response.content.decode()
    assert response.status_code == 422
    assert "request_id: String should have at least 1 character" in html
    assert "approval_version: Field required" in html
    assert "amount_minor: Input should be a valid integer" in html  # "5" is not 5
    assert Run.objects.count() == 0


def test_the_form_shows_descriptions_examples_units_and_required_markers(
    signed_in: Client,
) -> None:
    html = signed_in.get("/graphs/purchase/").content.decode()

    assert re.search(
        r'<code>amount_minor</code>\s*<span class="field__unit">CNY</span>\s*'
        r'<span class="field__required">required</span>',
        html,
    )
    assert re.search(
        r'<code>vendor</code>\s*<span class="field__optional">optional</span>', html
    )
    assert (
        '<p class="field__hint" id="input-amount_minor-hint">The total to buy. Stored '
        "in fen (1 CNY = 100 fen)." in html
    )
    assert "e.g. <code>480.50</code>" in html
    assert 'placeholder="PO-1001"' in html
    assert "novalidate" in html  # the server's errors, next to the fields

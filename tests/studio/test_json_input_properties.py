"""Generated inputs (hypothesis) for the strict JSON parser and the API's request models.

Whatever text or bytes arrive, ``studio.json_input.loads`` answers valid data
that the database and the serializers can store, or a ``ValueError`` with a
message; and whatever that data is, each request model validates it or raises
pydantic's ``ValidationError`` (the API's 422), never another exception. The
examples cover what broke before: nesting thousands deep, ``NaN`` and friends,
numbers beyond a float, unicode and lone surrogates, repeated keys, and values
of the wrong type in every field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from studio import json_input
from studio.api import run_schemas, schemas
from studio.errors import InvalidInput
from studio.middleware import present_validation
from studio.reviews.decisions import DecisionForm

CASES = settings(max_examples=150, deadline=None)
TRIED = {"count": 0}
"""Inputs tried (printed at the end of the module with ``-s``)."""


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"\njson_input and request-model properties: {TRIED['count']} inputs")


NOT_JSON_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "2E+999"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # lone surrogates included
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
"""JSON data within the depth limit."""

odd_values = (
    json_values
    | st.sampled_from(["10", "true", "", " ", "null", "\ud800", "<script>", "*"])
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([10.0, 1e300, -0.0, 2.5, 2**63, -(2**63) - 1])
)
"""What a client may put in any field: the right type or not."""


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def _storable(value: Any) -> None:
    """What ``loads`` answers can be written as strict JSON, within the depth limit."""
    json.dumps(value, allow_nan=False)
    assert _depth(value) <= json_input.MAX_DEPTH


def _parse(text: str | bytes) -> Any:
    TRIED["count"] += 1
    try:
        value = json_input.loads(text)
    except ValueError as exc:
        assert str(exc)
        assert len(str(exc)) <= 200
        return None
    _storable(value)
    return value


# -- the parser ---------------------------------------------------------------------------


@CASES
@given(st.text())
@example('{"a": 1e400}')
@example("[" * 10_000 + "]" * 10_000)
@example('{"a": 1, "a": 2}')
@example('"\\ud800"')
def test_any_text_parses_to_storable_data_or_a_value_error(text: str) -> None:
    _parse(text)


@CASES
@given(st.binary())
@example(b"\xff\xfe{\x00}\x00")
@example(b'{"a": "\xc3"}')
def test_any_bytes_parse_to_storable_data_or_a_value_error(raw: bytes) -> None:
    _parse(raw)


@CASES
@given(json_values)
def test_json_data_round_trips(value: Any) -> None:
    TRIED["count"] += 1
    assert json_input.loads(json.dumps(value)) == value
    assert json_input.loads(json.dumps(value).encode()) == value


@CASES
@given(st.integers(min_value=1, max_value=20_000), st.sampled_from("[{"))
def test_nesting_is_refused_past_the_limit_only(depth: int, bracket: str) -> None:
    TRIED["count"] += 1
    inner = "[]" if bracket == "[" else "{}"
    opener, closer = ("[", "]") if bracket == "[" else ('{"k":', "}")
    text = opener * (depth - 1) + inner + closer * (depth - 1)
    if depth <= json_input.MAX_DEPTH:
        assert _depth(json_input.loads(text)) == depth
    else:
        with pytest.raises(ValueError, match="nested more than 64 levels"):
            json_input.loads(text)


@CASES
@given(st.integers(min_value=65, max_value=5_000))
def test_brackets_inside_strings_are_not_nesting(count: int) -> None:
    TRIED["count"] += 1
    text = json.dumps({"note": "[{" * count, "escaped": '\\"[' * count})
    assert json_input.loads(text)["note"] == "[{" * count


@CASES
@given(json_values, st.sampled_from(NOT_JSON_NUMBERS))
def test_a_number_json_cannot_hold_is_refused_wherever_it_is(
    value: Any, number: str
) -> None:
    TRIED["count"] += 1
    text = json.dumps({"wrapped": [value, "@"]}).replace('"@"', number)
    with pytest.raises(ValueError):
        json_input.loads(text)


@CASES
@given(st.text(max_size=5), json_values, json_values)
def test_a_key_given_twice_is_refused(key: str, first: Any, second: Any) -> None:
    TRIED["count"] += 1
    k, a, b = json.dumps(key), json.dumps(first), json.dumps(second)
    text = f"{{{k}: {a}, {k}: {b}}}"
    with pytest.raises(ValueError, match="appears more than once"):
        json_input.loads(text)


@CASES
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_survive(number: float) -> None:
    TRIED["count"] += 1
    parsed = json_input.loads(json.dumps(number))
    assert parsed == number and math.isfinite(parsed)


# -- the request models ------------------------------------------------------------------

BODIES: list[type[BaseModel]] = [
    schemas.AssistantSearch,
    schemas.AssistantCount,
    schemas.ThreadCreate,
    schemas.ThreadSearch,
    schemas.ThreadCount,
    schemas.ThreadPatch,
    schemas.StateAtCheckpoint,
    schemas.StateUpdate,
    schemas.HistoryRequest,
    run_schemas.RunCreate,
    DecisionForm,
]
QUERIES: list[type[BaseModel]] = [
    schemas.GraphQuery,
    schemas.SubgraphsQuery,
    schemas.StateQuery,
    run_schemas.RunListQuery,
    run_schemas.RunCancelQuery,
    run_schemas.RunJoinStreamQuery,
]


def _bodies(model: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Objects with the model's own field names (and a stranger) holding anything."""
    names = [*model.model_fields, "user", "reviewer", "__class__"]
    return st.dictionaries(st.sampled_from(names), odd_values, max_size=6) | odd_values


def _validate(model: type[BaseModel], data: Any, *, strings: bool = False) -> None:
    TRIED["count"] += 1
    try:
        if strings:
            parsed = model.model_validate_strings(data)
        else:
            parsed = model.model_validate(data)
    except ValidationError as exc:
        assert present_validation(exc)  # the 422's message renders
        return
    if isinstance(parsed, run_schemas.RunCreate):
        for thread_id in (None, "t"):
            try:
                parsed.to_spec(thread_id)
            except InvalidInput as exc:
                assert exc.message


@pytest.mark.parametrize("model", BODIES, ids=lambda m: m.__name__)
def test_request_bodies_validate_or_refuse_with_a_422(model: type[BaseModel]) -> None:
    @settings(max_examples=150, deadline=None)
    @given(_bodies(model))
    def check(data: Any) -> None:
        _validate(model, data)

    check()


@pytest.mark.parametrize("model", QUERIES, ids=lambda m: m.__name__)
def test_query_strings_validate_or_refuse_with_a_422(model: type[BaseModel]) -> None:
    names = [*model.model_fields, "x"]

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.dictionaries(st.sampled_from(names), st.text(max_size=12), max_size=4))
    def check(data: dict[str, str]) -> None:
        _validate(model, data, strings=True)

    check()


@pytest.mark.parametrize(
    ("model", "field", "value", "accepted"),
    [
        (schemas.ThreadSearch, "limit", 10.0, True),
        (schemas.ThreadSearch, "limit", "10", False),
        (schemas.ThreadSearch, "limit", True, False),
        (schemas.ThreadSearch, "limit", 10.5, False),
        (schemas.ThreadSearch, "offset", 1e300, True),  # a whole number; no page
        (DecisionForm, "approval_version", 2**31, False),
        (DecisionForm, "approval_version", 2**70, False),
        (DecisionForm, "approval_version", 3.0, True),
    ],
)
def test_integers_are_json_numbers_and_bounded(
    model: type[BaseModel], field: str, value: Any, accepted: bool
) -> None:
    base: dict[str, Any] = (
        {
            "request_id": "R-1",
            "approval_version": 1,
            "decision_id": "d-1",
            "action": "approve",
        }
        if model is DecisionForm
        else {}
    )
    data = {**base, field: value}
    if accepted:
        assert isinstance(getattr(model.model_validate(data), field), int)
    else:
        with pytest.raises(ValidationError):
            model.model_validate(data)

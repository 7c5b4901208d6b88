from __future__ import annotations

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django_htmx.middleware import HtmxMiddleware
from pydantic import BaseModel, ConfigDict, ValidationError

from studio.errors import (
    ENGINE_USER_ERRORS,
    GraphNotFound,
    InvalidInput,
    RunFailed,
    StudioError,
    from_engine,
)
from studio.middleware import StudioErrorMiddleware, present_validation


class Amount(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    amount_minor: int


def _request(*, htmx: bool = False) -> HttpRequest:
    headers = {"HX-Request": "true"} if htmx else {}
    request = RequestFactory().get("/somewhere/", headers=headers)
    HtmxMiddleware(lambda r: HttpResponse())(request)
    return request


def _validation_error() -> ValidationError:
    with pytest.raises(ValidationError) as info:
        Amount.model_validate({"amount_minor": "40", "extra": 1})
    return info.value


def middleware() -> StudioErrorMiddleware:
    return StudioErrorMiddleware(lambda request: HttpResponse())


def test_studio_error_renders_the_error_page_with_its_status() -> None:
    response = middleware().process_exception(
        _request(), GraphNotFound("There is no graph named 'x'.")
    )

    assert response is not None
    assert response.status_code == 404
    html = response.content.decode()
    assert "No such graph" in html
    assert "There is no graph named &#x27;x&#x27;." in html


def test_htmx_request_gets_the_flash_fragment_retargeted() -> None:
    response = middleware().process_exception(
        _request(htmx=True), RunFailed("Budget check failed.")
    )

    assert response is not None
    assert response.status_code == 409
    assert response.headers["HX-Retarget"] == "#flash"
    assert response.headers["HX-Reswap"] == "outerHTML"
    html = response.content.decode().strip()
    assert html.startswith('<div id="flash"')
    assert 'data-code="run_failed"' in html
    assert "<html" not in html


def test_pydantic_validation_error_becomes_422_naming_the_fields() -> None:
    response = middleware().process_exception(_request(htmx=True), _validation_error())

    assert response is not None
    assert response.status_code == 422
    assert "amount_minor: Input should be a valid integer" in response.content.decode()


def test_unknown_exceptions_stay_500s() -> None:
    assert middleware().process_exception(_request(), KeyError("bug")) is None


def test_present_validation_lists_one_problem_per_line() -> None:
    lines = present_validation(_validation_error()).splitlines()

    assert lines == [
        "amount_minor: Input should be a valid integer",
        "extra: Extra inputs are not permitted",
    ]


def test_error_types_carry_code_status_and_detail() -> None:
    error = InvalidInput("bad", field="amount_minor")

    assert isinstance(error, StudioError)
    assert (error.code, error.http_status, error.detail) == (
        "invalid_input",
        422,
        {"field": "amount_minor"},
    )


def test_engine_errors_translate_to_run_failed() -> None:
    recursion_error = ENGINE_USER_ERRORS[0]("Recursion limit of 25 reached")

    error = from_engine(recursion_error)

    assert isinstance(error, RunFailed)
    assert error.http_status == 409
    assert error.detail == {"engine_error": "GraphRecursionError"}

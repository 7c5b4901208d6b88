"""Render StudioError once: a #flash fragment for htmx requests, a full page otherwise."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.http import reswap, retarget
from pydantic import ValidationError

from studio.errors import InvalidInput, StudioError, from_storage

__all__ = ("StudioErrorMiddleware", "present_validation")


class StudioErrorMiddleware:
    """Turn ``StudioError`` (and pydantic's ``ValidationError``) into a response.

    Unknown exceptions are left alone: bugs stay 500s.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(
        self, request: HttpRequest, exc: Exception
    ) -> HttpResponse | None:
        if isinstance(exc, ValidationError):
            exc = InvalidInput(present_validation(exc))
        exc = from_storage(exc) or exc  # a tampered or corrupt checkpoint: 409
        if not isinstance(exc, StudioError):
            return None
        context = {"error": exc}
        if getattr(request, "htmx", False):
            response = render(
                request, "components/_flash.html#flash", context, status=exc.http_status
            )
            return reswap(retarget(response, "#flash"), "outerHTML")
        return render(request, "error.html", context, status=exc.http_status)


def present_validation(exc: ValidationError) -> str:
    """One line per problem, naming the field: "amount_minor: Input should be greater than 0"."""
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        lines.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "\n".join(lines)

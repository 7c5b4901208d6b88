"""The API's errors and their one JSON rendering: ``{"detail": message}``.

The studio's pages render ``StudioError`` as HTML (``studio.middleware``); the
API answers JSON, always, so :func:`error_response` renders inside the API's
view wrapper (``studio.api.http.api_view``) before the middleware sees
anything. The statuses are the studio's (``studio.errors``: 422, 409, 404,
403) plus the few only HTTP clients meet: 401, 405, 413.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.signals import got_request_exception
from django.http import Http404, HttpRequest, JsonResponse
from django.utils.log import log_response
from pydantic import ValidationError

from studio.errors import StudioError, from_storage
from studio.middleware import present_validation

__all__ = (
    "CsrfFailed",
    "MethodNotAllowed",
    "NotAuthenticated",
    "PayloadTooLarge",
    "error_response",
    "json_error",
)

log = logging.getLogger("django.request")


class NotAuthenticated(StudioError):
    """No credentials, or an unknown, revoked or malformed token."""

    code = "not_authenticated"
    http_status = 401
    title = "Sign in"


class CsrfFailed(StudioError):
    """A session-authenticated unsafe request without a valid CSRF token."""

    code = "csrf_failed"
    http_status = 403
    title = "Not allowed"


class MethodNotAllowed(StudioError):
    code = "method_not_allowed"
    http_status = 405
    title = "Method not allowed"

    def __init__(self, method: str, allowed: tuple[str, ...]) -> None:
        super().__init__(
            f"Method {method!r} is not allowed here; use {', '.join(allowed)}.",
            allowed=allowed,
        )
        self.allowed = allowed


class PayloadTooLarge(StudioError):
    code = "payload_too_large"
    http_status = 413
    title = "Request too large"


def json_error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"detail": message}, status=status)


def error_response(request: HttpRequest, exc: Exception) -> JsonResponse:
    """The JSON answer to ``exc`` raised while serving an API request.

    Unknown exceptions are bugs: they are logged with their traceback, announced
    like any uncaught exception (``got_request_exception``) and answered 500;
    with ``DEBUG`` on they are re-raised for Django's technical page.
    """
    if isinstance(exc, ValidationError):
        return json_error(present_validation(exc), 422)
    exc = from_storage(exc) or exc  # a tampered or corrupt checkpoint: 409
    if isinstance(exc, StudioError):
        response = json_error(exc.message, exc.http_status)
        if isinstance(exc, NotAuthenticated):
            response["WWW-Authenticate"] = 'Bearer realm="api"'
        if isinstance(exc, MethodNotAllowed):
            response["Allow"] = ", ".join(exc.allowed)
        return response
    if isinstance(exc, Http404):
        return json_error("Not found.", 404)
    if isinstance(exc, PermissionDenied):
        return json_error("You are not allowed to do this.", 403)
    if isinstance(exc, RequestDataTooBig):
        return json_error("The request body is too large.", 413)
    if settings.DEBUG:
        raise exc
    got_request_exception.send(sender=None, request=request)
    response = json_error("Internal server error.", 500)
    log_response(
        "Internal Server Error: %s",
        request.path,
        response=response,
        request=request,
        logger=log,
        exception=exc,
    )
    return response

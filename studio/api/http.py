"""The API's view wrapper and JSON body reader.

Every API view is wrapped by :func:`api_view`, which checks the method,
authenticates (``studio.api.auth``: token or session + CSRF), calls the view
and renders any error as JSON (``studio.api.errors``), so the HTML error
middleware never answers an API request. Views stay parse -> service -> JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from studio import json_input
from studio.api.auth import authenticate
from studio.api.errors import MethodNotAllowed, PayloadTooLarge, error_response
from studio.errors import InvalidInput

__all__ = ("DEFAULT_MAX_BODY_BYTES", "api_view", "max_body_bytes", "read_json_object")

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""``STUDIO_API_MAX_BODY_BYTES`` when the setting is absent: 1 MiB."""

ApiView = Callable[..., HttpResponseBase]


def api_view(*methods: str) -> Callable[[ApiView], ApiView]:
    """Make ``view`` an API endpoint answering only ``methods`` (405 otherwise).

    The view runs with ``request.user`` set to the authenticated user; it may
    raise ``StudioError`` (or pydantic's ``ValidationError``) for a JSON error.

    Example::

        @api_view("POST")
        def review_decision(request, thread_id):
            outcome = decide(request.user, thread_id, read_json_object(request), strings=False)
            return JsonResponse(outcome.as_json(), status=201)
    """
    allowed = tuple(m.upper() for m in methods)

    def decorate(view: ApiView) -> ApiView:
        @wraps(view)
        def wrapper(
            request: HttpRequest, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            try:
                if request.method not in allowed:
                    raise MethodNotAllowed(str(request.method), allowed)
                request.user = authenticate(request)
                return view(request, *args, **kwargs)
            except Exception as exc:  # rendered as JSON; unknown ones stay 500
                return error_response(request, exc)

        # Token clients send no CSRF token; session callers are checked in authenticate().
        return csrf_exempt(wrapper)

    return decorate


def max_body_bytes() -> int:
    return int(getattr(settings, "STUDIO_API_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))


def read_json_object(request: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object (any content type, if the body parses).

    Raises:
        PayloadTooLarge (413): the declared or the actual length is over
            ``STUDIO_API_MAX_BODY_BYTES``.
        InvalidInput (422): not UTF-8 JSON, not an object, a repeated key,
            ``NaN``/``Infinity``, or nested too deeply (``studio.json_input``).
    """
    limit = max_body_bytes()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise PayloadTooLarge(_too_large(limit))
    body = request.body  # RequestDataTooBig (over Django's own limit) -> 413 too
    if len(body) > limit:
        raise PayloadTooLarge(_too_large(limit))
    try:
        data = json_input.loads(body)
    except ValueError as exc:
        raise InvalidInput(f"The body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput("Send a JSON object.")
    return data


def _too_large(limit: int) -> str:
    return f"The request body is larger than {limit} bytes."

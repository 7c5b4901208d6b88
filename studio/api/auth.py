"""Who an API request acts as: a personal API token, or the browser's session.

- A token is sent as ``x-api-key: <token>`` (what ``langgraph-sdk`` sends when
  given ``api_key``) or ``Authorization: Bearer <token>``. When a request carries
  a token, the token alone decides: an unknown or revoked one is 401 even if a
  session cookie came along. Token requests need no CSRF token (a browser does
  not add the header on its own, so a forged cross-site request cannot carry it).
- Otherwise the Django session's user, with Django's CSRF check for unsafe
  methods (the API views are ``csrf_exempt`` so token clients pass the
  middleware; this module runs the same check for session callers).
- Nothing else: the identity never comes from the request body.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware

from studio.api.errors import CsrfFailed, NotAuthenticated
from studio.services import api_tokens

__all__ = ("authenticate", "token_from")

AUTH_REQUIRED = (
    "Authentication required: send a personal API token as the x-api-key header "
    "or as Authorization: Bearer <token> (create one at /account/tokens/)."
)
BAD_TOKEN = "Invalid or revoked API token."


def token_from(request: HttpRequest) -> str | None:
    """The token the request carries, or None when it carries none.

    Raises:
        NotAuthenticated: a malformed ``Authorization: Bearer`` header, or two
            different tokens in the two headers.
    """
    api_key = request.headers.get("x-api-key")
    bearer = None
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, rest = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            bearer = rest.strip()
            if not bearer or " " in bearer:
                raise NotAuthenticated(
                    "Malformed Authorization header: use 'Bearer <token>'."
                )
    if api_key is not None and bearer is not None and api_key.strip() != bearer:
        raise NotAuthenticated(
            "The x-api-key and Authorization headers carry different tokens."
        )
    if api_key is not None:
        return api_key.strip()
    return bearer


def authenticate(request: HttpRequest) -> Any:
    """The active user this API request acts as.

    Raises:
        NotAuthenticated (401): no token and no session, or a bad token.
        CsrfFailed (403): a session request with an unsafe method and no valid
            CSRF token.
    """
    secret = token_from(request)
    if secret is not None:
        user = api_tokens.user_for(secret)
        if user is None:
            raise NotAuthenticated(BAD_TOKEN)
        return user
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_active:
        raise NotAuthenticated(AUTH_REQUIRED)
    _enforce_csrf(request)
    return user


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, returning the reason instead of rendering the 403 page."""

    def _reject(self, request: HttpRequest, reason: str) -> Any:
        return reason


def _no_response(
    request: HttpRequest,
) -> HttpResponse:  # pragma: no cover - never called
    raise AssertionError("the CSRF check never calls the view")


def _enforce_csrf(request: HttpRequest) -> None:
    check = _CsrfCheck(_no_response)
    check.process_request(request)  # reads the CSRF cookie, as the middleware did
    reason = check.process_view(request, _no_response, (), {})
    if reason:
        raise CsrfFailed(f"CSRF check failed: {reason}")

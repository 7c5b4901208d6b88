"""Helpers for the JSON API tests: a token client, and the official SDK served in-process.

``Api`` sends JSON with a personal token (``x-api-key``) through Django's test
client. ``sdk_client`` is ``langgraph_sdk``'s own sync client, its httpx
transport pointed at the Django WSGI app: the real client's requests and
parsing, no server process.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import httpx
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from langgraph_sdk.client import SyncLangGraphClient

from studio.models import ApiToken

__all__ = ("Api", "sdk_client", "token_for")


def token_for(user: Any) -> str:
    return ApiToken.issue(user)[1]


class Api:
    """``api.get("/threads/x")``, ``api.post("/threads", {...})``: paths under ``/api``."""

    def __init__(self, user: Any | None = None, *, token: str | None = None) -> None:
        self.token = token if token is not None else (token_for(user) if user else "")
        self.client = Client()

    def _headers(self) -> dict[str, str]:
        return {"x-api-key": self.token} if self.token else {}

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> Any:
        data = (
            body if isinstance(body, str | bytes) or body is None else json.dumps(body)
        )
        response = getattr(self.client, method.lower())(
            f"/api{path}",
            data=data if data is not None else "",
            content_type="application/json",
            headers={**self._headers(), **extra.pop("headers", {})},
            **extra,
        )
        if response.status_code != 204:
            assert response["Content-Type"].startswith("application/json"), response
        return response

    def get(self, path: str, **params: Any) -> Any:
        response = self.client.get(f"/api{path}", params, headers=self._headers())
        assert response["Content-Type"].startswith("application/json"), response
        return response

    def post(self, path: str, body: Any = None, **extra: Any) -> Any:
        return self.call("POST", path, body, **extra)

    def patch(self, path: str, body: Any = None) -> Any:
        return self.call("PATCH", path, body)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)


def sdk_client(token: str) -> SyncLangGraphClient:
    """``langgraph_sdk``'s sync client talking to this process's Django app."""
    client = httpx.Client(
        base_url="http://testserver/api",
        transport=httpx.WSGITransport(app=_test_app),
        headers={"x-api-key": token},
    )
    return SyncLangGraphClient(client)


@cache
def _wsgi_app() -> Any:
    return get_wsgi_application()


def _test_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """The WSGI app, keeping the test's database connection open (as Django's
    test client does: a request's end closes "old" connections otherwise)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        answer = _wsgi_app()(environ, start_response)
        try:
            return list(answer)
        finally:
            answer.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)

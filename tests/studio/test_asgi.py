"""The ASGI app as Daphne runs it: HTTP through Django, static files from the app."""

from __future__ import annotations

import httpx
import pytest

from studio.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application), base_url="http://localhost"
    )


async def test_pages_over_asgi() -> None:
    async with _client() as client:
        home = await client.get("/")
        login = await client.get(home.headers["location"])

    assert home.status_code == 302  # every studio page needs a signed-in user
    assert home.headers["location"] == "/accounts/login/?next=/"
    assert login.status_code == 200
    assert "Sign in" in login.text
    assert "script-src 'self'" in login.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/static/studio/app.css", "text/css"),
        ("/static/django_htmx/ext/hx-ws-2.min.js", "text/javascript"),
    ],
)
async def test_static_files_are_served_by_the_asgi_app(
    path: str, content_type: str
) -> None:
    async with _client() as client:
        response = await client.get(path)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith(content_type)
    assert len(response.content) > 1000


async def test_missing_static_file_is_404() -> None:
    async with _client() as client:
        response = await client.get("/static/studio/nope.css")

    assert response.status_code == 404

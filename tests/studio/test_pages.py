from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.test.utils import override_settings

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client: Client) -> Client:
    """Every studio page needs a signed-in user (the graphs list included)."""
    client.force_login(User.objects.create_user("reader", password="pw"))
    return client


def test_home_page_needs_a_signed_in_user() -> None:
    response = Client().get("/")

    assert response.status_code == 302
    assert response.headers["Location"] == "/accounts/login/?next=/"


def test_home_page_shows_the_empty_registry(client: Client) -> None:
    response = client.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Graphs</h1>" in html
    assert "No graphs registered yet" in html
    assert "<title>Graphs · Graph Studio</title>" in html


def test_home_page_loads_htmx_2_and_the_ws_extension_from_static(
    client: Client,
) -> None:
    html = client.get("/").content.decode()

    assert '<script src="/static/django_htmx/htmx-2.min.js" defer></script>' in html
    assert (
        '<script src="/static/django_htmx/ext/hx-ws-2.min.js" defer></script>' in html
    )
    assert 'href="/static/studio/app.css"' in html


def test_home_page_has_no_inline_script_and_configures_htmx_by_meta(
    client: Client,
) -> None:
    html = client.get("/").content.decode()

    assert re.findall(r"<script(?![^>]*\ssrc=)[^>]*>", html) == []
    assert '<meta name="htmx-config"' in html
    assert '"code":"^(409|422)$","swap":true' in html


def test_pages_send_a_strict_content_security_policy(client: Client) -> None:
    response = client.get("/")

    policy = response.headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "same-origin"


def test_body_sends_the_csrf_token_with_htmx_requests(client: Client) -> None:
    html = client.get("/").content.decode()

    assert re.search(
        r"""<body hx-headers='\{"x-csrftoken": "[A-Za-z0-9]{32,}"\}'>""", html
    )


@override_settings(
    STUDIO_GRAPHS={"research": "pkg.research:graph", "purchase": "pkg.p:build"}
)
def test_home_page_lists_registered_graphs_by_name(client: Client) -> None:
    html = client.get("/").content.decode()

    assert "No graphs registered yet" not in html
    names = re.findall(r'<h2 class="card__title"><a href="[^"]+">(\w+)</a></h2>', html)
    assert names == ["purchase", "research"]


def test_unknown_address_renders_the_404_page(client: Client) -> None:
    response = client.get("/no/such/page/")

    assert response.status_code == 404
    assert "There is nothing at this address" in response.content.decode()


def test_login_page_renders_a_sign_in_form() -> None:
    response = Client().get("/accounts/login/")

    assert response.status_code == 200
    html = response.content.decode()
    assert '<input type="text" name="username"' in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_signing_in_returns_to_the_graphs_list_with_the_user_shown() -> None:
    User.objects.create_user("ada", password="correct horse", first_name="Ada")
    client = Client(enforce_csrf_checks=True)
    client.get("/accounts/login/")

    response = client.post(
        "/accounts/login/",
        {
            "username": "ada",
            "password": "correct horse",
            "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        },
        follow=True,
    )

    assert response.redirect_chain == [("/", 302)]
    html = response.content.decode()
    assert re.search(
        r'<a class="account__name" href="/account/tokens/"[^>]*>Ada</a>', html
    )
    assert "Sign out" in html


def test_wrong_password_is_refused_with_a_message() -> None:
    User.objects.create_user("ada", password="correct horse")

    response = Client().post(
        "/accounts/login/", {"username": "ada", "password": "nope"}
    )

    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()

"""Personal API tokens: ``manage.py create_api_token`` and the ``/account/tokens/`` page."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from studio.models import ApiToken, AuditEntry
from studio.services import api_tokens

pytestmark = pytest.mark.django_db

PAGE = "/account/tokens/"


def authenticates(secret: str) -> bool:
    """A token that authenticates reaches the decision protocol (404: no thread)."""
    response = Client().post(
        "/api/reviews/no-such-thread/decision",
        data={},
        content_type="application/json",
        headers={"x-api-key": secret},
    )
    assert response.status_code in (401, 404)
    return response.status_code == 404


def create(client: Client, name: str = "laptop") -> tuple[str, str]:
    """POST the create form; returns the page and the secret it shows."""
    response = client.post(PAGE, {"name": name})
    assert response.status_code == 200
    secret = response.context["issued"].secret
    return response.content.decode(), secret


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob", password="pw")


# -- the command -------------------------------------------------------------------


def test_create_api_token_prints_a_token_that_authenticates(ada: User) -> None:
    out, err = StringIO(), StringIO()

    call_command("create_api_token", "ada", "--name", "ci", stdout=out, stderr=err)

    secret = out.getvalue().strip()
    assert secret.startswith("gs_") and "\n" not in secret
    assert "not shown again" in err.getvalue() and secret not in err.getvalue()
    token = ApiToken.objects.get(user=ada)
    assert token.name == "ci" and token.digest == ApiToken.hash(secret)
    assert authenticates(secret)
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_create_api_token_default_name(ada: User) -> None:
    call_command("create_api_token", "ada", stdout=StringIO(), stderr=StringIO())

    assert ApiToken.objects.get(user=ada).name == "default"


def test_create_api_token_unknown_user_is_an_error(ada: User) -> None:
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("create_api_token", "nobody", stdout=StringIO())

    assert not ApiToken.objects.exists()


def test_create_api_token_inactive_user_is_an_error(ada: User) -> None:
    ada.is_active = False
    ada.save()

    with pytest.raises(CommandError, match="inactive"):
        call_command("create_api_token", "ada", stdout=StringIO())


# -- the page ----------------------------------------------------------------------


def test_tokens_page_needs_a_session() -> None:
    response = Client().get(PAGE)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_tokens_page_empty(signed_in: Client) -> None:
    response = signed_in.get(PAGE)

    assert response.status_code == 200
    assert "No API tokens yet" in response.content.decode()


def test_tokens_page_creates_and_shows_the_secret_once(
    signed_in: Client, ada: User
) -> None:
    page, secret = create(signed_in, "laptop")

    assert secret in page
    token = ApiToken.objects.get(user=ada)
    assert token.name == "laptop"
    assert authenticates(secret)
    later = signed_in.get(PAGE).content.decode()
    assert secret not in later
    assert "laptop" in later and f"{token.prefix}…" in later


def test_tokens_page_response_is_not_cached(signed_in: Client) -> None:
    response = signed_in.post(PAGE, {"name": "laptop"})

    assert "no-store" in response["Cache-Control"]


def test_tokens_page_stores_only_the_digest(signed_in: Client, ada: User) -> None:
    _, secret = create(signed_in)

    row = ApiToken.objects.filter(user=ada).values().get()
    assert row["digest"] == ApiToken.hash(secret)
    assert all(secret not in str(value) for value in row.values())
    assert len(row["prefix"]) < len(secret) // 2
    audited = AuditEntry.objects.get(action="token.created")
    assert secret not in str(audited.detail)


def test_tokens_page_lists_only_your_tokens(
    signed_in: Client, ada: User, bob: User
) -> None:
    api_tokens.issue(ada, "ada-laptop")
    api_tokens.issue(bob, "bob-secret-box")

    page = signed_in.get(PAGE).content.decode()

    assert "ada-laptop" in page
    assert "bob-secret-box" not in page
    assert "Your 1 token" in page


def test_tokens_page_escapes_the_name(signed_in: Client) -> None:
    page, _ = create(signed_in, "<script>alert(1)</script>")

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("name", ["", "   ", "x" * 65])
def test_tokens_page_refuses_a_bad_name(signed_in: Client, name: str) -> None:
    response = signed_in.post(PAGE, {"name": name})

    assert response.status_code == 422
    assert not ApiToken.objects.exists()


def test_tokens_page_revokes_your_token(signed_in: Client, ada: User) -> None:
    issued = api_tokens.issue(ada, "laptop")

    response = signed_in.post(f"{PAGE}{issued.token.id}/revoke/")

    assert response.status_code == 303
    assert response["Location"] == PAGE
    assert not ApiToken.objects.filter(user=ada).exists()
    assert not authenticates(issued.secret)
    page = signed_in.get(PAGE).content.decode()
    assert "Revoked the token “laptop”" in page
    assert AuditEntry.objects.filter(action="token.revoked").count() == 1


def test_tokens_page_cannot_revoke_another_users_token(
    signed_in: Client, bob: User
) -> None:
    issued = api_tokens.issue(bob, "bob-laptop")

    response = signed_in.post(f"{PAGE}{issued.token.id}/revoke/")

    assert response.status_code == 404
    assert ApiToken.objects.filter(user=bob).count() == 1
    assert authenticates(issued.secret)


def test_tokens_page_revoke_is_post_only(signed_in: Client, ada: User) -> None:
    issued = api_tokens.issue(ada, "laptop")

    response = signed_in.get(f"{PAGE}{issued.token.id}/revoke/")

    assert response.status_code == 405
    assert ApiToken.objects.filter(user=ada).exists()


def test_tokens_page_posts_need_csrf(ada: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    issued = api_tokens.issue(ada, "laptop")

    assert client.post(PAGE, {"name": "forged"}).status_code == 403
    assert client.post(f"{PAGE}{issued.token.id}/revoke/").status_code == 403
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["laptop"]

    client.get(PAGE)
    csrf = client.cookies["csrftoken"].value
    created = client.post(PAGE, {"name": "mine", "csrfmiddlewaretoken": csrf})
    revoked = client.post(
        f"{PAGE}{issued.token.id}/revoke/", {"csrfmiddlewaretoken": csrf}
    )

    assert created.status_code == 200
    assert revoked.status_code == 303
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["mine"]

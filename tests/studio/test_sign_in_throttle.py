"""Sign-in throttling (django-axes): wrong passwords in a row are not free.

Before, 12 wrong passwords in a row were answered as fast as the first. Now,
from the ``STUDIO_LOGIN_FAILURE_LIMIT``-th (5th) failure of one username from
one address, that pair is refused with 429 for the cool-off time, even with the
right password; other users, and the same user elsewhere, are not.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


@pytest.fixture(autouse=True)
def _people() -> None:
    User.objects.create_user("ada", password="right-horse-battery")
    User.objects.create_user("bob", password="bob-password-ok")


def _sign_in(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(
        LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_after_five_failures_even_the_right_password_is_refused() -> None:
    client = Client()
    wrong = [_sign_in(client, "ada", f"guess-{i}").status_code for i in range(5)]

    locked = _sign_in(client, "ada", "right-horse-battery")

    assert wrong == [200] * 4 + [429]  # the form with its error; the fifth locks
    assert locked.status_code == 429
    html = locked.content.decode()
    assert "Too many sign-in attempts" in html
    assert "Try again in 15 minutes." in html
    assert "_auth_user_id" not in client.session


def test_the_lock_is_for_that_user_from_that_address_only() -> None:
    client = Client()
    for i in range(5):
        _sign_in(client, "ada", f"guess-{i}")

    elsewhere = _sign_in(Client(), "ada", "right-horse-battery", address="10.0.0.2")
    colleague = _sign_in(Client(), "bob", "bob-password-ok")

    assert elsewhere.status_code == 302  # signed in from another address
    assert colleague.status_code == 302  # nobody locks a colleague out


def test_a_success_resets_the_count() -> None:
    client = Client()
    for i in range(4):
        _sign_in(client, "ada", f"guess-{i}")
    assert _sign_in(client, "ada", "right-horse-battery").status_code == 302
    client.logout()

    again = [_sign_in(client, "ada", f"again-{i}").status_code for i in range(4)]

    assert again == [200] * 4  # the count started again: four more may fail


@override_settings(AXES_COOLOFF_TIME=timedelta(seconds=0.5))
def test_the_lock_lifts_after_the_cool_off() -> None:
    client = Client()
    for i in range(5):
        _sign_in(client, "ada", f"guess-{i}")
    assert _sign_in(client, "ada", "right-horse-battery").status_code == 429

    time.sleep(0.6)

    assert _sign_in(client, "ada", "right-horse-battery").status_code == 302

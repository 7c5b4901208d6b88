"""Fixtures shared by the studio tests: a signed-up user and her signed-in client.

A module that serves its own graphs declares ``_graphs = serve_graphs(GRAPHS)``
(``tests._support.studio``).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


@pytest.fixture
def signed_in(client: Client, ada: User) -> Client:
    client.force_login(ada)
    return client

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import Group, User
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_demo_creates_a_reviewer_who_can_sign_in() -> None:
    assert "Created demo user 'demo'" in _seed()

    user = authenticate(username="demo", password="demo")
    assert user is not None
    assert list(user.groups.values_list("name", flat=True)) == ["reviewers"]
    assert set(Group.objects.values_list("name", flat=True)) == {
        "reviewers",
        "senior-reviewers",
    }


def test_seed_demo_runs_again_without_changes() -> None:
    _seed()
    password = User.objects.get(username="demo").password

    assert "Kept demo user 'demo'" in _seed()
    assert User.objects.filter(username="demo").count() == 1
    assert User.objects.get(username="demo").password == password
    assert Group.objects.count() == 2

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import RequestFactory

from studio.models import Run

pytestmark = pytest.mark.django_db


def _sign_in(username: str, password: str) -> User | None:
    """As the sign-in page does (the throttling backend needs the request)."""
    request = RequestFactory().post("/accounts/login/")
    return authenticate(request, username=username, password=password)


def _seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def test_seed_demo_creates_a_reviewer_who_can_sign_in() -> None:
    assert "Created demo user 'demo'" in _seed()

    user = _sign_in("demo", "demo")
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


@pytest.mark.django_db
def test_seed_demo_queues_one_run_per_demo_graph_once(settings) -> None:
    settings.STUDIO_GRAPHS = {
        "purchase": "studio.demo_graphs.purchase:build",
        "research": "studio.demo_graphs.research:build",
    }

    assert "Queued demo runs: purchase, purchase, research." in _seed()
    _seed()

    assert sorted(Run.objects.values_list("graph", "created_by__username")) == [
        ("purchase", "requester"),
        ("purchase", "requester"),
        ("research", "demo"),
    ]


def test_seed_demo_creates_one_account_per_role() -> None:
    _seed("--no-runs")

    for username, groups in (
        ("demo", ["reviewers"]),
        ("requester", []),
        ("senior", ["senior-reviewers"]),
    ):
        user = _sign_in(username, username)
        assert user is not None, username
        assert list(user.groups.values_list("name", flat=True)) == groups


def test_seed_demo_without_runs() -> None:
    _seed("--no-runs")

    assert Run.objects.count() == 0

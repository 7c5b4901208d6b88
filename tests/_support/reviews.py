"""Purchases waiting for review, and the people who request and decide them."""

from __future__ import annotations

import itertools
from typing import Any

from django.contrib.auth.models import Group, User

from studio.models import Run
from studio.reviews.decisions import DecisionOutcome, decide
from studio.services import runs
from tests._support.threads import drain

__all__ = ("PURCHASE_GRAPHS", "decision", "member", "purchase", "ruling")

PURCHASE_GRAPHS = {"purchase": "studio.demo_graphs.purchase:build"}
_ids = itertools.count(1)


def member(username: str, *groups: str, superuser: bool = False) -> User:
    """A user in ``groups`` (created as needed); password ``pw``."""
    if superuser:
        user = User.objects.create_superuser(username, password="pw")
    else:
        user = User.objects.create_user(username, password="pw")
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


def purchase(
    requester: User,
    *,
    request_id: str | None = None,
    amount_minor: int = 480_050,
    vendor: str = "Acme",
    category: str = "office",
    **extra: Any,
) -> Run:
    """Start a purchase and run it to its review step (the worker runs it here)."""
    request_id = request_id or f"PO-T{next(_ids):04d}"
    run = runs.start_run(
        graph="purchase",
        user=requester,
        input={
            "request_id": request_id,
            "approval_version": 1,
            "amount_minor": amount_minor,
            "vendor": vendor,
            "category": category,
            **extra,
        },
    )
    drain()
    run.refresh_from_db()
    return run


def decision(
    request_id: str,
    action: str = "approve",
    *,
    version: int = 1,
    decision_id: str | None = None,
    reason: str = "",
) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "approval_version": version,
        "decision_id": decision_id or f"d-{next(_ids)}",
        "action": action,
        "reason": reason or ("not needed" if action == "reject" else ""),
    }


def ruling(user: User, thread_id: str, body: dict[str, Any]) -> DecisionOutcome:
    """Decide through the protocol (JSON rules) and run what it queued."""
    outcome = decide(user, thread_id, body, strings=False)
    drain()
    return outcome

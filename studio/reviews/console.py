"""What the console's pages show: plain data built from the queue, the ledger and the checkpoint.

No engine objects and no querysets leave this module; templates get dataclasses.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from studio.errors import Forbidden, NotFound
from studio.models import ApprovalDecision, ReviewRequest, Run, Thread
from studio.reviews.decisions import decisions_of
from studio.reviews.governance import governance_for
from studio.reviews.queue import (
    QueueRow,
    level_label,
    pending_categories,
    pending_for,
    waiting_review,
)
from studio.services.access import REVIEWER_GROUPS, review_levels, visible_thread
from studio.services.runs import ACTIVE

__all__ = (
    "DecisionRow",
    "answered_on_thread_page",
    "QueuePage",
    "ReviewPage",
    "queue_page",
    "require_auditor",
    "review_page",
)


def _money(minor: int, currency: str = "CNY") -> str:
    return f"{minor / 100:,.2f} {currency}"


def require_reviewer(user: Any) -> frozenset[int]:
    levels = review_levels(user)
    if not levels:
        raise Forbidden(
            "The reviewer console is for members of the reviewers or "
            "senior-reviewers group. Ask an administrator to add you."
        )
    return levels


def require_auditor(user: Any) -> None:
    """Reviewers, senior reviewers and superusers read the audit log."""
    if not getattr(user, "is_superuser", False):
        require_reviewer(user)


@dataclass(frozen=True, slots=True)
class QueuePage:
    rows: list[QueueRow]
    levels: tuple[int, ...]
    vendor: str
    category: str
    level: int | None
    categories: list[str]


def queue_page(
    user: Any, *, vendor: str = "", category: str = "", level: str = ""
) -> QueuePage:
    levels = require_reviewer(user)
    wanted = int(level) if level in ("1", "2") else None
    return QueuePage(
        rows=pending_for(
            user, vendor=vendor.strip(), category=category.strip(), level=wanted
        ),
        levels=tuple(sorted(levels)),
        vendor=vendor.strip(),
        category=category.strip(),
        level=wanted,
        categories=pending_categories(user),
    )


@dataclass(frozen=True, slots=True)
class DecisionRow:
    request_id: str
    approval_version: int
    level: int
    action: str
    reviewer: str
    reason: str
    decided_at: datetime


@dataclass(frozen=True, slots=True)
class VersionRow:
    approval_version: int
    amount: str
    vendor: str
    status: str
    outcome: str
    outcome_text: str


@dataclass(frozen=True, slots=True)
class ReviewPage:
    """One review: the projection of the waiting interrupt and the form, or why not."""

    thread_id: str
    request_id: str
    approval_version: int
    waiting: bool
    amount: str
    amount_minor: int
    vendor: str
    category: str
    reason: str
    requester: str
    items: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    checks_passed: bool
    what_will_happen: str
    level: int
    levels_required: int
    can_decide: bool
    why_not: str
    decision_id: str
    decisions: list[DecisionRow] = field(default_factory=list)
    versions: list[VersionRow] = field(default_factory=list)

    outcome: str = ""
    """``executed`` / ``rejected`` once the thread finished this version."""
    outcome_text: str = ""

    @property
    def level_label(self) -> str:
        return level_label(self.level, self.levels_required)


def answered_on_thread_page(user: Any, thread_id: str) -> bool:
    """Whether the thread's questions are its owner's (``answered_by="owner"``): they
    are asked and answered on the thread page, not in the console.

    Raises ThreadNotFound (404) for a thread the user may not see."""
    thread = visible_thread(user, thread_id)
    governance = governance_for(thread.graph)
    return governance is not None and governance.answered_by == "owner"


def review_page(user: Any, thread_id: str) -> ReviewPage:
    """Raises ThreadNotFound / NotFound (404) for a thread the user may not see or with no review."""
    thread = visible_thread(user, thread_id)
    governance = governance_for(thread.graph)
    if governance is None:
        raise NotFound(f"Thread {thread_id!r} has nothing for a reviewer to decide.")
    waiting = waiting_review(thread, governance)
    decisions = decisions_of(thread)
    versions = list(
        ReviewRequest.objects.filter(thread=thread).order_by("-approval_version")
    )
    if waiting is not None:
        payload = waiting.payload
        rid, version, amount = (
            waiting.request_id,
            waiting.approval_version,
            waiting.amount_minor,
        )
    elif versions:
        payload = versions[0].payload
        rid, version, amount = (
            versions[0].request_id,
            versions[0].approval_version,
            versions[0].amount_minor,
        )
    else:
        raise NotFound(f"Thread {thread_id!r} has not reached its review yet.")
    required = governance.levels_for(amount)
    this_version = [
        d for d in decisions if (d.request_id, d.approval_version) == (rid, version)
    ]
    level = len(this_version) + 1
    why_not = _why_not(user, thread, waiting is not None, level, required, this_version)
    return ReviewPage(
        thread_id=thread.thread_id,
        request_id=rid,
        approval_version=version,
        waiting=waiting is not None,
        amount=_money(amount, str(payload.get("currency", "CNY"))),
        amount_minor=amount,
        vendor=str(payload.get("vendor", "")),
        category=str(payload.get("category", "")),
        reason=str(payload.get("reason", "")),
        requester=thread.owner.get_username()
        if thread.owner
        else str(payload.get("requester", "")),
        items=[_item(i) for i in payload.get("items", []) if isinstance(i, dict)],
        checks=[c for c in payload.get("checks", []) if isinstance(c, dict)],
        checks_passed=bool(payload.get("checks_passed")),
        what_will_happen=str(payload.get("what_will_happen", "")),
        level=min(level, required),
        levels_required=required,
        can_decide=not why_not,
        why_not=why_not,
        decision_id=str(uuid.uuid4()),
        decisions=[
            DecisionRow(
                request_id=d.request_id,
                approval_version=d.approval_version,
                level=d.level,
                action=d.action,
                reviewer=d.reviewer.get_username(),
                reason=d.reason,
                decided_at=d.decided_at,
            )
            for d in decisions
        ],
        outcome=next(
            (v.outcome for v in versions if v.approval_version == version), ""
        ),
        outcome_text=next(
            (v.outcome_text for v in versions if v.approval_version == version), ""
        ),
        versions=[
            VersionRow(
                approval_version=v.approval_version,
                amount=_money(v.amount_minor, v.currency),
                vendor=v.vendor,
                status=v.get_status_display(),
                outcome=v.outcome,
                outcome_text=v.outcome_text,
            )
            for v in versions
        ],
    )


def _item(item: dict[str, Any]) -> dict[str, Any]:
    qty = int(item.get("qty", 0) or 0)
    unit = int(item.get("unit_price_minor", 0) or 0)
    return {
        "sku": str(item.get("sku", "")),
        "qty": qty,
        "unit_price": _money(unit),
        "total": _money(qty * unit),
    }


def _why_not(
    user: Any,
    thread: Thread,
    waiting: bool,
    level: int,
    required: int,
    decided: list[ApprovalDecision],
) -> str:
    """Why this user cannot decide now ("" when they can): the same rules the protocol enforces."""
    if any(d.action == "reject" for d in decided) or level > required:
        last = decided[-1]
        verb = "approved" if last.action == "approve" else "rejected"
        return f"Decided: {verb} by {last.reviewer.get_username()} on {last.decided_at:%Y-%m-%d %H:%M} UTC."
    if not waiting:
        return "Nothing waits for a decision on this request now."
    if Run.objects.filter(thread=thread, status__in=ACTIVE).exists():
        return (
            "This request is running right now; reload when it waits for review again."
        )
    if thread.owner_id == user.pk:
        return "You requested this purchase, so someone else must decide it."
    if level not in review_levels(user):
        return f"Level {level} is decided by a member of {REVIEWER_GROUPS[level]}."
    if any(d.reviewer_id == user.pk for d in decided):
        return (
            "You decided the first level; a different senior reviewer decides this one."
        )
    return ""

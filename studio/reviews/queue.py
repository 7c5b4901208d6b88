"""The review queue: which governed requests wait for whom, kept in step with checkpoints.

:func:`sync` runs after every run of a governed graph (the worker calls it): it
reads the thread's head and records the waiting console interrupt as a
``ReviewRequest`` (older versions of the thread become ``superseded``), or the
outcome once the thread finished. The checkpoint stays the truth:
:func:`waiting_review` re-reads it for the decision protocol. Every change is
announced to the ``reviews`` channel group so header badges and the queue page
update live.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, Min, OuterRef, QuerySet
from django.utils import timezone

from studio.models import ApprovalDecision, ReviewRequest, Thread
from studio.reviews.audit import payload_hash
from studio.reviews.governance import Governance, governance_for
from studio.services.access import REVIEWER_GROUPS, review_levels
from studio.services.group_send import group_send
from studio.services.registered_graphs import runnable

__all__ = (
    "REVIEWS_GROUP",
    "QueueRow",
    "WaitingReview",
    "announce",
    "level_label",
    "pending_categories",
    "pending_count",
    "pending_for",
    "sync",
    "waiting_review",
)

log = logging.getLogger(__name__)

REVIEWS_GROUP = "reviews"
"""Channels group told whenever the queue changes (``reviews.changed``)."""


@dataclass(frozen=True, slots=True)
class WaitingReview:
    """The console interrupt waiting at a thread's head."""

    node: str
    interrupt_id: str
    payload: dict[str, Any]
    request_id: str
    approval_version: int
    amount_minor: int


def waiting_review(thread: Thread, governance: Governance) -> WaitingReview | None:
    """Read the head checkpoint: the unanswered console interrupt, if one waits.

    ``payload`` is what the decider is shown (``Governance.shown``: the
    interrupt's value, or more read from the state, such as the tool call ids
    an agent's question is about)."""
    state = runnable(thread.graph).get_state(
        {"configurable": {"thread_id": thread.thread_id}}
    )
    for task in state.tasks:
        if task.name not in governance.console_nodes or task.result is not None:
            continue
        for item in task.interrupts:
            payload = item.value if isinstance(item.value, dict) else {}
            values = state.values if isinstance(state.values, dict) else {}
            try:
                request_id, version, amount = governance.review_key(
                    payload, str(item.id or "")
                )
                return WaitingReview(
                    node=task.name,
                    interrupt_id=str(item.id),
                    payload=dict(governance.shown(dict(payload), values)),
                    request_id=request_id,
                    approval_version=version,
                    amount_minor=amount,
                )
            except (KeyError, TypeError, ValueError):
                log.warning(
                    "thread %s: %s interrupted without a review payload",
                    thread.thread_id,
                    task.name,
                )
    return None


def _queued_governance(graph: str) -> Governance | None:
    """``graph``'s governance when its questions go to the reviewers' queue; None
    for an ungoverned graph or an agent whose questions are its owner's."""
    governance = governance_for(graph)
    if governance is None or governance.answered_by == "owner":
        return None
    return governance


def sync(thread_id: str, graph: str | None = None) -> None:
    """Bring the thread's ``ReviewRequest`` rows in line with its head checkpoint.

    ``graph``: the thread's graph when the caller knows it (a worker: its run's,
    which is its thread's); a graph whose questions no reviewer answers then
    costs no read at all."""
    if graph is not None and _queued_governance(graph) is None:
        return
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None:
        return
    governance = _queued_governance(thread.graph)
    if governance is None:
        return
    waiting = waiting_review(thread, governance)
    now = timezone.now()
    with transaction.atomic():
        rows = ReviewRequest.objects.filter(thread=thread)
        if waiting is not None:
            row, created = ReviewRequest.objects.get_or_create(
                thread=thread,
                request_id=waiting.request_id,
                approval_version=waiting.approval_version,
                defaults=_row_fields(thread, governance, waiting, now),
            )
            fields = _row_fields(thread, governance, waiting, now)
            if not created and row.payload_hash != fields["payload_hash"]:
                # the same version asked again with other values: show what waits now
                fields.pop("created_at")
                rows.filter(pk=row.pk).update(**fields)
            if not created and row.status == ReviewRequest.Status.SUPERSEDED:
                rows.filter(pk=row.pk).update(
                    status=ReviewRequest.Status.PENDING, updated_at=now
                )
            rows.filter(status=ReviewRequest.Status.PENDING).exclude(pk=row.pk).update(
                status=ReviewRequest.Status.SUPERSEDED, updated_at=now
            )
            if thread.metadata.get("request_id") != waiting.request_id:
                thread.metadata = {**thread.metadata, "request_id": waiting.request_id}
                Thread.objects.filter(pk=thread.pk).update(metadata=thread.metadata)
        else:
            _record_outcome(thread, rows, now)
    announce()


def _row_fields(
    thread: Thread, governance: Governance, waiting: WaitingReview, now: datetime
) -> dict[str, Any]:
    payload = waiting.payload
    approvals = ApprovalDecision.objects.filter(
        thread=thread,
        request_id=waiting.request_id,
        approval_version=waiting.approval_version,
        action="approve",
    ).count()
    return {
        "graph": thread.graph,
        "amount_minor": waiting.amount_minor,
        "currency": str(payload.get("currency", "CNY"))[:8],
        "vendor": str(payload.get("vendor", ""))[:200],
        "category": str(payload.get("category", ""))[:64],
        "requester_id": thread.owner_id,
        "payload": payload,
        "payload_hash": payload_hash(payload),
        "interrupt_id": waiting.interrupt_id,
        "levels_required": governance.levels_for(waiting.amount_minor),
        "level": approvals + 1,
        "created_at": now,
        "updated_at": now,
    }


def _record_outcome(
    thread: Thread, rows: QuerySet[ReviewRequest], now: datetime
) -> None:
    latest = (
        rows.exclude(status=ReviewRequest.Status.SUPERSEDED)
        .order_by("-approval_version", "-created_at")
        .first()
    )
    if latest is None:
        return
    values = (
        runnable(thread.graph)
        .get_state({"configurable": {"thread_id": thread.thread_id}})
        .values
    )
    values = values if isinstance(values, dict) else {}
    status = str(values.get("status", ""))
    if status not in ("executed", "rejected"):
        return
    rows.filter(pk=latest.pk).update(
        status=ReviewRequest.Status.CLOSED,
        outcome=status,
        outcome_text=str(values.get("result", "")),
        updated_at=now,
    )


# -- reading ----------------------------------------------------------------------------


def level_label(level: int, levels_required: int) -> str:
    """Which level waits, and whose group decides it."""
    return f"level {level} of {levels_required} ({REVIEWER_GROUPS.get(level, '')})"


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A pending review as the queue shows it."""

    thread_id: str
    request_id: str
    approval_version: int
    amount_minor: int
    currency: str
    vendor: str
    category: str
    requester: str
    level: int
    levels_required: int
    waiting_since: datetime

    @property
    def amount(self) -> str:
        return f"{self.amount_minor / 100:,.2f} {self.currency}"

    @property
    def level_label(self) -> str:
        """The same words as the decision page: "level 1 of 1 (reviewers)"."""
        return level_label(self.level, self.levels_required)


def _pending(user: Any) -> QuerySet[ReviewRequest]:
    """What ``user`` may decide now: pending at a level they hold, not their own
    request, and no level of it decided by them already (a senior who approved
    level 1 does not approve level 2). One query, however long their history."""
    levels = review_levels(user)
    if not levels:
        return ReviewRequest.objects.none()
    decided = ApprovalDecision.objects.filter(
        reviewer_id=user.pk,
        thread_id=OuterRef("thread_id"),
        request_id=OuterRef("request_id"),
        approval_version=OuterRef("approval_version"),
    )
    return (
        ReviewRequest.objects.filter(
            status=ReviewRequest.Status.PENDING, level__in=levels
        )
        .exclude(requester_id=user.pk)
        .exclude(Exists(decided))
    )


def pending_for(
    user: Any,
    *,
    vendor: str = "",
    category: str = "",
    level: int | None = None,
    limit: int = 200,
) -> list[QueueRow]:
    """What ``user`` may decide, oldest first (optionally filtered)."""
    rows = _pending(user).select_related("requester")
    if vendor:
        rows = rows.filter(vendor__icontains=vendor)
    if category:
        rows = rows.filter(category=category)
    if level:
        rows = rows.filter(level=level)
    return [
        QueueRow(
            thread_id=row.thread_id,
            request_id=row.request_id,
            approval_version=row.approval_version,
            amount_minor=row.amount_minor,
            currency=row.currency,
            vendor=row.vendor,
            category=row.category,
            requester=row.requester.get_username() if row.requester else "",
            level=row.level,
            levels_required=row.levels_required,
            waiting_since=row.created_at,
        )
        for row in rows.order_by("created_at", "pk")[:limit]
    ]


def pending_categories(user: Any) -> list[str]:
    """The categories of what waits for ``user`` (the queue's filter choices)."""
    return sorted(
        set(_pending(user).exclude(category="").values_list("category", flat=True))
    )


def pending_count(user: Any) -> int:
    """How many reviews wait for ``user`` (the header badge): a COUNT, not a fetch."""
    return _pending(user).count()


def waiting_totals() -> tuple[int, datetime | None]:
    """All reviews waiting now, for anyone, and when the oldest was asked (metrics)."""
    found = ReviewRequest.objects.filter(status=ReviewRequest.Status.PENDING).aggregate(
        n=Count("pk"), oldest=Min("created_at")
    )
    return int(found["n"]), found["oldest"]


def announce() -> None:
    """Tell every connected console that the queue changed (after the transaction)."""

    def send() -> None:
        try:
            group_send(REVIEWS_GROUP, {"type": "reviews.changed"})
        except Exception:  # badges catch up on the next change or page load
            log.warning("could not announce a review queue change", exc_info=True)

    transaction.on_commit(send)

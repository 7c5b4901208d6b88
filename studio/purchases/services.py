"""The requester's side of purchases: new requests, my requests, change a request.

The only module of ``studio.purchases`` that touches the ORM and the run queue.
The requester is always the signed-in user who queues the run (the worker
passes the run's user to the graph); ``request_id`` and ``approval_version``
are chosen here, never taken from the form.

"My requests" is built from studio rows only (``Thread``, ``Run``,
``ReviewRequest``, ``ApprovalDecision``, ``PurchaseOutbox``), never from
checkpoints: ``studio.reviews.queue.sync`` keeps ``ReviewRequest`` in step with
the graph after every run.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from studio.demo_graphs.purchase import PurchaseRequest
from studio.errors import Conflict, Forbidden, InvalidInput, NotFound
from studio.models import ApprovalDecision, PurchaseOutbox, ReviewRequest, Run, Thread
from studio.purchases.forms import BoundPurchase, PurchaseDraft, cny_text
from studio.reviews import audit
from studio.services.access import writable_thread
from studio.services.runs import ACTIVE, start_run, wake_workers

__all__ = (
    "LIMIT",
    "ChangeTarget",
    "DecisionRow",
    "RequestRow",
    "Status",
    "change_form_initial",
    "change_request",
    "my_requests",
    "new_request",
    "purchase_graph",
)

LIMIT = 100
""""My requests" shows the newest this many."""
FAILED_RUNS = (Run.Status.ERROR, Run.Status.TIMEOUT)


class Status:
    """A request's state, for people."""

    WAITING = "waiting for review"
    WAITING_SENIOR = "waiting for senior review"
    EXECUTING = "approved, executing"
    EXECUTED = "executed"
    REJECTED = "rejected"
    FAILED = "failed"
    RUNNING = "running"


_BADGES = {
    Status.WAITING: "interrupted",
    Status.WAITING_SENIOR: "interrupted",
    Status.EXECUTING: "running",
    Status.RUNNING: "running",
    Status.EXECUTED: "done",
    Status.REJECTED: "failed",
    Status.FAILED: "failed",
}


def purchase_graph() -> str:
    """The registered name of the purchase graph (``STUDIO_PURCHASE_GRAPH``)."""
    return str(getattr(settings, "STUDIO_PURCHASE_GRAPH", "purchase"))


def _money(minor: int) -> str:
    return f"{minor / 100:,.2f} CNY"


# -- rows ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecisionRow:
    reviewer: str
    level: int
    action: str
    reason: str
    approval_version: int
    decided_at: datetime


@dataclass(frozen=True, slots=True)
class RequestRow:
    """One of my requests, at its current version."""

    thread_id: str
    request_id: str
    approval_version: int
    amount_minor: int
    vendor: str
    category: str
    reason: str
    status: str
    outcome: str
    """A sentence for people: what happened (empty while nothing did)."""
    created_at: datetime
    decisions: tuple[DecisionRow, ...] = ()

    @property
    def amount(self) -> str:
        return _money(self.amount_minor)

    @property
    def badge(self) -> str:
        return _BADGES.get(self.status, "")

    @property
    def can_change(self) -> bool:
        return self.status not in (Status.EXECUTED, Status.EXECUTING, Status.RUNNING)


@dataclass(frozen=True, slots=True)
class ChangeTarget:
    """The request a change form edits, and the values that prefill it."""

    thread_id: str
    request_id: str
    approval_version: int
    initial: dict[str, str] = field(default_factory=dict)

    @property
    def next_version(self) -> int:
        return self.approval_version + 1


# -- new request ---------------------------------------------------------------------


def new_request(user: Any, form: BoundPurchase) -> Run:
    """Queue version 1 of a new request with a fresh server-side ``request_id``.

    Raises:
        InvalidInput: the form is not valid (the view shows its errors instead).
    """
    draft = _draft(form)
    request_id = _fresh_request_id()
    graph_input = _checked_input(draft, request_id, 1)
    with transaction.atomic():
        run = start_run(
            graph=purchase_graph(),
            user=user,
            input=graph_input,
            thread_metadata={"request_id": request_id, "kind": "purchase"},
        )
        audit.record(
            user,
            "purchase.requested",
            thread_id=run.thread_id,
            request_id=request_id,
            approval_version=1,
            amount_minor=draft.amount_minor,
            run_id=run.run_id,
        )
    wake_workers()  # start_run woke them before our transaction committed
    return run


def _fresh_request_id() -> str:
    for _ in range(20):
        candidate = f"PO-{secrets.token_hex(4).upper()}"
        used = (
            Thread.objects.filter(metadata__request_id=candidate).exists()
            or ReviewRequest.objects.filter(request_id=candidate).exists()
            or PurchaseOutbox.objects.filter(request_id=candidate).exists()
            or ApprovalDecision.objects.filter(request_id=candidate).exists()
        )
        if not used:
            return candidate
    raise Conflict("Could not find an unused request id; please try again.")


def _draft(form: BoundPurchase) -> PurchaseDraft:
    if form.draft is None:
        raise InvalidInput("The purchase request form has errors.")
    return form.draft


def _checked_input(
    draft: PurchaseDraft, request_id: str, approval_version: int
) -> dict[str, Any]:
    """The graph input, checked by the graph's own schema (the form already did)."""
    graph_input = draft.graph_input(request_id, approval_version)
    PurchaseRequest.model_validate(graph_input)  # ValidationError -> 422 (middleware)
    return graph_input


# -- my requests ---------------------------------------------------------------------


def my_requests(user: Any) -> list[RequestRow]:
    """The user's own purchase requests, newest first (at most :data:`LIMIT`)."""
    if not getattr(user, "is_authenticated", False):
        return []
    threads = list(
        Thread.objects.filter(owner_id=user.pk, graph=purchase_graph()).order_by(
            "-created_at", "-thread_id"
        )[:LIMIT]
    )
    ids = [t.pk for t in threads]
    reviews: dict[str, list[ReviewRequest]] = defaultdict(list)
    for review in ReviewRequest.objects.filter(thread_id__in=ids):
        reviews[review.thread_id].append(review)
    decisions: dict[str, list[ApprovalDecision]] = defaultdict(list)
    for decision in (
        ApprovalDecision.objects.filter(thread_id__in=ids)
        .select_related("reviewer")
        .order_by("approval_version", "level", "decided_at")
    ):
        decisions[decision.thread_id].append(decision)
    runs: dict[str, list[Run]] = defaultdict(list)
    for run in (
        Run.objects.filter(thread_id__in=ids)
        .only("run_id", "thread_id", "status", "input", "error", "created_at")
        .order_by("-created_at", "-run_id")
    ):
        runs[run.thread_id].append(run)
    bought = set(
        PurchaseOutbox.objects.filter(thread_id__in=ids).values_list(
            "thread_id", flat=True
        )
    )
    return [
        _row(
            thread,
            reviews[thread.pk],
            decisions[thread.pk],
            runs[thread.pk],
            thread.pk in bought,
        )
        for thread in threads
    ]


@dataclass(frozen=True, slots=True)
class _Current:
    """A thread's current request: its newest version, from the rows we keep."""

    request_id: str
    approval_version: int
    review: ReviewRequest | None
    values: dict[str, Any]


def _submitted(runs: Iterable[Run]) -> list[dict[str, Any]]:
    """The request inputs runs were queued with, newest first."""
    return [
        run.input
        for run in runs
        if isinstance(run.input, dict)
        and isinstance(run.input.get("approval_version"), int)
    ]


def _current(
    thread: Thread, reviews: Sequence[ReviewRequest], runs: Sequence[Run]
) -> _Current:
    inputs = _submitted(runs)
    version = max(
        [r.approval_version for r in reviews]
        + [int(i["approval_version"]) for i in inputs],
        default=1,
    )
    review = next((r for r in reviews if r.approval_version == version), None)
    submitted = next((i for i in inputs if i["approval_version"] == version), None)
    if review is not None:
        payload = review.payload or {}
        values = {
            "amount_minor": review.amount_minor,
            "vendor": review.vendor,
            "category": review.category,
            "reason": payload.get("reason", (submitted or {}).get("reason", "")),
            "items": payload.get("items", (submitted or {}).get("items", [])),
        }
    else:
        values = dict(submitted or {})
    request_id = str(
        (thread.metadata or {}).get("request_id")
        or (review.request_id if review is not None else "")
        or (submitted or {}).get("request_id", "")
    )
    return _Current(request_id, version, review, values)


def _row(
    thread: Thread,
    reviews: Sequence[ReviewRequest],
    decisions: Sequence[ApprovalDecision],
    runs: Sequence[Run],
    bought: bool,
) -> RequestRow:
    current = _current(thread, reviews, runs)
    status, outcome = _status(current, decisions, runs, bought)
    amount = current.values.get("amount_minor")
    return RequestRow(
        thread_id=thread.thread_id,
        request_id=current.request_id,
        approval_version=current.approval_version,
        amount_minor=amount if isinstance(amount, int) else 0,
        vendor=str(current.values.get("vendor") or ""),
        category=str(current.values.get("category") or ""),
        reason=str(current.values.get("reason") or ""),
        status=status,
        outcome=outcome,
        created_at=thread.created_at,
        decisions=tuple(
            DecisionRow(
                reviewer=d.reviewer.get_username(),
                level=d.level,
                action=d.action,
                reason=d.reason,
                approval_version=d.approval_version,
                decided_at=d.decided_at,
            )
            for d in decisions
        ),
    )


def _status(
    current: _Current,
    decisions: Sequence[ApprovalDecision],
    runs: Sequence[Run],
    bought: bool,
) -> tuple[str, str]:
    """(status, outcome sentence) of the current version."""
    review = current.review
    outcome = review.outcome_text if review is not None else ""
    if bought or (review is not None and review.outcome == "executed"):
        return Status.EXECUTED, outcome
    this_version = [
        d
        for d in decisions
        if (d.request_id, d.approval_version)
        == (current.request_id, current.approval_version)
    ]
    rejected = any(d.action == "reject" for d in this_version)
    approved = (
        review is not None
        and not rejected
        and len(this_version) >= max(review.levels_required, 1)
    )
    if any(run.status in ACTIVE for run in runs):
        return (Status.EXECUTING if approved else Status.RUNNING), ""
    latest = runs[0] if runs else None
    if latest is not None and latest.status in FAILED_RUNS:
        error = latest.error or {}
        return Status.FAILED, str(error.get("message") or "The run failed.")
    if review is None:
        return Status.RUNNING, ""
    if review.outcome == "rejected" or rejected:
        return Status.REJECTED, outcome
    if review.status == ReviewRequest.Status.PENDING:
        senior = review.level >= 2
        return (Status.WAITING_SENIOR if senior else Status.WAITING), ""
    if approved:
        return Status.EXECUTING, ""
    return Status.RUNNING, ""


# -- change a request ----------------------------------------------------------------


def _own_purchase(user: Any, thread_id: str) -> Thread:
    """The thread, if it is one of ``user``'s own purchase requests.

    Raises:
        ThreadNotFound: not visible to the user (404, as for any thread).
        Forbidden: visible (a reviewer, a superuser) but not the requester's.
        NotFound: a thread of another graph.
    """
    thread = writable_thread(user, thread_id)
    if thread.graph != purchase_graph():
        raise NotFound(f"Thread {thread_id!r} is not a purchase request.")
    if thread.owner_id != user.pk:
        raise Forbidden("Only the requester can change a purchase request.")
    return thread


def _changeable(thread: Thread) -> _Current:
    """The thread's current request, if it may get a new version; else Conflict."""
    reviews = list(ReviewRequest.objects.filter(thread=thread))
    runs = list(
        Run.objects.filter(thread=thread)
        .only("run_id", "thread_id", "status", "input", "created_at")
        .order_by("-created_at", "-run_id")
    )
    current = _current(thread, reviews, runs)
    if not current.request_id:
        raise Conflict("This thread has no purchase request to change.")
    executed = any(r.outcome == "executed" for r in reviews) or (
        PurchaseOutbox.objects.filter(request_id=current.request_id).exists()
    )
    if executed:
        raise Conflict(
            f"{current.request_id} was already executed: it cannot be changed. "
            "Start a new purchase request instead."
        )
    if any(run.status in ACTIVE for run in runs):
        raise Conflict(
            f"{current.request_id} is running right now. Wait until it waits for "
            "review or has finished, then change it."
        )
    return current


def change_form_initial(user: Any, thread_id: str) -> ChangeTarget:
    """The current request of one of ``user``'s threads, to prefill the change form.

    Raises:
        ThreadNotFound / Forbidden / NotFound: see :func:`_own_purchase`.
        Conflict: already executed, or running.
    """
    thread = _own_purchase(user, thread_id)
    current = _changeable(thread)
    values = current.values
    initial: dict[str, str] = {
        "vendor": str(values.get("vendor") or ""),
        "category": str(values.get("category") or ""),
        "reason": str(values.get("reason") or ""),
    }
    amount = values.get("amount_minor")
    if isinstance(amount, int):
        initial["amount"] = cny_text(amount)
    items = values.get("items")
    for index, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict):
            continue
        initial[f"items-{index}-sku"] = str(item.get("sku", ""))
        initial[f"items-{index}-qty"] = str(item.get("qty", ""))
        price = item.get("unit_price_minor")
        initial[f"items-{index}-unit_price"] = (
            cny_text(price) if isinstance(price, int) else ""
        )
    return ChangeTarget(
        thread_id=thread.thread_id,
        request_id=current.request_id,
        approval_version=current.approval_version,
        initial=initial,
    )


def change_request(user: Any, thread_id: str, form: BoundPurchase) -> Run:
    """Queue the next version of one of ``user``'s requests, on the same thread.

    The new version goes through the checks and the review again; an approval
    of an older version never buys it (the ledger binds version and amount).

    Raises:
        InvalidInput: the form is not valid.
        ThreadNotFound (404) / Forbidden (403) / NotFound: not the user's request.
        Conflict (409): already executed, or a run of the thread is pending/running.
    """
    draft = _draft(form)
    thread = _own_purchase(user, thread_id)
    with transaction.atomic():
        # Lock the thread: two changes at once get two different versions, or one 409.
        Thread.objects.select_for_update().filter(pk=thread.pk).first()
        current = _changeable(thread)
        version = current.approval_version + 1
        graph_input = _checked_input(draft, current.request_id, version)
        run = start_run(
            graph=thread.graph,
            user=user,
            input=graph_input,
            thread_id=thread.thread_id,
            strategy=Run.Strategy.REJECT,
        )
        audit.record(
            user,
            "purchase.changed",
            thread_id=thread.thread_id,
            request_id=current.request_id,
            approval_version=version,
            previous_version=current.approval_version,
            amount_minor=draft.amount_minor,
            run_id=run.run_id,
        )
    wake_workers()  # start_run woke them before our transaction committed
    return run

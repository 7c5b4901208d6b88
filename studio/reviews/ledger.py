"""The decision ledger, and the one purchaser that trusts it.

The side effect behind an approval trusts this table, never the graph's state:
:func:`purchase_once` runs in the transaction that writes the outbox row, and
buys only when, for this thread, ``request_id`` and ``approval_version``:

- no reviewer rejected it;
- every level the amount needs has an approving row, for this exact amount and
  the same vendor, category, items and requester the reviewer was shown;
- each approver is (still) an active member of the level's group, is not the
  requester, and the two levels were decided by two different people;
- the hard checks (budget, compliance), re-run by the graph on the request in
  the checkpoint, pass.

Otherwise it records a refusal in the audit log and buys nothing. The outbox row
is keyed by ``request_id``, so a retry or a replay never buys twice.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from studio.models import ApprovalDecision, PurchaseOutbox, Thread
from studio.reviews import audit
from studio.services.access import REVIEWER_GROUPS

__all__ = ("SEEN_FIELDS", "approval_problems", "purchase_once")

SEEN_FIELDS = ("vendor", "category", "items", "requester")
"""Request fields an approval binds besides the amount: a change of any is a new request."""


def _money(minor: int) -> str:
    return f"{minor / 100:,.2f} CNY"


def approval_problems(order: dict[str, Any]) -> list[str]:
    """Why the ledger does not allow ``order`` (empty when it does)."""
    rid, version = order["request_id"], order["approval_version"]
    thread_id = order.get("thread_id", "")
    rows = list(
        ApprovalDecision.objects.select_for_update()
        .filter(thread_id=thread_id, request_id=rid, approval_version=version)
        .select_related("reviewer")
        .order_by("level")
    )
    for row in rows:
        if row.action == "reject":
            return [
                f"{row.reviewer.get_username()} rejected {rid} v{version} at level {row.level}"
            ]
    owner_id = (
        Thread.objects.filter(pk=thread_id).values_list("owner_id", flat=True).first()
    )
    requester = str(order.get("requester", ""))
    needed = int(order.get("levels_required", 1))
    problems: list[str] = []
    approvers: list[int] = []
    for level in range(1, needed + 1):
        approval = next(
            (r for r in rows if r.level == level and r.action == "approve"), None
        )
        if approval is None:
            problems.append(
                f"no level-{level} approval of {rid} v{version} is in the ledger"
            )
            continue
        who = approval.reviewer
        if approval.amount_minor != order["amount_minor"]:
            problems.append(
                f"level {level} approved {_money(approval.amount_minor)}, not "
                f"{_money(order['amount_minor'])}"
            )
        changed = [
            k for k in SEEN_FIELDS if (approval.seen or {}).get(k) != order.get(k)
        ]
        if changed:
            problems.append(
                f"{', '.join(changed)} changed since level {level} was approved"
            )
        if (
            not who.is_active
            or not who.groups.filter(name=REVIEWER_GROUPS[level]).exists()
        ):
            problems.append(
                f"{who.get_username()} is not an active member of {REVIEWER_GROUPS[level]}"
            )
        if who.pk == owner_id or who.get_username() == requester:
            problems.append(
                f"{who.get_username()} requested {rid} and cannot approve it"
            )
        if who.pk in approvers:
            problems.append(f"{who.get_username()} approved more than one level")
        approvers.append(who.pk)
    return problems


def purchase_once(order: dict[str, Any]) -> dict[str, Any]:
    """Buy ``order`` if the ledger allows it, once per ``request_id``.

    Args:
        order: ``request_id``, ``approval_version``, ``amount_minor``, ``vendor``,
            ``category``, ``items``, ``requester``, ``thread_id``,
            ``levels_required`` and ``check_problems`` (the hard checks' failures,
            re-run by the graph; empty when they pass).

    Returns:
        ``{"purchase_id", "duplicate", "approved_by"}`` when bought (or bought
        before), ``{"refused": reason}`` when not.
    """
    rid, version = order["request_id"], order["approval_version"]
    base = {
        "thread_id": order.get("thread_id", ""),
        "request_id": rid,
    }
    with transaction.atomic():
        problems = list(order.get("check_problems") or []) + approval_problems(order)
        if problems:
            return _refused(order, "; ".join(problems))
        approved_by = list(
            ApprovalDecision.objects.filter(
                thread_id=base["thread_id"],
                request_id=rid,
                approval_version=version,
                action="approve",
            )
            .order_by("level")
            .values_list("reviewer__username", flat=True)
        )
        try:
            with transaction.atomic():
                row = PurchaseOutbox.objects.create(
                    request_id=rid,
                    approval_version=version,
                    amount_minor=order["amount_minor"],
                    vendor=order.get("vendor", ""),
                    thread_id=base["thread_id"],
                )
            duplicate = False
        except IntegrityError:
            row = PurchaseOutbox.objects.get(request_id=rid)
            if row.thread_id != base["thread_id"]:
                return _refused(
                    order, f"request id {rid} was already bought by another request"
                )
            PurchaseOutbox.objects.filter(pk=row.pk).update(
                executions=F("executions") + 1
            )
            duplicate = True
        audit.record(
            None,
            "purchase.repeated" if duplicate else "purchase.executed",
            **base,
            approval_version=version,
            amount_minor=order["amount_minor"],
            purchase_id=row.pk,
            approved_by=approved_by,
        )
    return {"purchase_id": row.pk, "duplicate": duplicate, "approved_by": approved_by}


def _refused(order: dict[str, Any], reason: str) -> dict[str, Any]:
    """Audit a refusal to buy ``order``; what the purchaser returns for it."""
    audit.record(
        None,
        "purchase.refused",
        thread_id=order.get("thread_id", ""),
        request_id=order["request_id"],
        approval_version=order["approval_version"],
        amount_minor=order["amount_minor"],
        reason=reason,
    )
    return {"refused": reason}

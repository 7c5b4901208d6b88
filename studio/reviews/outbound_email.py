"""The tool agent's email side effect, which trusts the decision ledger only.

``send_email`` (``studio/demo_graphs/tool_agent.py``) calls :func:`send_once` with the
call as the model made it. It sends (writes the :class:`~studio.models.OutboundEmail`
row a mail relay delivers) only when, in the same transaction, the ledger holds
an approving decision on this thread that names this exact tool call: its id,
its tool and its arguments, as the person who decided was shown them
(``ApprovalDecision.seen["tool_calls"]``), by the thread's owner, whose account
is still active. The state of the thread is never consulted: a fork, a state
edit or a command that makes the agent call the tool without that decision gets
a refusal (audited, nothing sent).

The outbox is keyed by ``(thread_id, tool_call_id)``: a retry or a replay of an
approved call answers "already sent" and sends nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from studio.models import ApprovalDecision, OutboundEmail, Thread
from studio.reviews import audit

__all__ = ("approved_call", "send_once")


def approved_call(
    thread_id: str, call: Mapping[str, Any]
) -> tuple[ApprovalDecision | None, str]:
    """The ledger row that allows ``call`` (``id``, ``name``, ``args``), or why none does.

    Call inside a transaction: the rows read are locked until it ends.
    """
    owner_id = (
        Thread.objects.filter(pk=thread_id).values_list("owner_id", flat=True).first()
    )
    rows = (
        ApprovalDecision.objects.select_for_update()
        .filter(thread_id=thread_id)
        .select_related("reviewer")
        .order_by("-decided_at", "-pk")  # the newest answer about the call counts
    )
    for row in rows:
        shown = _shown_call(row.seen, str(call.get("id", "")))
        if shown is None:
            continue
        who = row.reviewer.get_username()
        if row.action != "approve":
            return None, f"{who} rejected this call"
        if shown.get("name") != call.get("name") or shown.get("args") != call.get(
            "args"
        ):
            return None, (
                "the call differs from the one that was approved (tool or arguments "
                "changed)"
            )
        if owner_id is None or row.reviewer_id != owner_id:
            return None, f"{who} does not own this thread, so cannot approve its calls"
        if not row.reviewer.is_active:
            return None, f"{who}'s account is no longer active"
        return row, ""
    return None, "no approval of this call is in the ledger"


def _shown_call(seen: Any, call_id: str) -> dict[str, Any] | None:
    calls = seen.get("tool_calls") if isinstance(seen, dict) else None
    for shown in calls if isinstance(calls, list) else ():
        if isinstance(shown, dict) and call_id and shown.get("id") == call_id:
            return shown
    return None


def send_once(email: Mapping[str, Any]) -> dict[str, Any]:
    """Send the email of an approved tool call, once per ``(thread_id, tool_call_id)``.

    Args:
        email: ``thread_id``, ``tool_call_id``, ``tool`` (the tool's name) and the
            call's arguments ``to``, ``subject``, ``body``.

    Returns:
        ``{"email_id", "duplicate", "approved_by"}`` when sent (or sent before),
        ``{"refused": reason}`` when the ledger does not allow it.
    """
    thread_id = str(email.get("thread_id", ""))
    call_id = str(email.get("tool_call_id", ""))
    args = {k: email.get(k) for k in ("to", "subject", "body")}
    call = {"id": call_id, "name": email.get("tool"), "args": args}
    with transaction.atomic():
        decision, problem = approved_call(thread_id, call)
        if decision is None:
            audit.record(
                None,
                "email.refused",
                thread_id=thread_id,
                tool_call_id=call_id,
                to=str(args["to"]),
                reason=problem,
            )
            return {"refused": problem}
        try:
            with transaction.atomic():
                row = OutboundEmail.objects.create(
                    thread_id=thread_id,
                    tool_call_id=call_id,
                    decision=decision,
                    to=str(args["to"]),
                    subject=str(args["subject"]),
                    body=str(args["body"]),
                )
            duplicate = False
        except IntegrityError:
            row = OutboundEmail.objects.get(thread_id=thread_id, tool_call_id=call_id)
            OutboundEmail.objects.filter(pk=row.pk).update(
                executions=F("executions") + 1
            )
            duplicate = True
        approver = decision.reviewer.get_username()
        audit.record(
            None,
            "email.repeated" if duplicate else "email.sent",
            thread_id=thread_id,
            tool_call_id=call_id,
            to=row.to,
            email_id=row.pk,
            decision_id=decision.decision_id,
            approved_by=approver,
        )
    return {"email_id": row.pk, "duplicate": duplicate, "approved_by": approver}

"""The decision protocol: the one way a governed interrupt is answered.

The reviewer page (``POST /reviews/<thread_id>/``) and the JSON address
(``POST /api/reviews/<thread_id>/decision``) both call :func:`decide`:

1. the user must be allowed to see the thread (else 404, as for any thread);
2. the body is validated strictly (:class:`DecisionForm`: exactly
   ``request_id``, ``approval_version``, ``decision_id``, ``action``, ``reason``;
   a sent reviewer identity is refused: it comes from the session or token);
3. the same ``decision_id`` again returns the first outcome and changes nothing;
4. in one transaction, with the thread locked: the waiting console interrupt is
   read from the checkpoint and the decision is bound to its ``request_id`` and
   ``approval_version`` (stale or other: refused); the level waiting is the one
   after the approvals already recorded; the user must hold that level's group,
   must not be the requester, and must not have decided another level (on a
   graph whose questions its owner answers, ``Governance.answered_by ==
   "owner"``: the user must be the thread's owner, one level); the
   ``ApprovalDecision`` row is written under its unique constraint (two
   reviewers at once: exactly one wins); when the decision is final (a
   rejection, or the last level's approval) the resume run is queued;
5. every decision and every refusal is audited.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from django.db import IntegrityError, transaction
from pydantic import Field, ValidationError, field_validator

from engine.testing import fault_point
from studio.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    StudioError,
    ThreadNotFound,
)
from studio.forms import StrictForm
from studio.json_input import WHOLE_NUMBER
from studio.middleware import present_validation
from studio.models import ApprovalDecision, ReviewRequest, Run, Thread
from studio.reviews import audit
from studio.reviews.governance import Governance, governance_for
from studio.reviews.queue import WaitingReview, announce, waiting_review
from studio.services.access import REVIEWER_GROUPS, can_see, review_levels
from studio.services.runs import ACTIVE, start_run

__all__ = (
    "SERVER_SET_FIELDS",
    "DecisionForm",
    "DecisionOutcome",
    "decide",
    "decisions_of",
)

SERVER_SET_FIELDS = ("reviewer", "reviewer_id", "reviewer_name", "requester", "level")
"""Fields a client may not send: the server sets them from the session or token."""

_DECISION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class DecisionForm(StrictForm):
    """A reviewer's answer, as posted (strict: ``"1"`` is not an int in JSON)."""

    request_id: str = Field(min_length=1, max_length=128)
    approval_version: Annotated[int, Field(ge=1, le=2**31 - 1), WHOLE_NUMBER]
    decision_id: str = Field(min_length=1, max_length=64)
    action: Literal["approve", "reject"]
    reason: str = Field(default="", max_length=2000)

    @field_validator("decision_id")
    @classmethod
    def _decision_id_shape(cls, value: str) -> str:
        if not _DECISION_ID.match(value):
            raise ValueError("use letters, digits and . _ : - only (at most 64)")
        return value


@dataclass(frozen=True, slots=True)
class DecisionOutcome:
    """What happened to a decision (the same for a repeated ``decision_id``)."""

    decision_id: str
    thread_id: str
    request_id: str
    approval_version: int
    level: int
    levels_required: int
    action: str
    reviewer: str
    decided_at: datetime
    run_id: str
    duplicate: bool
    answered_by: str = "reviewers"

    @property
    def final(self) -> bool:
        return self.action == "reject" or self.level >= self.levels_required

    @property
    def message(self) -> str:
        if self.answered_by == "owner":
            text = (
                "Approved: the agent goes ahead."
                if self.action == "approve"
                else "Rejected: the agent is told why and does not do it."
            )
            return (
                "This answer was already recorded. " if self.duplicate else ""
            ) + text
        what = "Approved" if self.action == "approve" else "Rejected"
        text = (
            f"{what} {self.request_id} v{self.approval_version}"
            + (
                f" at level {self.level} of {self.levels_required}"
                if self.levels_required > 1
                else ""
            )
            + f" by {self.reviewer}."
        )
        if not self.final:
            text += " A senior reviewer must approve it too."
        elif self.run_id:
            text += " The purchase continues."
        if self.duplicate:
            text = "This decision was already recorded: " + text
        return text

    def as_json(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id,
            "thread_id": self.thread_id,
            "request_id": self.request_id,
            "approval_version": self.approval_version,
            "level": self.level,
            "levels_required": self.levels_required,
            "action": self.action,
            "reviewer": self.reviewer,
            "decided_at": self.decided_at.isoformat(),
            "run_id": self.run_id or None,
            "final": self.final,
            "duplicate": self.duplicate,
            "message": self.message,
        }


def decide(
    user: Any, thread_id: str, data: Mapping[str, Any], *, strings: bool
) -> DecisionOutcome:
    """Record ``user``'s decision on the thread's waiting review (see the module doc).

    Args:
        data: the posted fields.
        strings: form fields (``"1"`` read as an int) rather than a JSON object.

    Raises:
        ThreadNotFound / NotFound (404), InvalidInput (422), Forbidden (403),
        Conflict (409). Every refusal is audited; nothing else changes.
    """
    thread = Thread.objects.filter(pk=thread_id).first()
    try:
        return _decide(user, thread, thread_id, data, strings=strings)
    except StudioError as exc:
        if thread is not None and getattr(user, "is_authenticated", False):
            audit.record_refusal(
                user,
                thread,
                "review.decision",
                exc.message,
                status=exc.http_status,
                sent=_sent(data),
            )
        raise


def _decide(
    user: Any,
    thread: Thread | None,
    thread_id: str,
    data: Mapping[str, Any],
    *,
    strings: bool,
) -> DecisionOutcome:
    if thread is None or not can_see(user, thread):
        raise ThreadNotFound(f"There is no thread {thread_id!r}.", thread_id=thread_id)
    governance = governance_for(thread.graph)
    if governance is None:
        raise NotFound(f"Thread {thread_id!r} has nothing for a reviewer to decide.")
    form = _parse(data, strings=strings)
    earlier = ApprovalDecision.objects.filter(decision_id=form.decision_id).first()
    if earlier is not None:
        return _replayed(earlier, user, thread, form, governance)
    try:
        with transaction.atomic():
            outcome = _record(user, thread, governance, form)
    except IntegrityError:
        earlier = ApprovalDecision.objects.filter(decision_id=form.decision_id).first()
        if earlier is not None:
            return _replayed(earlier, user, thread, form, governance)
        winner = (
            ApprovalDecision.objects.filter(
                request_id=form.request_id, approval_version=form.approval_version
            )
            .select_related("reviewer")
            .order_by("-level")
            .first()
        )
        raise Conflict(
            _decided_message(winner)
            if winner
            else "Another decision was recorded first."
        ) from None
    announce()
    return outcome


def _parse(data: Mapping[str, Any], *, strings: bool) -> DecisionForm:
    if not isinstance(data, Mapping):
        raise InvalidInput("Send a JSON object.")
    sent = [k for k in SERVER_SET_FIELDS if k in data]
    if sent:
        raise InvalidInput(
            f"{', '.join(sent)}: set by the server from your session or token; do not "
            "send it."
        )
    try:
        form = (
            DecisionForm.from_data(data)
            if strings
            else DecisionForm.model_validate(dict(data))
        )
    except ValidationError as exc:
        raise InvalidInput(present_validation(exc)) from exc
    if form.action == "reject" and not form.reason.strip():
        raise InvalidInput("reason: say why you reject (it is passed on and kept).")
    return form


def _record(
    user: Any, thread: Thread, governance: Governance, form: DecisionForm
) -> DecisionOutcome:
    Thread.objects.select_for_update().filter(pk=thread.pk).first()
    earlier = list(
        ApprovalDecision.objects.filter(
            request_id=form.request_id, approval_version=form.approval_version
        )
        .select_related("reviewer")
        .order_by("level")
    )
    done = next((d for d in earlier if d.action == "reject"), None)
    if (
        done is None
        and earlier
        and len(earlier) >= governance.levels_for(earlier[0].amount_minor)
    ):
        done = earlier[-1]
    if done is not None:  # say who decided, even while the resume still runs
        raise Conflict(_decided_message(done))
    if Run.objects.filter(thread=thread, status__in=ACTIVE).exists():
        raise Conflict(
            "This request is running right now (it was changed or is being resumed). "
            "Reload the page when it waits for review again."
        )
    waiting = waiting_review(thread, governance)
    if waiting is None:
        if earlier:
            raise Conflict(_decided_message(earlier[-1]))
        raise Conflict("Nothing waits for a decision on this thread.")
    if (form.request_id, form.approval_version) != (
        waiting.request_id,
        waiting.approval_version,
    ):
        raise Conflict(
            f"This review is for {waiting.request_id} v{waiting.approval_version}; your "
            f"decision was for {form.request_id} v{form.approval_version} (a stale page or "
            "another request). Nothing was changed: reload the page and decide again."
        )
    required = governance.levels_for(waiting.amount_minor)
    rejected = next((d for d in earlier if d.action == "reject"), None)
    if rejected is not None or len(earlier) >= required:
        raise Conflict(_decided_message(rejected or earlier[-1]))
    level = len(earlier) + 1
    if governance.answered_by == "owner":
        _check_owner(user, thread)
    else:
        _check_reviewer(user, thread, waiting, level, earlier)
    decision = ApprovalDecision.objects.create(
        decision_id=form.decision_id,
        thread=thread,
        request_id=form.request_id,
        approval_version=form.approval_version,
        level=level,
        action=form.action,
        reason=form.reason.strip(),
        amount_minor=waiting.amount_minor,
        reviewer=user,
        seen=waiting.payload,
        seen_hash=audit.payload_hash(waiting.payload),
    )
    fault_point("after_decision_before_resume", thread.graph)
    final = form.action == "reject" or level >= required
    run_id = ""
    if final:
        run = start_run(
            graph=thread.graph,
            user=user,
            thread_id=thread.thread_id,
            command={
                "resume": governance.resume_for(
                    _decision_fields(decision, user), waiting.payload
                )
            },
            strategy=Run.Strategy.REJECT,
            governed_resume=True,
        )
        run_id = run.run_id
        ApprovalDecision.objects.filter(pk=decision.pk).update(run_id=run_id)
        decision.run_id = run_id
    ReviewRequest.objects.filter(
        thread=thread,
        request_id=form.request_id,
        approval_version=form.approval_version,
    ).update(
        status=ReviewRequest.Status.DECIDED if final else ReviewRequest.Status.PENDING,
        level=level if final else level + 1,
        levels_required=required,
    )
    audit.record(
        user,
        f"review.{'approved' if form.action == 'approve' else 'rejected'}",
        thread_id=thread.thread_id,
        request_id=form.request_id,
        approval_version=form.approval_version,
        level=level,
        levels_required=required,
        choice=form.action,
        reason=decision.reason,
        decision_id=form.decision_id,
        seen_hash=decision.seen_hash,
        seen=waiting.payload,
        run_id=run_id,
    )
    return _outcome(decision, required, duplicate=False, governance=governance)


def _check_owner(user: Any, thread: Thread) -> None:
    """Only the thread's owner answers its agent's questions (the agent acts in
    their name); a superuser who may read the thread does not speak for them."""
    if thread.owner_id is None or thread.owner_id != user.pk:
        raise Forbidden(
            "Only the owner of this thread answers its agent's questions: the agent "
            "acts in their name."
        )


def _check_reviewer(
    user: Any,
    thread: Thread,
    waiting: WaitingReview,
    level: int,
    earlier: list[ApprovalDecision],
) -> None:
    if (
        thread.owner_id == user.pk
        or waiting.payload.get("requester") == user.get_username()
    ):
        raise Forbidden(
            "You requested this purchase, so someone else must decide it "
            "(segregation of duties)."
        )
    if level not in review_levels(user):
        group = REVIEWER_GROUPS[level]
        raise Forbidden(
            f"Level {level} of this review is decided by members of {group!r}; you are not one."
        )
    if any(d.reviewer_id == user.pk for d in earlier):
        raise Forbidden(
            "You already decided another level of this request; a different reviewer "
            "must decide this one."
        )


def _decision_fields(decision: ApprovalDecision, user: Any) -> dict[str, Any]:
    """The decision as ``Governance.resume_for`` reads it."""
    return {
        "request_id": decision.request_id,
        "approval_version": decision.approval_version,
        "decision_id": decision.decision_id,
        "action": decision.action,
        "reason": decision.reason,
        "reviewer": user.get_username(),
    }


def _replayed(
    earlier: ApprovalDecision,
    user: Any,
    thread: Thread,
    form: DecisionForm,
    governance: Governance,
) -> DecisionOutcome:
    same = (
        earlier.reviewer_id == user.pk
        and earlier.thread_id == thread.pk
        and earlier.request_id == form.request_id
        and earlier.approval_version == form.approval_version
        and earlier.action == form.action
    )
    if not same:
        raise Conflict(
            f"decision_id {form.decision_id!r} was already used for another decision. "
            "Reload the page to get a fresh form."
        )
    return _outcome(
        earlier,
        governance.levels_for(earlier.amount_minor),
        duplicate=True,
        governance=governance,
    )


def _outcome(
    decision: ApprovalDecision,
    required: int,
    *,
    duplicate: bool,
    governance: Governance,
) -> DecisionOutcome:
    return DecisionOutcome(
        decision_id=decision.decision_id,
        thread_id=decision.thread_id,
        request_id=decision.request_id,
        approval_version=decision.approval_version,
        level=decision.level,
        levels_required=required,
        action=decision.action,
        reviewer=decision.reviewer.get_username(),
        decided_at=decision.decided_at,
        run_id=decision.run_id,
        duplicate=duplicate,
        answered_by=governance.answered_by,
    )


def _decided_message(decision: ApprovalDecision) -> str:
    verb = "approved" if decision.action == "approve" else "rejected"
    return (
        f"{decision.request_id} v{decision.approval_version} was already {verb} at "
        f"level {decision.level} by {decision.reviewer.get_username()} on "
        f"{decision.decided_at:%Y-%m-%d %H:%M} UTC."
    )


def _sent(data: Mapping[str, Any]) -> dict[str, str]:
    try:
        return {
            str(k)[:64]: str(v)[:200]
            for k, v in dict(data).items()
            if k != "csrfmiddlewaretoken"
        }
    except (TypeError, ValueError):
        return {}


def decisions_of(thread: Thread) -> list[ApprovalDecision]:
    """Every decision on the thread, every version, oldest first."""
    return list(
        ApprovalDecision.objects.filter(thread=thread)
        .select_related("reviewer")
        .order_by("approval_version", "level")
    )

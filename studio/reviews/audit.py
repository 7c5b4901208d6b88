"""The audit log of the reviewer console: append, filter, export.

Every decision, every refusal (decision protocol, governed state writes, the
side effect's ledger check) and every purchase is one ``AuditEntry`` row.
Rows are append-only (``studio.models.AuditEntry``). Each row keeps who (the
actor, and their username in ``detail`` should the account go), when, what they
were shown (``seen_hash``: SHA-256 of the canonical JSON of the payload, and the
projection itself), what they chose, and the resulting run and purchase.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, cast

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet
from django.utils import timezone

from studio.errors import InvalidInput
from studio.models import AuditEntry, Thread

__all__ = (
    "CONSOLE_ACTIONS",
    "AuditFilters",
    "AuditRow",
    "audit_page",
    "csv_rows",
    "payload_hash",
    "record",
    "record_refusal",
)

CONSOLE_ACTIONS = ("review.", "purchase.", "governance.")
"""Action prefixes the console's audit page shows (time travel and cancels stay on the thread)."""


def payload_hash(payload: Any) -> str:
    """SHA-256 of the canonical JSON of what a reviewer was shown."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _actor(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


def record(
    user: Any,
    action: str,
    *,
    thread_id: str = "",
    request_id: str = "",
    **detail: Any,
) -> AuditEntry:
    """Append one entry; ``detail`` must be JSON."""
    actor = _actor(user)
    if actor is not None:
        detail.setdefault("actor_name", actor.get_username())
    return AuditEntry.objects.create(
        actor=actor,
        action=action,
        thread_id=thread_id,
        request_id=request_id,
        detail=detail,
    )


def record_refusal(
    user: Any, thread: Thread | None, what: str, reason: str, **detail: Any
) -> AuditEntry:
    """A refused attempt (``governance.refused`` / ``review.refused``) with its reason."""
    action = "review.refused" if what.startswith("review") else "governance.refused"
    return record(
        user,
        action,
        thread_id=thread.thread_id if thread is not None else "",
        request_id=str((thread.metadata or {}).get("request_id", "")) if thread else "",
        attempted=what,
        reason=reason,
        **_jsonable(detail),
    )


def _jsonable(detail: dict[str, Any]) -> dict[str, Any]:
    plain: dict[str, Any] = json.loads(json.dumps(detail, default=str))
    return plain


# -- reading --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditFilters:
    """The audit page's filters, parsed from its query string."""

    start: date | None = None
    end: date | None = None
    reviewer: str = ""
    request: str = ""

    @classmethod
    def parse(cls, query: Any) -> AuditFilters:
        """Raises InvalidInput for a date that is not YYYY-MM-DD."""
        return cls(
            start=_date(query.get("from", ""), "from"),
            end=_date(query.get("to", ""), "to"),
            reviewer=str(query.get("reviewer", "")).strip()[:150],
            request=str(query.get("request", "")).strip()[:128],
        )

    def as_query(self) -> dict[str, str]:
        return {
            "from": self.start.isoformat() if self.start else "",
            "to": self.end.isoformat() if self.end else "",
            "reviewer": self.reviewer,
            "request": self.request,
        }


def _date(text: str, name: str) -> date | None:
    text = str(text or "").strip()
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(
            f"{name}: expected a date as YYYY-MM-DD, got {text!r}."
        ) from exc


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One entry as the page and the CSV show it."""

    id: int
    at: datetime
    actor: str
    action: str
    request_id: str
    version: str
    level: str
    choice: str
    reason: str
    seen_hash: str
    thread_id: str
    run_id: str
    purchase_id: str
    decision_id: str

    @classmethod
    def of(cls, entry: AuditEntry) -> AuditRow:
        d = entry.detail or {}
        return cls(
            id=entry.pk,
            at=entry.created_at,
            actor=str(
                d.get("actor_name")
                or (entry.actor_id and f"user #{entry.actor_id}")
                or "system"
            ),
            action=entry.action,
            request_id=entry.request_id,
            version=str(d.get("approval_version", "")),
            level=str(d.get("level", "")),
            choice=str(d.get("choice", "")),
            reason=str(d.get("reason", "")),
            seen_hash=str(d.get("seen_hash", "")),
            thread_id=entry.thread_id,
            run_id=str(d.get("run_id", "")),
            purchase_id=str(d.get("purchase_id", "")),
            decision_id=str(d.get("decision_id", "")),
        )


CSV_HEADER = (
    "id", "at", "actor", "action", "request_id", "approval_version", "level",
    "choice", "reason", "seen_hash", "thread_id", "run_id", "purchase_id", "decision_id",
)  # fmt: skip


def _entries(filters: AuditFilters) -> QuerySet[AuditEntry]:
    prefix = Q()
    for p in CONSOLE_ACTIONS:
        prefix |= Q(action__startswith=p)
    entries = AuditEntry.objects.filter(prefix)
    tz = timezone.get_current_timezone()
    if filters.start:
        entries = entries.filter(
            created_at__gte=datetime.combine(filters.start, time.min, tzinfo=tz)
        )
    if filters.end:
        entries = entries.filter(
            created_at__lt=datetime.combine(
                filters.end + timedelta(days=1), time.min, tzinfo=tz
            )
        )
    if filters.reviewer:
        entries = entries.filter(
            Q(actor__username=filters.reviewer) | Q(detail__actor_name=filters.reviewer)
        )
    if filters.request:
        entries = entries.filter(request_id=filters.request)
    return entries.order_by("-created_at", "-id")


def audit_page(
    filters: AuditFilters, page: Any = 1, per_page: int = 50
) -> Page[AuditRow]:
    """Newest first, ``per_page`` rows a page."""
    paginator = Paginator(_entries(filters), per_page)
    result = paginator.get_page(page)
    rows = cast("Page[AuditRow]", result)  # the same page, its entries as rows
    rows.object_list = [AuditRow.of(e) for e in result.object_list]
    return rows


def csv_rows(filters: AuditFilters) -> Iterator[str]:
    """The filtered log as CSV lines (header first), for a streaming response.

    Cells that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``)
    are prefixed with ``'``: values such as a reason are typed by users.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(values: tuple[Any, ...]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([_cell(v) for v in values])
        return buffer.getvalue()

    yield line(CSV_HEADER)
    for entry in _entries(filters).iterator(chunk_size=500):
        r = AuditRow.of(entry)
        yield line(
            (r.id, r.at.isoformat(), r.actor, r.action, r.request_id, r.version, r.level,
             r.choice, r.reason, r.seen_hash, r.thread_id, r.run_id, r.purchase_id,
             r.decision_id)
        )  # fmt: skip


def _cell(value: Any) -> str:
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text

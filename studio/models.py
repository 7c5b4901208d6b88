"""Studio tables: threads, runs and their event log, API tokens, purchase decisions.

Checkpoints are not here: they live in the engine's checkpointer (SQLite file
embedded, Postgres scale-out). These tables are what the studio owns: who
started what, the run queue, the per-run event log the browser catches up
from, and the records a reviewer console must keep.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from typing import Any, cast

from django.conf import settings
from django.db import connections, models
from django.db.models import Q
from django.utils import timezone

__all__ = (
    "ApiToken",
    "AppendOnly",
    "ApprovalDecision",
    "AuditEntry",
    "OutboundEmail",
    "PurchaseOutbox",
    "ReviewRequest",
    "Run",
    "RunEvent",
    "Thread",
    "WorkerHeartbeat",
)


def new_id() -> str:
    return str(uuid.uuid4())


class Thread(models.Model):
    """A conversation/workflow instance of one graph; its history is in the checkpointer."""

    class Status(models.TextChoices):
        IDLE = "idle", "idle"
        BUSY = "busy", "running"
        INTERRUPTED = "interrupted", "interrupted"
        ERROR = "error", "failed"

    thread_id = models.CharField(primary_key=True, max_length=64, default=new_id)
    graph = models.CharField(max_length=64, db_index=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="studio_threads",
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.IDLE
    )
    has_state = models.BooleanField(default=False)
    """True once a run saved a checkpoint (an idle thread with state is "done")."""
    title = models.CharField(max_length=200, blank=True, default="")
    """What the thread is about, for people: set from the input when a run starts
    (``studio.titles``: the graph's ``THREAD_TITLE``, a first user message, or the
    input's first values); "" until a run gave it one."""
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    delete_after = models.DateTimeField(null=True, blank=True, db_index=True)
    """A temporary thread (a stateless API run's, ``on_completion="delete"``) is
    deleted, with its checkpoints, runs and events, from this time on
    (``studio.services.runs.sweep_temporary_threads``); null: kept."""

    class Meta:
        indexes = [
            models.Index(fields=["graph", "-updated_at"]),
            models.Index(fields=["owner", "-updated_at"]),
            models.Index(fields=["status", "-updated_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.graph}/{self.thread_id}"

    @property
    def display_status(self) -> str:
        """running / interrupted / done / failed / new (the threads list filter values)."""
        if self.status == self.Status.BUSY:
            return "running"
        if self.status == self.Status.INTERRUPTED:
            return "interrupted"
        if self.status == self.Status.ERROR:
            return "failed"
        return "done" if self.has_state else "new"


class Run(models.Model):
    """One queued execution of a graph on a thread, claimed by a worker."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCESS = "success"
        ERROR = "error"
        TIMEOUT = "timeout"
        CANCELLED = "interrupted", "cancelled"
        """Cancelled (``runs.cancel``, a rollback, a newer run's strategy). The stored
        value is the Agent Server protocol's name for it; a run that stops at
        ``interrupt()`` is ``SUCCESS`` (its thread becomes interrupted)."""

    class Strategy(models.TextChoices):
        REJECT = "reject"
        ENQUEUE = "enqueue"
        INTERRUPT = "interrupt"
        ROLLBACK = "rollback"

    run_id = models.CharField(primary_key=True, max_length=64, default=new_id)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="runs")
    graph = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    input = models.JSONField(null=True, blank=True)
    """The run's input (null to continue the thread, e.g. after a resume)."""
    command = models.JSONField(null=True, blank=True)
    """A ``Command`` as JSON: ``{"resume": ..., "update": ..., "goto": ...}``."""
    checkpoint_id = models.CharField(max_length=64, blank=True, default="")
    """Start from this checkpoint (replay / continue a fork) instead of the head."""
    config = models.JSONField(default=dict, blank=True)
    multitask_strategy = models.CharField(
        max_length=16, choices=Strategy.choices, default=Strategy.ENQUEUE
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="studio_runs",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    not_before = models.DateTimeField(default=timezone.now)
    """The run is not claimed before this time (``after_seconds``)."""
    updated_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=128, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    cancel_requested = models.CharField(max_length=16, blank=True, default="")
    """``interrupt`` or ``rollback`` when someone asked to stop the run."""
    error = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    """How the run ended: ``interrupted`` (stopped at an ``interrupt()``),
    ``checkpointed``, ``cancelled`` (the cancel action); for API runs also
    ``values``, the final state filtered by the output schema (what
    ``runs.wait`` / ``runs.join`` answer)."""
    assistant_id = models.CharField(max_length=64, blank=True, default="")
    """The Agent Server assistant id the run was started with (API runs)."""
    metadata = models.JSONField(default=dict, blank=True)
    """The run's metadata as the API client sent it."""
    trace_context = models.JSONField(default=dict, blank=True)
    """The W3C trace context (``traceparent``, ``tracestate``) of the request that
    queued the run: the worker's run span continues that trace (empty when
    tracing is off)."""
    kwargs = models.JSONField(default=dict, blank=True)
    """The Agent Server's ``kwargs`` of an API run: ``input``, ``command``,
    ``config``, ``context``, ``stream_mode``, ``interrupt_before``/``after``,
    ``subgraphs``, ``temporary``, ... (empty for runs the pages start)."""
    stream_modes = models.JSONField(default=list, blank=True)
    """The stream modes the worker records as ``stream`` events for SSE clients
    (API names: ``values``, ``updates``, ``messages-tuple``, ...); empty for runs
    the pages start, which then cost nothing extra."""
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    """The ``Idempotency-Key`` header of the API request that created the run (empty
    without one): the same key from the same user returns this run again."""
    request_hash = models.CharField(max_length=64, blank=True, default="")
    """SHA-256 of that request's path thread and body: a key sent again with another
    request is refused instead of answering with this run."""

    class Meta:
        indexes = [
            # The queue in claim order (``services.runs.claim``): a run's status,
            # then its age. The claim walks the pending ones oldest first until a
            # due run whose thread is free; no finished run is read on the way
            # (an index of all runs by ``created_at`` made Postgres read past
            # every finished run older than the queue: 14 ms a claim with
            # 100,000 of them). Not partial: a parameterized plan could not use it.
            models.Index(
                fields=["status", "created_at"], name="studio_run_queue_order"
            ),
            models.Index(fields=["thread", "-created_at"]),
        ]
        constraints = [
            # one writer per thread, kept by the database whatever a worker does:
            # a second claim on a thread with a running run fails here
            models.UniqueConstraint(
                fields=["thread"],
                condition=Q(status="running"),
                name="studio_run_one_running_per_thread",
            ),
            # one run per idempotency key and user, also for two requests at once
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="studio_run_idempotency_key_per_user",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status not in (self.Status.PENDING, self.Status.RUNNING)


def root_checkpoint_id(kind: str, payload: Any) -> str | None:
    """The checkpoint a root ``step`` or ``checkpoint`` event names (else None)."""
    if kind not in ("step", "checkpoint") or not isinstance(payload, dict):
        return None
    if payload.get("ns"):
        return None
    found = payload.get("checkpoint_id")
    return str(found) if found else None


def _fill_checkpoint_ids(rows: list[RunEvent]) -> None:
    """Set each row's :attr:`RunEvent.checkpoint_id` from its kind and payload, as
    ``RunEvent.save`` does, for the manager's inserts that do not call ``save``."""
    for row in rows:
        row.checkpoint_id = root_checkpoint_id(row.kind, row.payload)


class RunEventManager(models.Manager["RunEvent"]):
    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[RunEvent]:
        """As Django's, filling :attr:`RunEvent.checkpoint_id` (which ``save`` fills)."""
        rows = list(objs)
        _fill_checkpoint_ids(rows)
        return super().bulk_create(rows, *args, **kwargs)

    def create_while_held(self, rows: list[RunEvent], run_id: str, owner: str) -> bool:
        """Store ``rows`` (events of the run ``run_id``) only while ``owner`` holds
        that run (``running``, its lease owner), in one statement; False, with
        nothing stored, when it does not. Stored rows get their ids.

        The check is part of the insert: on Postgres it locks the run's row, so
        a takeover (the lease swept, another worker's claim) waits for the
        insert, and an insert that waited for a takeover finds the run no longer
        held (the row is checked again once the lock is granted); SQLite runs
        one writer at a time. What a row stores is what :meth:`bulk_create`
        stores (same fields, same JSON)."""
        if not rows:
            return True
        _fill_checkpoint_ids(rows)
        sql, params = _held_insert(self.db, rows, run_id, owner)
        with connections[self.db].cursor() as cursor:
            cursor.execute(sql, params)
            ids = sorted(row[0] for row in cursor.fetchall())
        if not ids:
            return False
        for row, pk in zip(rows, ids, strict=True):  # ids follow the rows' order
            row.pk = pk
            row._state.adding = False
            row._state.db = self.db
        return True


class RunEvent(models.Model):
    """One event of a run, in order; the browser catches up with ``?after=<id>``.

    ``kind`` is ``run.status``, ``task.start``, ``task.end``, ``step``,
    ``checkpoint``, ``interrupt`` or ``custom`` for the activity feed, or
    ``stream`` for a chunk of a stream mode an API client asked for
    (``{"event": "values" | "updates|<ns>" | ..., "data": ...}``, served as SSE
    and kept out of the HTML feed).
    """

    STREAM = "stream"

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32)
    payload = models.JSONField(default=dict)
    checkpoint_id = models.CharField(max_length=64, null=True, blank=True, default=None)
    """``payload["checkpoint_id"]`` of a root graph's ``step`` and ``checkpoint`` events
    (None for every other event): an old step's waterfall finds its events by index,
    not by reading JSON back from the end of the run's log."""
    created_at = models.DateTimeField(default=timezone.now)

    objects = RunEventManager()

    class Meta:
        indexes = [
            models.Index(fields=["thread", "id"]),
            models.Index(fields=["run", "id"]),
            models.Index(
                fields=["run", "checkpoint_id"], name="studio_runevent_run_ckpt"
            ),
            # Rare kinds looked up newest first (``services.activity``) or in order
            # (``services.transcript``): without these, finding the newest token
            # or status of a thread reads back through all its events (11 ms for
            # 40,000 on SQLite; a thread page looked it up on every render).
            # Partial: other events cost nothing more to insert.
            models.Index(
                fields=["thread", "id"],
                condition=models.Q(kind="token"),  # services.model_tokens.TOKEN
                name="studio_runevent_thread_token",
            ),
            models.Index(
                fields=["run", "id"],
                condition=models.Q(kind="token"),
                name="studio_runevent_run_token",
            ),
            models.Index(
                fields=["thread", "id"],
                condition=models.Q(kind="run.status"),
                name="studio_runevent_thread_status",
            ),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.checkpoint_id = root_checkpoint_id(self.kind, self.payload)
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"{self.kind} #{self.id}"


class ApiToken(models.Model):
    """A personal API token; only its SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="studio_tokens"
    )
    name = models.CharField(max_length=64, default="default")
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def issue(cls, user: Any, name: str = "default") -> tuple[ApiToken, str]:
        """Create a token; returns the row and the secret (shown once)."""
        secret = f"gs_{secrets.token_urlsafe(32)}"
        token = cls.objects.create(
            user=user, name=name, digest=cls.hash(secret), prefix=secret[:10]
        )
        return token, secret


class ReviewRequest(models.Model):
    """One version of a governed request as the reviewer console lists it.

    An index kept in step with the checkpoints by ``studio.reviews.queue.sync``
    after every run of a governed graph: the waiting interrupt in the
    checkpoint stays the truth (the decision protocol re-reads it), this row
    makes the queue one indexed query.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for a decision"
        DECIDED = "decided", "decided"
        SUPERSEDED = "superseded", "replaced by a newer version"
        CLOSED = "closed", "closed"

    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="review_requests"
    )
    graph = models.CharField(max_length=64)
    request_id = models.CharField(max_length=128)
    approval_version = models.PositiveIntegerField()
    amount_minor = models.BigIntegerField()
    currency = models.CharField(max_length=8, default="CNY")
    vendor = models.CharField(max_length=200, blank=True, default="")
    category = models.CharField(max_length=64, blank=True, default="")
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="studio_review_requests",
    )
    """The thread's owner: the user who started the run (never a payload field)."""
    payload = models.JSONField(default=dict)
    """The interrupt's value: what a reviewer is shown."""
    payload_hash = models.CharField(max_length=64)
    interrupt_id = models.CharField(max_length=64, blank=True, default="")
    levels_required = models.PositiveSmallIntegerField(default=1)
    level = models.PositiveSmallIntegerField(default=1)
    """The level waiting for a decision (1: reviewers, 2: senior-reviewers)."""
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING
    )
    outcome = models.CharField(max_length=16, blank=True, default="")
    """``executed`` / ``rejected`` / ``failed`` once the thread finished this version."""
    outcome_text = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "request_id", "approval_version"],
                name="one_review_per_thread_version",
            )
        ]
        indexes = [models.Index(fields=["status", "level", "created_at"])]

    def __str__(self) -> str:
        return f"review {self.request_id} v{self.approval_version} ({self.status})"


class ApprovalDecision(models.Model):
    """A reviewer's decision on one level of one version of a request (at most one).

    The ledger the side effect trusts: ``execute`` buys only when the approving
    rows for the request, version, amount and every level it needs are here.
    """

    decision_id = models.CharField(max_length=64, unique=True)
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, related_name="decisions"
    )
    request_id = models.CharField(max_length=128)
    approval_version = models.PositiveIntegerField()
    level = models.PositiveSmallIntegerField(default=1)
    action = models.CharField(max_length=16)
    reason = models.TextField(blank=True, default="")
    amount_minor = models.BigIntegerField(default=0)
    """The amount the reviewer was shown; execute refuses any other amount."""
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="studio_decisions",
    )
    seen = models.JSONField(default=dict)
    """The interrupt payload the reviewer was shown when deciding."""
    seen_hash = models.CharField(max_length=64, blank=True, default="")
    run_id = models.CharField(max_length=64, blank=True, default="")
    """The run that resumed the thread with this decision (empty when none was needed)."""
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["request_id", "approval_version", "level"],
                name="one_decision_per_version_level",
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.request_id} v{self.approval_version} L{self.level}"


class PurchaseOutbox(models.Model):
    """The purchase side effect, keyed by ``request_id``: a retry or replay never buys twice."""

    request_id = models.CharField(max_length=128, unique=True)
    approval_version = models.PositiveIntegerField()
    amount_minor = models.BigIntegerField()
    vendor = models.CharField(max_length=200, blank=True, default="")
    thread_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    executions = models.PositiveIntegerField(default=1)
    """How many times execution was attempted (the purchase itself happened once)."""


class OutboundEmail(models.Model):
    """An email an agent sent after its owner approved it: the side effect's outbox.

    Keyed by ``(thread_id, tool_call_id)``, so a retry or a replay of the tool
    call never sends twice; ``decision`` is the ledger row that allowed it
    (``studio.reviews.outbound_email``). A mail relay delivers the rows; the demo
    keeps them here.
    """

    thread_id = models.CharField(max_length=64)
    tool_call_id = models.CharField(max_length=128)
    decision = models.ForeignKey(
        ApprovalDecision, on_delete=models.PROTECT, related_name="emails"
    )
    to = models.CharField(max_length=320)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    executions = models.PositiveIntegerField(default=1)
    """How many times the tool call ran (the email was sent once)."""

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread_id", "tool_call_id"], name="one_email_per_tool_call"
            )
        ]

    def __str__(self) -> str:
        return f"email to {self.to} ({self.tool_call_id})"


class AppendOnly(Exception):
    """The audit log is append-only: no update, no delete, through any path."""


class AuditQuerySet(models.QuerySet["AuditEntry"]):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnly("The audit log is append-only: entries are never changed.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnly("The audit log is append-only: entries are never deleted.")


class AuditEntry(models.Model):
    """Who did what, when, on which thread (decisions, refusals, time travel, cancels).

    Append-only: saving an existing row, deleting one and bulk ``update`` /
    ``delete`` raise :class:`AppendOnly` (there is no admin or view that edits).
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    action = models.CharField(max_length=64, db_index=True)
    thread_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    request_id = models.CharField(max_length=128, blank=True, default="", db_index=True)
    detail = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = AuditQuerySet.as_manager()

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnly("The audit log is append-only: entries are never changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnly("The audit log is append-only: entries are never deleted.")


class WorkerHeartbeat(models.Model):
    """One row per running worker process, touched every few seconds.

    ``/readyz`` reads it: a run lease says a worker is alive only while it runs
    something, this says so while it waits too. A worker deletes its row when it
    stops; a row that stopped moving belongs to a worker that died.
    """

    name = models.CharField(primary_key=True, max_length=128)
    started_at = models.DateTimeField(default=timezone.now)
    seen_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"worker {self.name}"


_EVENT_COLUMNS = (
    "run_id",
    "thread_id",
    "kind",
    "payload",
    "checkpoint_id",
    "created_at",
)


def _held_insert(
    alias: str, rows: list[RunEvent], run_id: str, owner: str
) -> tuple[str, list[Any]]:
    """``RunEventManager.create_while_held``'s statement and its parameters."""
    connection = connections[alias]
    events = RunEvent._meta.db_table
    runs = connection.ops.quote_name(Run._meta.db_table)
    payload = cast("models.Field[Any, Any]", RunEvent._meta.get_field("payload"))
    created = cast("models.Field[Any, Any]", RunEvent._meta.get_field("created_at"))
    columns = ", ".join(connection.ops.quote_name(c) for c in _EVENT_COLUMNS)
    held = (
        f"SELECT 1 FROM {runs} WHERE run_id = %s AND status = %s AND lease_owner = %s"
    )
    columns_of = [
        [row.run_id for row in rows],
        [row.thread_id for row in rows],
        [row.kind for row in rows],
        [payload.get_db_prep_save(row.payload, connection) for row in rows],
        [row.checkpoint_id for row in rows],
        [created.get_db_prep_save(row.created_at, connection) for row in rows],
    ]
    if connection.vendor == "postgresql":
        source = (
            "SELECT * FROM UNNEST(%s::varchar[], %s::varchar[], %s::varchar[], "
            "%s::jsonb[], %s::varchar[], %s::timestamptz[])"
        )
        params: list[Any] = list(columns_of)
        held += " FOR UPDATE"
    else:
        one = "(" + ", ".join(["%s"] * len(_EVENT_COLUMNS)) + ")"
        source = "SELECT * FROM (VALUES " + ", ".join([one] * len(rows)) + ")"
        params = [value for values in zip(*columns_of, strict=True) for value in values]
    sql = (
        f"INSERT INTO {connection.ops.quote_name(events)} ({columns}) {source} "
        f"WHERE EXISTS ({held}) RETURNING id"
    )
    return sql, [*params, run_id, Run.Status.RUNNING, owner]

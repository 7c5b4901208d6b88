"""The run queue: start, cancel and wait for runs. Used by views, the API and forms.

Runs are executed by workers (``studio.services.worker``), never in a request.
One run per thread at a time; a new run on a busy thread follows its
``multitask_strategy``: ``reject`` (409), ``enqueue`` (wait), ``interrupt``
(stop the active run, keep its progress) or ``rollback`` (stop it, and go back
to the thread's state before it).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from studio.errors import Conflict, InvalidInput, ThreadNotFound
from studio.models import AuditEntry, ReviewRequest, Run, Thread
from studio.reviews import audit
from studio.reviews.governance import GovernedWrite, governance_for
from studio.services.access import (
    can_change,
    can_see,
    visible_thread,
    visible_threads,
    writable_thread,
)
from studio.services.graphs import waiting_nodes

__all__ = (
    "ACTIVE",
    "can_see",
    "cancel_run",
    "start_run",
    "visible_thread",
    "visible_threads",
    "wait_for",
    "wake_workers",
)

ACTIVE = (Run.Status.PENDING, Run.Status.RUNNING)
BUSY_MESSAGE = (
    "Thread is already running a task. Wait for it to finish or choose a different "
    "multitask strategy."
)

_wake = threading.Condition()


def wake_workers() -> None:
    """Tell in-process workers a run is waiting (remote workers poll)."""
    with _wake:
        _wake.notify_all()


def wait_for_work(timeout: float) -> None:
    with _wake:
        _wake.wait(timeout)


def start_run(
    *,
    graph: str,
    user: Any,
    input: Any = None,
    command: dict[str, Any] | None = None,
    thread_id: str | None = None,
    checkpoint_id: str = "",
    strategy: str = Run.Strategy.ENQUEUE,
    after_seconds: float = 0,
    config: dict[str, Any] | None = None,
    thread_metadata: dict[str, Any] | None = None,
    create_thread: bool = False,
    governed_resume: bool = False,
) -> Run:
    """Queue a run of ``graph`` on a thread (created when ``thread_id`` is None).

    Only the thread's owner (or a superuser) may queue a run on an existing
    thread. On a governed graph (``studio.reviews.governance``) a command that
    resumes a console interrupt, writes a protected key or goes to a console node
    is refused (403) unless ``governed_resume`` is set, which only the decision
    protocol (``studio.reviews.decisions``) does, after it wrote the ledger row.

    Raises:
        InvalidInput: unknown strategy, negative delay.
        ThreadNotFound: unknown or invisible thread.
        Forbidden: a reviewer who may only read the thread; a governed command.
        Conflict: the thread belongs to another graph, or is busy under ``reject``.
    """
    if strategy not in Run.Strategy.values:
        raise InvalidInput(f"Unknown multitask strategy {strategy!r}.")
    if after_seconds < 0:
        raise InvalidInput("after_seconds must be zero or more.")
    now = timezone.now()
    if command and thread_id is not None and not governed_resume:
        # before the transaction: the refusal is audited even though nothing is queued
        existing = Thread.objects.filter(pk=thread_id).first()
        if existing is not None and can_see(user, existing):
            _refuse_governed_command(user, graph, existing, command)
    request_id = _governed_request_id(graph, input)
    if request_id:
        thread_metadata = {**(thread_metadata or {}), "request_id": request_id}
    with transaction.atomic():
        if thread_id is None:
            thread = Thread.objects.create(
                graph=graph, owner=user, metadata=thread_metadata or {}
            )
        else:
            thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
            if thread is None and create_thread:
                thread = Thread.objects.create(
                    thread_id=thread_id,
                    graph=graph,
                    owner=user,
                    metadata=thread_metadata or {},
                )
            if thread is None or not can_see(user, thread):
                raise ThreadNotFound(
                    f"There is no thread {thread_id!r}.", thread_id=thread_id
                )
            if not governed_resume and not can_change(user, thread):
                writable_thread(user, thread.thread_id)  # raises Forbidden
            if thread.graph != graph:
                raise Conflict(
                    f"Thread {thread.thread_id!r} belongs to graph {thread.graph!r}, not {graph!r}."
                )
        if request_id:
            _refuse_reused_request_id(request_id, thread)
        active = list(Run.objects.filter(thread=thread, status__in=ACTIVE))
        if active:
            if strategy == Run.Strategy.REJECT:
                raise Conflict(BUSY_MESSAGE, thread_id=thread.thread_id)
            if strategy in (Run.Strategy.INTERRUPT, Run.Strategy.ROLLBACK):
                for previous in active:
                    _request_cancel(previous, strategy, user)
        run = Run.objects.create(
            thread=thread,
            graph=graph,
            input=input,
            command=command,
            checkpoint_id=checkpoint_id,
            config=config or {},
            multitask_strategy=strategy,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            created_at=now,
            not_before=now + timedelta(seconds=after_seconds),
        )
        Thread.objects.filter(pk=thread.pk).update(
            status=Thread.Status.BUSY, updated_at=now
        )
    wake_workers()
    return run


def _refuse_governed_command(
    user: Any, graph: str, thread: Thread, command: dict[str, Any]
) -> None:
    governance = governance_for(graph)
    if governance is None:
        return
    waiting = waiting_nodes(graph, thread.thread_id) if "resume" in command else ()
    reason = governance.command_refusal(command, waiting)
    if reason:
        audit.record_refusal(user, thread, "run.command", reason, command=command)
        raise GovernedWrite(reason, thread_id=thread.thread_id)


def _governed_request_id(graph: str, input: Any) -> str:
    """The request id a governed graph's input names ("" for other graphs and inputs)."""
    if not isinstance(input, dict):
        return ""
    governance = governance_for(graph)
    if governance is None:
        return ""
    value = input.get(governance.request_key)
    return value if isinstance(value, str) else ""


def _refuse_reused_request_id(request_id: str, thread: Thread) -> None:
    """A request id names one request: its decisions and its purchase are keyed by it."""
    taken = (
        Thread.objects.filter(metadata__request_id=request_id)
        .exclude(pk=thread.pk)
        .exists()
        or ReviewRequest.objects.filter(request_id=request_id)
        .exclude(thread_id=thread.pk)
        .exists()
    )
    if taken:
        raise Conflict(
            f"Request id {request_id!r} is already used by another request. Choose "
            "another id, or change that request instead.",
            request_id=request_id,
        )


def _request_cancel(run: Run, action: str, user: Any) -> None:
    if run.status == Run.Status.PENDING:
        Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(
            status=Run.Status.INTERRUPTED,
            cancel_requested=action,
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
    else:
        Run.objects.filter(pk=run.pk).update(
            cancel_requested=action, updated_at=timezone.now()
        )
    AuditEntry.objects.create(
        actor=user if getattr(user, "is_authenticated", False) else None,
        action=f"run.cancel.{action}",
        thread_id=run.thread_id,
        detail={"run_id": run.run_id},
    )


def cancel_run(run: Run, user: Any, action: str = "interrupt") -> Run:
    """Ask a pending or running run to stop (``interrupt`` or ``rollback``)."""
    if action not in ("interrupt", "rollback"):
        raise InvalidInput(
            f"Unknown cancel action {action!r}; use interrupt or rollback."
        )
    run.refresh_from_db()
    if run.is_terminal:
        raise Conflict(f"Run {run.run_id} already finished ({run.status}).")
    _request_cancel(run, action, user)
    run.refresh_from_db()
    if run.status == Run.Status.INTERRUPTED:
        from studio.services.worker import settle_thread  # noqa: PLC0415 - avoid cycle

        settle_thread(run.thread_id)
    wake_workers()
    return run


def wait_for(run_id: str, timeout: float = 300.0, poll: float = 0.05) -> Run:
    """Block until the run is terminal (or ``timeout`` seconds passed); returns it."""
    deadline = time.monotonic() + timeout
    while True:
        run = Run.objects.get(pk=run_id)
        if run.is_terminal or time.monotonic() >= deadline:
            return run
        time.sleep(poll)

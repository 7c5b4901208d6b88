"""The run queue: start, cancel, claim and wait for runs; leases; thread status.

Views, the API and forms queue runs here (:func:`start_run`, :func:`cancel_run`);
workers (``studio.services.worker``) take them from here (:func:`claim`, with a
lease that :class:`LeaseHeartbeat` extends while the run executes, and
:func:`requeue_expired` for the runs of workers that died) and execute them,
never in a request. Claiming is ``SELECT ... FOR UPDATE SKIP LOCKED`` on
Postgres (any number of workers on any number of machines) and a conditional
update on SQLite (the embedded single worker); behind both, a partial unique
index keeps at most one running run per thread, and a claim that loses to it
claims nothing. A run whose lease expired ``STUDIO_RUN_MAX_ATTEMPTS`` times
(default 3: its worker dies whenever it runs it) ends as an error instead of
being queued again (:func:`give_up`).

One run per thread at a time; a new run on a busy thread follows its
``multitask_strategy``: ``reject`` (409), ``enqueue`` (wait), ``interrupt``
(stop the active run, keep its progress) or ``rollback`` (stop it; a run that
had not started is dropped whole, one that was running keeps the checkpoints it
saved: the engine has no way yet to delete one run's checkpoints).

Temporary threads (a stateless API run's, ``on_completion="delete"``) get a
``Thread.delete_after`` time when their run ends; the request that waited for
the run deletes the thread as soon as it delivered the result
(:func:`delete_thread_data`), and any worker deletes the ones left
(:func:`sweep_temporary_threads`), ``STUDIO_TEMPORARY_THREAD_GRACE_SECONDS``
(default 60) after the run ended.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import (
    Count,
    F,
    ProtectedError,
    Q,
)
from django.utils import timezone

from studio import titles
from studio.errors import Conflict, InvalidInput, ThreadNotFound
from studio.models import AuditEntry, ReviewRequest, Run, RunEvent, Thread
from studio.observability import observer, tracing
from studio.reviews import audit
from studio.reviews.governance import GovernedWrite, governance_for
from studio.services import run_log, run_queue
from studio.services.access import can_change, can_see, writable_thread
from studio.services.checkpoints import ThreadHistory
from studio.services.registered_graphs import runnable
from studio.services.saver import get_saver

__all__ = (
    "ACTIVE",
    "BUSY_MESSAGE",
    "HEARTBEAT_SECONDS",
    "LEASE_SECONDS",
    "LeaseHeartbeat",
    "active_counts",
    "cancel_requested",
    "cancel_run",
    "claim",
    "delete_thread_data",
    "give_up",
    "max_attempts",
    "requeue_expired",
    "settle_thread",
    "start_run",
    "sweep_temporary_threads",
    "temporary_grace",
    "wait_for",
    "wait_for_work",
    "wake_workers",
)

log = logging.getLogger(__name__)

DEFAULT_TEMPORARY_GRACE_SECONDS = 60.0
LEASE_SECONDS = 30.0
DEFAULT_MAX_ATTEMPTS = 3
"""``STUDIO_RUN_MAX_ATTEMPTS`` when the setting is absent."""
"""How long a claim lasts without a heartbeat (a worker's default)."""
HEARTBEAT_SECONDS = 5.0
"""How often a lease is extended (at most a third of the lease)."""

ACTIVE = (Run.Status.PENDING, Run.Status.RUNNING)
BUSY_MESSAGE = (
    "Thread is already running a task. Wait for it to finish or choose a different "
    "multitask strategy."
)

_wake = threading.Condition()


def active_counts() -> list[tuple[str, str, int]]:
    """``(graph, status, count)`` of the runs pending or running now (metrics)."""
    rows = (
        Run.objects.filter(status__in=(Run.Status.PENDING, Run.Status.RUNNING))
        .values_list("graph", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return [(str(graph), str(status), int(n)) for graph, status, n in rows]


def wake_workers() -> None:
    """Tell in-process workers a run is waiting (remote workers poll)."""
    with _wake:
        _wake.notify_all()


def wait_for_work(timeout: float) -> None:
    """Sleep until :func:`wake_workers` is called or ``timeout`` seconds passed."""
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
    assistant_id: str = "",
    metadata: dict[str, Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    stream_modes: list[str] | None = None,
    idempotency_key: str = "",
    request_hash: str = "",
) -> Run:
    """Queue a run of ``graph`` on a thread (created when ``thread_id`` is None).

    Only the thread's owner (or a superuser) may queue a run on an existing
    thread. On a governed graph (``studio.reviews.governance``) a command that
    resumes a console interrupt, writes a protected key or goes to a console node
    is refused (403) unless ``governed_resume`` is set, which only the decision
    protocol (``studio.reviews.decisions``) does, after it wrote the ledger row.
    The interrupts checked are those waiting where the run starts: at
    ``checkpoint_id`` when one is given, else at the thread's head.

    A thread created without a graph (``POST /api/threads``) takes the graph of
    its first run. A run with input (re)titles the thread (``studio.titles``). API runs also pass ``assistant_id`` (then the thread's
    metadata records ``graph_id`` and ``assistant_id``, as the Agent Server's
    does), the run's ``metadata``, its protocol ``kwargs`` and the
    ``stream_modes`` the worker records for SSE clients, and their
    ``Idempotency-Key`` with the ``request_hash`` of the request
    (``studio.services.api_runs``; a key the user already used raises
    ``IntegrityError`` and nothing is stored).

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
            _refuse_governed_command(user, graph, existing, command, checkpoint_id)
    request_id = _governed_request_id(graph, input)
    if request_id:
        thread_metadata = {**(thread_metadata or {}), "request_id": request_id}
    if assistant_id:
        thread_metadata = {
            **(thread_metadata or {}),
            "graph_id": graph,
            "assistant_id": assistant_id,
        }
    with transaction.atomic():
        thread: Thread | None
        if thread_id is None:
            thread = Thread.objects.create(
                graph=graph,
                owner=user,
                metadata=thread_metadata or {},
                title=titles.next_title(graph, input),
            )
        else:
            thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
            if thread is None and create_thread:
                thread = Thread.objects.create(
                    thread_id=thread_id,
                    graph=graph,
                    owner=user,
                    metadata=thread_metadata or {},
                )  # its title comes with the input, below
            if thread is None or not can_see(user, thread):
                raise ThreadNotFound(
                    f"There is no thread {thread_id!r}.", thread_id=thread_id
                )
            if not governed_resume and not can_change(user, thread):
                writable_thread(user, thread.thread_id)  # raises Forbidden
            if thread.graph and thread.graph != graph:
                raise Conflict(
                    f"Thread {thread.thread_id!r} belongs to graph {thread.graph!r}, not {graph!r}."
                )
            changes: dict[str, Any] = {}
            if (
                not thread.graph
            ):  # created by the API without a graph: it takes this one
                changes["graph"] = thread.graph = graph
            if thread_metadata and any(
                thread.metadata.get(k) != v for k, v in thread_metadata.items()
            ):
                thread.metadata = {**thread.metadata, **thread_metadata}
                changes["metadata"] = thread.metadata
            if input is not None:
                title = titles.next_title(graph, input, thread.title)
                if title != thread.title:
                    changes["title"] = thread.title = title
            if changes:
                Thread.objects.filter(pk=thread.pk).update(**changes)
        if checkpoint_id:
            _require_checkpoint(thread, checkpoint_id)
        if request_id:
            _refuse_reused_request_id(request_id, thread)
        active = list(Run.objects.filter(thread=thread, status__in=ACTIVE))
        if strategy == Run.Strategy.ENQUEUE:
            _refuse_second_resume(active, command, checkpoint_id)
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
            assistant_id=assistant_id,
            metadata=metadata or {},
            kwargs=kwargs or {},
            stream_modes=list(stream_modes or []),
            trace_context=tracing.current_carrier(),
            idempotency_key=idempotency_key,
            request_hash=request_hash,
        )
        Thread.objects.filter(pk=thread.pk).update(
            status=Thread.Status.BUSY, updated_at=now
        )
    observer.queued(run)
    wake_workers()
    return run


def _refuse_second_resume(
    active: list[Run], command: dict[str, Any] | None, checkpoint_id: str
) -> None:
    """One resume per interrupt: a resume at the head is refused while another one
    is queued or running on the thread (the same answer sent twice at once; the
    second would find nothing to resume, or answer a later interrupt)."""
    if not command or "resume" not in command or checkpoint_id:
        return
    for run in active:
        if run.command and "resume" in run.command and not run.checkpoint_id:
            raise Conflict(
                f"Run {run.run_id} is already resuming this thread's interrupt. Wait "
                "for it to finish, then resume again if the thread still waits.",
                thread_id=run.thread_id,
                run_id=run.run_id,
            )


def _refuse_governed_command(
    user: Any,
    graph: str,
    thread: Thread,
    command: dict[str, Any],
    checkpoint_id: str = "",
) -> None:
    governance = governance_for(graph)
    if governance is None:
        return
    reachable: tuple[str, ...] = ()
    if "resume" in command:
        # a resume answers the interrupts of the tasks that run next where the run
        # starts: those waiting, and those not asked yet (after interrupt_before, or
        # at a past checkpoint), whose first interrupt() would return it at once
        reachable = _next_nodes(graph, thread.thread_id, checkpoint_id)
    reason = governance.command_refusal(command, reachable)
    if reason:
        audit.record_refusal(user, thread, "run.command", reason, command=command)
        raise GovernedWrite(reason, thread_id=thread.thread_id)


def _require_checkpoint(thread: Thread, checkpoint_id: str) -> None:
    """A run starts from a checkpoint of its own thread: refused when queued (404,
    nothing stored), not later in the worker."""
    ThreadHistory(thread).saved(checkpoint_id)  # raises CheckpointNotFound


def _next_nodes(graph: str, thread_id: str, checkpoint_id: str) -> tuple[str, ...]:
    """The nodes that run next at ``checkpoint_id`` (or the head), waiting or not."""
    configurable = {"thread_id": thread_id}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    try:
        state = runnable(graph).get_state({"configurable": configurable})
    except Exception:  # an unknown checkpoint: the run fails on it, nothing runs
        return ()
    return tuple(task.name for task in state.tasks) + tuple(state.next)


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
    """Stop a pending run now (``rollback`` drops it whole) or ask its worker to."""
    now = timezone.now()
    pending = Run.objects.filter(pk=run.pk, status=Run.Status.PENDING)
    if action == Run.Strategy.ROLLBACK:
        stopped = pending.delete()[0]
    else:
        stopped = pending.update(
            status=Run.Status.CANCELLED,
            cancel_requested=action,
            finished_at=now,
            updated_at=now,
        )
    if not stopped:  # running (maybe claimed a moment ago): its worker stops it
        Run.objects.filter(pk=run.pk, status__in=ACTIVE).update(
            cancel_requested=action, updated_at=now
        )
    AuditEntry.objects.create(
        actor=user if getattr(user, "is_authenticated", False) else None,
        action=f"run.cancel.{action}",
        thread_id=run.thread_id,
        detail={"run_id": run.run_id},
    )


def cancel_run(run: Run, user: Any, action: str = "interrupt") -> Run:
    """Ask a pending or running run to stop (``interrupt`` or ``rollback``).

    A pending run stops at once (``rollback``: it is deleted, and the returned
    object is its last state, ``interrupted``); a running one stops at its
    worker's next check, within about half a second unless a node runs long.

    Raises:
        InvalidInput: an unknown action.
        Conflict: the run already finished.
    """
    if action not in ("interrupt", "rollback"):
        raise InvalidInput(
            f"Unknown cancel action {action!r}; use interrupt or rollback."
        )
    run.refresh_from_db()
    if run.is_terminal:
        raise Conflict(f"Run {run.run_id} already finished ({run.status}).")
    _request_cancel(run, action, user)
    current = Run.objects.filter(pk=run.pk).first()
    if current is None:  # a pending run rolled back: gone
        run.status = Run.Status.CANCELLED
        run.cancel_requested = action
    else:
        run = current
    if run.status == Run.Status.CANCELLED:
        settle_thread(run.thread_id)
    wake_workers()
    return run


def temporary_grace() -> timedelta:
    """How long a temporary thread outlives its run when no request deletes it first."""
    seconds = getattr(
        settings,
        "STUDIO_TEMPORARY_THREAD_GRACE_SECONDS",
        DEFAULT_TEMPORARY_GRACE_SECONDS,
    )
    return timedelta(seconds=float(seconds))


def delete_thread_data(thread_id: str) -> bool:
    """Delete a thread, its runs and events (cascade) and its checkpoints.

    A thread with a reviewer's decision is kept (the decision ledger protects
    its rows): False then, and the thread is no longer marked temporary.
    """
    try:
        with transaction.atomic():
            deleted, _ = Thread.objects.filter(pk=thread_id).delete()
    except ProtectedError:
        log.info("thread %s has decisions on record: kept", thread_id)
        Thread.objects.filter(pk=thread_id).update(delete_after=None)
        return False
    if deleted:
        get_saver().delete_thread(thread_id)
    return bool(deleted)


def sweep_temporary_threads(limit: int = 50) -> int:
    """Delete temporary threads whose time came (and that run nothing); how many."""
    due = list(
        Thread.objects.filter(delete_after__lte=timezone.now())
        .exclude(runs__status__in=ACTIVE)
        .values_list("pk", flat=True)[:limit]
    )
    return sum(delete_thread_data(thread_id) for thread_id in due)


def wait_for(run_id: str, timeout: float = 300.0, poll: float = 0.05) -> Run:
    """Block until the run is terminal (or ``timeout`` seconds passed); returns it."""
    deadline = time.monotonic() + timeout
    while True:
        run = Run.objects.get(pk=run_id)
        if run.is_terminal or time.monotonic() >= deadline:
            return run
        time.sleep(poll)


# -- workers' side: claim, leases, cancel requests, thread status -----------------


def cancel_requested(run: Run) -> str:
    """The cancel action someone asked of ``run`` ("" when none), read fresh."""
    action = (
        Run.objects.filter(pk=run.pk).values_list("cancel_requested", flat=True).first()
    )
    return action or ""


def settle_thread(
    thread_id: str,
    ended: tuple[str, dict[str, Any] | None] | None = None,
    *,
    has_state: bool = False,
) -> None:
    """Set a thread's status from its runs and its last run's outcome.

    ``ended``: the status and output a worker just stored for its own run, which
    is then the thread's last started run (a thread's runs go one at a time, in
    the order they were queued) and is not read back. ``has_state``: the run
    saved a checkpoint, so the thread now has a state (set in the same update).
    """
    now = timezone.now()
    extra: dict[str, Any] = {"has_state": True} if has_state else {}
    if Run.objects.filter(thread_id=thread_id, status__in=ACTIVE).exists():
        Thread.objects.filter(pk=thread_id).update(
            status=Thread.Status.BUSY, updated_at=now, **extra
        )
        return
    if ended is None:
        last = (
            Run.objects.filter(thread_id=thread_id)
            .exclude(started_at=None)
            .order_by("-started_at")
            .values_list("status", "output")
            .first()
        )
    else:
        last = ended
    status = Thread.Status.IDLE
    if last is not None:
        last_status, output = last
        if last_status == Run.Status.ERROR:
            status = Thread.Status.ERROR
        elif last_status == Run.Status.SUCCESS and (output or {}).get("interrupted"):
            status = Thread.Status.INTERRUPTED
    Thread.objects.filter(pk=thread_id).update(status=status, updated_at=now, **extra)


def max_attempts() -> int:
    """How many times a run is claimed before a lost lease ends it as an error."""
    value = getattr(settings, "STUDIO_RUN_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)
    return max(1, int(value))


def requeue_expired() -> int:
    """Runs whose worker stopped heartbeating go back to the queue; how many.

    A run whose lease expired on its last allowed attempt
    (``STUDIO_RUN_MAX_ATTEMPTS``, default 3) is not queued again: it ends as an
    error (:func:`give_up`), so a run that kills its worker every time does not
    take workers down forever.
    """
    now = timezone.now()
    expired = Run.objects.filter(status=Run.Status.RUNNING, lease_expires_at__lt=now)
    found = list(expired.values_list("pk", "attempt"))
    if not found:  # the usual case: one query a claim, no update
        return 0
    limit = max_attempts()
    for run_id, attempt in found:
        if attempt >= limit:
            give_up(run_id, now)
    # the update filters again: a run renewed since the read stays its worker's
    count = expired.filter(attempt__lt=limit).update(
        status=Run.Status.PENDING,
        lease_owner="",
        lease_expires_at=None,
        updated_at=now,
    )
    observer.leases_taken_over(count)
    return count


def give_up(run_id: str, now: Any) -> bool:
    """End a run whose lease expired on its last attempt as an error (False when
    someone else settled it first)."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return False
    error = {
        "error": "RunAttemptsExhausted",
        "message": (
            f"The run's worker stopped (it died or lost its lease) on each of "
            f"{run.attempt} attempts, so the run was given up instead of being "
            "queued again. The thread keeps the checkpoints the run saved; look at "
            "the worker's log for what killed it, then start a new run."
        ),
        "attempts": run.attempt,
    }
    # the outcome, the thread's status and the last event together, as a worker
    # ends a run; a zombie worker's own end then finds the run no longer its own
    with transaction.atomic():
        ended = Run.objects.filter(
            pk=run_id, status=Run.Status.RUNNING, lease_expires_at__lt=now
        ).update(
            status=Run.Status.ERROR,
            error=error,
            output={},
            lease_owner="",
            lease_expires_at=None,
            finished_at=now,
            updated_at=now,
        )
        if not ended:
            return False
        settle_thread(run.thread_id)
        last = RunEvent.objects.create(
            run=run,
            thread_id=run.thread_id,
            kind="run.status",
            payload={"status": Run.Status.ERROR, "error": error},
        )
    log.error("run %s given up after %d attempts", run_id, run.attempt)
    run_log.publish(last)
    return True


def claim(owner: str, lease_seconds: float = LEASE_SECONDS) -> Run | None:
    """Take the oldest due pending run of a thread that has no running run.

    ``owner`` holds it for ``lease_seconds`` (extended by :class:`LeaseHeartbeat`).
    Runs of one thread go in the order they were queued: a run waits behind
    an older pending one even when that one is not due yet (``after_seconds``
    holds the thread, as on the Agent Server).
    """
    now = timezone.now()
    busy: set[str] = set()  # threads found running meanwhile: not offered again
    for _ in range(5):
        run, claimed = _claim_one(owner, lease_seconds, now, busy)
        if run is None:
            return None
        if claimed:
            return run
        busy.add(run.thread_id)
    return None


def _claim_one(
    owner: str, lease_seconds: float, now: Any, busy: set[str]
) -> tuple[Run | None, bool]:
    """One try of :func:`claim`: ``(None, False)`` when nothing is due, else the
    candidate and whether this owner took it.

    The candidate's id comes from :func:`run_queue.first_candidate` (locked on
    Postgres); the run is then read with its creator (which the worker reads)
    and returned as stored after the claim, without reading it again: on
    Postgres its row is locked from the moment it is picked, and on SQLite the
    update succeeds only on the newest snapshot, so what was read is what is
    stored but for what the claim wrote."""
    postgres = connection.vendor == "postgresql"
    run: Run | None = None
    try:
        with transaction.atomic():
            run_id = run_queue.first_candidate(now, busy, lock=postgres)
            if run_id is None:
                return None, False
            run = Run.objects.select_related("created_by").get(pk=run_id)
            if postgres:
                # serialize with the thread's other writers (a new run's strategy,
                # a settle); a run of it gone running since the read is refused below
                Thread.objects.select_for_update().filter(pk=run.thread_id).values_list(
                    "pk", flat=True
                ).first()
            claim = {
                "status": Run.Status.RUNNING,
                "lease_owner": owner,
                "lease_expires_at": now + timedelta(seconds=lease_seconds),
                "started_at": run.started_at or now,
                "updated_at": now,
            }
            # the transaction's first write: when it fails, nothing else is lost
            claimed = Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(
                attempt=F("attempt") + 1, **claim
            )
            if not claimed:
                return run, False
            Thread.objects.filter(pk=run.thread_id).update(
                status=Thread.Status.BUSY, updated_at=now
            )
    except IntegrityError:
        if run is None:  # not the claim's update: not ours to hide
            raise
        # the thread got a running run meanwhile: the partial unique index
        # ``studio_run_one_running_per_thread`` refused this one, still pending
        log.info("claim by %s lost the race for thread %s", owner, run.thread_id)
        return run, False
    for field, value in claim.items():
        setattr(run, field, value)
    run.attempt += 1
    return run, True


class LeaseHeartbeat:
    """Extends a claimed run's lease every few seconds while it executes."""

    def __init__(self, run_id: str, owner: str, lease_seconds: float) -> None:
        self.run_id = run_id
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.done = threading.Event()
        self.thread = threading.Thread(
            target=self._beat, name=f"heartbeat-{run_id[:8]}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=5)

    def _beat(self) -> None:
        interval = min(HEARTBEAT_SECONDS, self.lease_seconds / 3)
        try:
            while not self.done.wait(interval):
                try:
                    Run.objects.filter(
                        Q(pk=self.run_id),
                        Q(lease_owner=self.owner),
                        Q(status=Run.Status.RUNNING),
                    ).update(
                        lease_expires_at=timezone.now()
                        + timedelta(seconds=self.lease_seconds)
                    )
                except Exception:  # the database went away: beat again next time
                    log.warning(
                        "heartbeat of run %s failed", self.run_id, exc_info=True
                    )
                    close_old_connections()  # a broken connection is not reused
        finally:
            close_old_connections()

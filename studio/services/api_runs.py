"""Runs as the Agent Server protocol sees them (``studio.api.runs`` calls this).

What a run request becomes (:func:`create_run`), the Run JSON
(:func:`run_json`), the ``runs.wait`` / ``runs.join`` answer (:func:`result_of`),
finding, listing, cancelling and deleting runs with the pages' permission rules
(``studio.services.access``: a thread the user may not see is 404, whatever
exists). Rules of the protocol that are decided here:

- ``assistant_id`` is a graph name or its assistant UUID
  (``studio.services.assistants.resolve``: an unknown UUID is 404, anything
  else 422).
- The client's ``config.configurable`` may not set the studio's keys
  (:data:`RESERVED_CONFIGURABLE`, or any key starting with ``__``, ``studio_``,
  ``langgraph_`` or ``checkpoint_``): 422, never silently dropped.
- A ``command.resume`` to a thread whose governed interrupt waits (the purchase
  graph's ``human_review``) is a reviewer's decision: it goes through
  ``studio.reviews.decisions.decide`` with the caller as the reviewer and the
  resume value as the decision body. The answer is the run the decision queued;
  when the decision is not final (the first of two levels) no run exists and
  :class:`Created` carries the decision instead (the view answers 202).
- Stream modes the worker records: the requested ones for a streamed run;
  for ``create`` and ``wait`` also ``values`` and ``updates``, so that a later
  join stream has something to send.
- Stateless runs run on a new thread of the caller's; with ``on_completion``
  ``delete`` (their default) it is temporary (see ``studio.services.runs``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from studio.errors import Conflict, InvalidInput, NotFound
from studio.models import AuditEntry, Run, Thread
from studio.presentation.diff import plain
from studio.reviews.decisions import decide
from studio.reviews.governance import governance_for
from studio.services.access import can_see, visible_thread, writable_thread
from studio.services.assistants import assistant_id_for, resolve
from studio.services.registered_graphs import runnable, waiting_nodes
from studio.services.run_log import API_STREAM_MODES
from studio.services.runs import ACTIVE, cancel_run, start_run

__all__ = (
    "RECORDED_FOR_JOIN",
    "RESERVED_CONFIGURABLE",
    "Created",
    "Idempotency",
    "RunSpec",
    "cancel",
    "check_may_cancel",
    "create_run",
    "delete_run",
    "find_run",
    "idempotency",
    "list_runs",
    "result_of",
    "run_json",
    "run_json_of",
)

log = logging.getLogger(__name__)

RESERVED_CONFIGURABLE = frozenset(
    {
        "thread_id",
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "run_id",
        "assistant_id",
        "graph_id",
        "studio_user",
    }
)
"""``configurable`` keys only the studio sets (so are ``__*``, ``studio_*``,
``langgraph_*`` and ``checkpoint_*``)."""
_RESERVED_PREFIXES = ("__", "studio_", "langgraph_", "checkpoint_")

RECORDED_FOR_JOIN = ("values", "updates")
"""Modes a background or waited-for run records, so a join stream has something."""

_RUN_STATUSES = frozenset(Run.Status.values)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """A validated run request (``studio.api.run_schemas.RunCreate`` builds it)."""

    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None
    stream_mode: tuple[str, ...] = ("values",)
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    checkpoint_id: str = ""
    durability: str | None = None
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    feedback_keys: list[str] | None = None
    multitask_strategy: str = Run.Strategy.ENQUEUE
    if_not_exists: str = "reject"
    on_completion: str | None = None
    after_seconds: float = 0


@dataclass(frozen=True, slots=True)
class Created:
    """What a run request did: queued ``run``, or recorded a non-final ``decision``."""

    run: Run | None
    decision: dict[str, Any] | None = None
    message: str = ""
    decided: bool = False
    """The run resumes a review with a recorded decision: no client cancels it by
    going away (``on_disconnect`` is ignored), or the thread would wait for a
    review that is already decided."""


@dataclass(frozen=True, slots=True)
class Idempotency:
    """A request's ``Idempotency-Key`` and the fingerprint of what it asked."""

    key: str
    request_hash: str


def idempotency(key: str, thread_id: str | None, body: Any) -> Idempotency:
    """The key with the SHA-256 of the request's path thread and body (JSON with
    sorted keys: the same object sent with its keys in another order matches)."""
    canonical = json.dumps(
        {"thread_id": thread_id, "body": body},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return Idempotency(key, hashlib.sha256(canonical.encode()).hexdigest())


def _run_for_key(user: Any, sent: Idempotency) -> Run | None:
    """The run ``user`` created with this key (None: the key is new).

    Raises:
        InvalidInput (422): the key was used for a different request.
    """
    run = Run.objects.filter(created_by=user, idempotency_key=sent.key).first()
    if run is not None and run.request_hash != sent.request_hash:
        raise InvalidInput(
            f"Idempotency-Key {sent.key!r} was already used for another request "
            f"(run {run.run_id}, with a different body or thread). Send a new key "
            "for a new request; send this one again only with the same request."
        )
    return run


def create_run(
    user: Any,
    thread_id: str | None,
    spec: RunSpec,
    *,
    streaming: bool,
    idempotency: Idempotency | None = None,
) -> Created:
    """Queue the run a request asks for (see the module doc for the rules).

    Args:
        thread_id: the thread of ``/threads/{thread_id}/runs...``; None for a
            stateless run (``/runs...``).
        streaming: the request streams the run (``.../runs/stream``).
        idempotency: the request's ``Idempotency-Key``: when ``user`` already
            created a run with it for the same request, that run is the answer
            and nothing new is stored (also for two such requests at once: the
            key is unique per user in the database).

    Raises:
        NotFound (404): an unknown assistant UUID; a thread the user may not
            see (or none, unless ``if_not_exists="create"``).
        InvalidInput (422): reserved configurable keys, unknown nodes in
            ``interrupt_before``/``after``, input and command together, ...
        Forbidden (403): a governed command from outside the console, a
            decision the user may not make.
        Conflict (409): a busy thread under ``reject``; another graph's thread.
        InvalidInput (422): an ``Idempotency-Key`` already used for another request.
    """
    if idempotency is not None:
        earlier = _run_for_key(user, idempotency)
        if earlier is not None:
            return Created(run=earlier)
    graph = resolve(spec.assistant_id)
    _check_spec(graph, spec, stateless=thread_id is None)
    creates = thread_id is not None and spec.if_not_exists == "create"
    if creates and not _is_uuid(str(thread_id)):
        raise InvalidInput("thread_id: a thread created by a run needs a UUID id.")
    if (
        thread_id is not None
        and spec.command
        and spec.command.get("resume") is not None
    ):
        thread = Thread.objects.filter(pk=thread_id).first()
        if thread is not None and can_see(user, thread) and _answers_review(thread):
            return _decision(
                user, thread, spec, streaming=streaming, idempotency=idempotency
            )
    temporary = thread_id is None and (spec.on_completion or "delete") == "delete"
    try:
        run = _start(
            user, graph, thread_id, spec, creates, temporary, streaming, idempotency
        )
    except IntegrityError:
        # the same key sent twice at once: the other request created the run
        earlier = _run_for_key(user, idempotency) if idempotency else None
        if earlier is None:
            raise
        log.info("Idempotency-Key sent twice at once: answered run %s", earlier.pk)
        return Created(run=earlier)
    return Created(run=run)


def _start(
    user: Any,
    graph: str,
    thread_id: str | None,
    spec: RunSpec,
    creates: bool,
    temporary: bool,
    streaming: bool,
    idempotency: Idempotency | None,
) -> Run:
    return start_run(
        graph=graph,
        user=user,
        input=spec.input,
        command=spec.command,
        thread_id=thread_id,
        checkpoint_id=spec.checkpoint_id,
        strategy=spec.multitask_strategy,
        after_seconds=spec.after_seconds,
        config=spec.config,
        create_thread=creates,
        assistant_id=assistant_id_for(graph),
        metadata=spec.metadata,
        kwargs=_kwargs(spec, temporary=temporary),
        stream_modes=_recorded(spec, streaming=streaming),
        idempotency_key=idempotency.key if idempotency else "",
        request_hash=idempotency.request_hash if idempotency else "",
    )


def _check_spec(graph: str, spec: RunSpec, *, stateless: bool) -> None:
    if spec.input is not None and spec.command is not None:
        raise InvalidInput("Send either input or command, not both.")
    configurable = spec.config.get("configurable") or {}
    reserved = sorted(
        key
        for key in configurable
        if key in RESERVED_CONFIGURABLE or key.startswith(_RESERVED_PREFIXES)
    )
    if reserved:
        raise InvalidInput(
            f"config.configurable: {', '.join(reserved)} "
            f"{'is' if len(reserved) == 1 else 'are'} set by the server (the thread "
            "and checkpoint come from the path and the checkpoint fields, the user "
            "from your token); do not send "
            f"{'it' if len(reserved) == 1 else 'them'}."
        )
    unknown = [m for m in spec.stream_mode if m not in API_STREAM_MODES]
    if unknown:
        raise InvalidInput(
            f"stream_mode: {', '.join(unknown)} not supported; use "
            f"{', '.join(API_STREAM_MODES)}."
        )
    if stateless and spec.checkpoint_id:
        raise InvalidInput("checkpoint: a stateless run has no thread to go back in.")
    nodes = set(runnable(graph).nodes)
    for name, value in (
        ("interrupt_before", spec.interrupt_before),
        ("interrupt_after", spec.interrupt_after),
    ):
        if isinstance(value, list):
            missing = sorted(set(value) - nodes)
            if missing:
                raise InvalidInput(
                    f"{name}: {', '.join(missing)} "
                    f"{'is not a node' if len(missing) == 1 else 'are not nodes'} of "
                    f"graph {graph!r}."
                )


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _answers_review(thread: Thread) -> bool:
    """True when a console interrupt waits at the thread's head."""
    governance = governance_for(thread.graph) if thread.graph else None
    if governance is None:
        return False
    return bool(
        set(waiting_nodes(thread.graph, thread.thread_id)) & governance.console_nodes
    )


def _decision(
    user: Any,
    thread: Thread,
    spec: RunSpec,
    *,
    streaming: bool,
    idempotency: Idempotency | None = None,
) -> Created:
    """A resume to a governed review: the reviewer console's decision protocol.

    The decision's own ``decision_id`` makes it idempotent; an ``Idempotency-Key``
    is recorded on the run it queued as well (unless that key is taken meanwhile).
    """
    assert spec.command is not None
    extra = sorted(set(spec.command) - {"resume"})
    if extra or spec.checkpoint_id or spec.input is not None:
        raise InvalidInput(
            "This thread waits for a reviewer's decision: send only command.resume, "
            "with exactly request_id, approval_version, decision_id, action and "
            f"reason{' (not ' + ', '.join(extra) + ')' if extra else ''}."
        )
    body = spec.command["resume"]
    if not isinstance(body, dict):
        raise InvalidInput(
            "command.resume: this thread waits for a reviewer's decision, a JSON "
            "object with exactly request_id, approval_version, decision_id, action "
            "and reason."
        )
    outcome = decide(user, thread.thread_id, body, strings=False)
    if not outcome.run_id:
        return Created(run=None, decision=outcome.as_json(), message=outcome.message)
    graph = thread.graph
    Run.objects.filter(pk=outcome.run_id, status=Run.Status.PENDING).update(
        assistant_id=assistant_id_for(graph),
        metadata=spec.metadata,
        kwargs=_kwargs(spec, temporary=False),
        stream_modes=_recorded(spec, streaming=streaming),
    )
    if idempotency is not None:
        try:
            with transaction.atomic():
                Run.objects.filter(pk=outcome.run_id, idempotency_key="").update(
                    idempotency_key=idempotency.key,
                    request_hash=idempotency.request_hash,
                )
        except IntegrityError:  # the key names another run of this user already
            pass
    run = Run.objects.filter(pk=outcome.run_id).first()
    if run is None:  # deleted since: the decision stands
        return Created(run=None, decision=outcome.as_json(), message=outcome.message)
    return Created(run=run, decided=True)


def _kwargs(spec: RunSpec, *, temporary: bool) -> dict[str, Any]:
    """The Run's ``kwargs`` as the reference server shows them."""
    return {
        "input": spec.input,
        "command": spec.command,
        "config": spec.config,
        "context": spec.context,
        "stream_mode": list(spec.stream_mode),
        "interrupt_before": spec.interrupt_before,
        "interrupt_after": spec.interrupt_after,
        "webhook": None,
        "feedback_keys": spec.feedback_keys,
        "temporary": temporary,
        "subgraphs": spec.stream_subgraphs,
        "resumable": spec.stream_resumable,
        "checkpoint_id": spec.checkpoint_id or None,
        "durability": spec.durability,
    }


def _recorded(spec: RunSpec, *, streaming: bool) -> list[str]:
    modes = list(dict.fromkeys(spec.stream_mode))
    if not streaming:
        modes += [m for m in RECORDED_FOR_JOIN if m not in modes]
    return modes


def _iso(value: datetime) -> str:
    return value.isoformat()


def run_json(run: Run) -> dict[str, Any]:
    """The protocol's Run: ``{run_id, thread_id, assistant_id, metadata, status,
    kwargs, multitask_strategy, created_at, updated_at}``.

    ``created_at`` is when the run may start: with ``after_seconds`` it is in the
    future, as on the reference server. A run the pages started shows the
    ``kwargs`` it has (input, command, config).
    """
    kwargs = run.kwargs or {
        "input": run.input,
        "command": run.command,
        "config": run.config,
        "context": None,
        "stream_mode": [],
        "checkpoint_id": run.checkpoint_id or None,
    }
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id or assistant_id_for(run.graph),
        "metadata": run.metadata or {},
        "status": run.status,
        "kwargs": kwargs,
        "multitask_strategy": run.multitask_strategy,
        "created_at": _iso(max(run.created_at, run.not_before)),
        "updated_at": _iso(run.updated_at),
    }


def run_json_of(run_id: str) -> dict[str, Any]:
    """The Run JSON of a run by id (after a wait); 404 when it was deleted since."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"Run '{run_id}' not found.", run_id=run_id)
    return run_json(run)


def result_of(run: Run) -> dict[str, Any]:
    """What ``runs.wait`` / ``runs.join`` answer for a finished run.

    The final values filtered by the output schema (plus ``__interrupt__`` when
    the run stopped at an interrupt); ``{"__error__": {"error", "message"}}`` when
    it failed. A run the pages started has no stored values: the thread's state
    is read instead.
    """
    if run.status in (Run.Status.ERROR, Run.Status.TIMEOUT):
        error = run.error or {"error": "Error", "message": f"run {run.status}"}
        return {"__error__": error}
    output = run.output or {}
    values = output.get("values") if "values" in output else _thread_values(run)
    return values if isinstance(values, dict) else {} if values is None else values


def _thread_values(run: Run) -> Any:
    try:
        graph = runnable(run.graph)
        state = graph.get_state({"configurable": {"thread_id": run.thread_id}})
    except Exception:  # the thread has no state (or the graph is gone): nothing to show
        return None
    values = state.values
    keys = graph.output_channels
    if isinstance(values, dict) and not isinstance(keys, str):
        values = {k: values[k] for k in keys if k in values}
    result = plain(values)
    if state.interrupts and isinstance(result, dict):
        result["__interrupt__"] = plain(list(state.interrupts))
    return result


def find_run(user: Any, thread_id: str, run_id: str) -> Run:
    """The run, if it belongs to a thread the user may see.

    Raises:
        NotFound (404): an unknown or invisible thread, or no such run on it.
    """
    thread = visible_thread(user, thread_id)
    run = Run.objects.filter(pk=run_id, thread=thread).first()
    if run is None:
        raise NotFound(f"Run '{run_id}' not found.", run_id=run_id)
    return run


def list_runs(
    user: Any, thread_id: str, *, limit: int, offset: int, status: str = ""
) -> list[dict[str, Any]]:
    """The thread's runs as Run JSON, newest first.

    Raises:
        NotFound (404): a thread the user may not see.
        InvalidInput (422): an unknown status.
    """
    thread = visible_thread(user, thread_id)
    runs = Run.objects.filter(thread=thread)
    if status:
        if status not in _RUN_STATUSES:
            raise InvalidInput(
                f"status: {status!r} is not a run status; use "
                f"{', '.join(sorted(_RUN_STATUSES))}."
            )
        runs = runs.filter(status=status)
    rows = runs.order_by("-created_at", "-pk")[offset : offset + limit]
    return [run_json(run) for run in rows]


def check_may_cancel(user: Any, thread_id: str) -> None:
    """Raise unless the user may cancel the thread's runs (``cancel_on_disconnect``).

    Raises:
        NotFound (404): a thread the user may not see.
        Forbidden (403): a reviewer who may read it but not run it.
    """
    writable_thread(user, thread_id)


def cancel(user: Any, thread_id: str, run_id: str, action: str) -> Run:
    """Ask a pending or running run to stop.

    Raises:
        NotFound (404): an invisible thread, no such run, or a run that already
            finished (as the reference server answers).
        Forbidden (403): a reviewer who may read the thread but not run it.
        InvalidInput (422): an unknown action.
    """
    writable_thread(user, thread_id)
    run = find_run(user, thread_id, run_id)
    if run.is_terminal:
        raise NotFound(
            f"Run '{run_id}' already finished ({run.status}): nothing to cancel.",
            run_id=run_id,
        )
    try:
        return cancel_run(run, user, action)
    except Conflict as exc:  # it finished in the meantime
        raise NotFound(exc.message, run_id=run_id) from exc


def delete_run(user: Any, thread_id: str, run_id: str) -> None:
    """Delete a finished run and its events.

    Raises:
        NotFound (404), Forbidden (403): as for :func:`cancel`.
        Conflict (409): the run is pending or running (cancel it first).
    """
    thread = writable_thread(user, thread_id)
    run = find_run(user, thread_id, run_id)
    with transaction.atomic():
        deleted, _ = Run.objects.filter(pk=run.pk).exclude(status__in=ACTIVE).delete()
        if not deleted:
            raise Conflict(
                f"Run '{run_id}' is {run.status}: cancel it first, then delete it.",
                run_id=run_id,
            )
        AuditEntry.objects.create(
            actor=user,
            action="run.deleted",
            thread_id=thread.thread_id,
            detail={"run_id": run_id},
        )

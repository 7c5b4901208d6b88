"""Time travel from a checkpoint: replay from it, or fork it with an edited state.

- **Replay** queues a run with no input from the checkpoint; the worker runs it
  and the engine branches off a copy (``source: fork``) when the checkpoint is
  not the thread's head, or simply continues when it is.
- **Governed graphs** (``studio.reviews.governance``): a fork that writes as a
  console node or writes a protected key is refused for everyone and audited.
  Only the thread's owner (or a superuser) travels in time; a reviewer who may
  read the thread answers it in the console.
- **Fork with edits** writes the edited values as ``as_node`` with
  ``update_state``: a new checkpoint whose parent is the chosen one (a new
  branch, shown in the fork tree). Nothing runs unless asked (``run``): then a
  run continues from the new checkpoint, which is the thread's head.

Both refuse while a run of the thread is pending or running (409), and both
are recorded in the audit log. An invalid edit creates nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from engine.errors import ThreadBusyError
from studio.errors import ENGINE_USER_ERRORS, Conflict
from studio.models import AuditEntry, Run, Thread
from studio.presentation.diff import plain
from studio.presentation.fork_edits import bind_fork, fork_fields
from studio.presenters import ForkFormView
from studio.reviews import audit
from studio.reviews.governance import governance_for
from studio.services.access import writable_thread
from studio.services.checkpoints import ThreadHistory, checkpoint_id_of, writers
from studio.services.fork_tree import FORK_ACTION
from studio.services.runs import ACTIVE, start_run

__all__ = ("ForkOutcome", "ReplayOutcome", "fork", "fork_form", "replay")

log = logging.getLogger(__name__)

REPLAY_ACTION = "thread.replay"


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    run_id: str
    step: int


@dataclass(frozen=True, slots=True)
class ForkOutcome:
    """The form to show again (with errors) or, when valid, the new checkpoint."""

    form: ForkFormView
    checkpoint_id: str = ""
    run_id: str = ""

    @property
    def created(self) -> bool:
        return bool(self.checkpoint_id)


def replay(user: Any, thread_id: str, checkpoint_id: str) -> ReplayOutcome:
    """Queue a run from ``checkpoint_id``.

    Raises:
        ThreadNotFound, CheckpointNotFound: unknown or invisible ids.
        Conflict: a run of the thread is pending or running.
    """
    thread = writable_thread(user, thread_id)
    saved = ThreadHistory(thread).saved(checkpoint_id)
    _refuse_if_busy(thread)
    run = _run_from(user, thread, checkpoint_id)
    step = int((saved.metadata or {}).get("step", -1))
    AuditEntry.objects.create(
        actor=user,
        action=REPLAY_ACTION,
        thread_id=thread.thread_id,
        detail={"from": checkpoint_id, "step": step, "run_id": run.run_id},
    )
    return ReplayOutcome(run_id=run.run_id, step=step)


def fork_form(user: Any, thread_id: str, checkpoint_id: str) -> ForkFormView:
    """The blank form, prefilled with the state at ``checkpoint_id``."""
    thread = writable_thread(user, thread_id)
    history = ThreadHistory(thread)
    saved = history.saved(checkpoint_id)
    return _form(history, saved, as_node=_default_node(history, saved))


def fork(
    user: Any, thread_id: str, checkpoint_id: str, posted: Mapping[str, str]
) -> ForkOutcome:
    """Check the edits; when valid, create the branch (and queue a run if ``run``).

    Never raises for bad input: an invalid submission comes back as the form
    with its errors, and nothing is created.

    Raises:
        ThreadNotFound, CheckpointNotFound: unknown or invisible ids.
        Conflict: a run of the thread is pending or running.
    """
    thread = writable_thread(user, thread_id)
    history = ThreadHistory(thread)
    saved = history.saved(checkpoint_id)
    _refuse_if_busy(thread)
    as_node = str(posted.get("as_node", ""))
    run = str(posted.get("run", "")) in ("on", "true", "1")
    blank = _form(history, saved, as_node=as_node, run=run)
    info = history.state_info
    values = history.values(saved)
    bound = bind_fork(
        blank.fields,
        posted,
        schema=getattr(info, "schema", None),
        schema_kind=getattr(info, "kind", ""),
        values=values,
        reducers=_reducers(history),
    )
    problems = list(bound.errors)
    if as_node not in history.nodes:
        problems.insert(
            0, f"Choose the node to write as (one of: {', '.join(history.nodes)})."
        )
    form = replace(blank, fields=bound.fields, errors=tuple(problems))
    if problems or not bound.is_valid:
        return ForkOutcome(form=form)
    governance = governance_for(thread.graph)
    refusal = governance.write_refusal(as_node, bound.update) if governance else ""
    if refusal:
        audit.record_refusal(
            user,
            thread,
            "thread.fork",
            refusal,
            checkpoint_id=checkpoint_id,
            as_node=as_node,
            keys=sorted(bound.update),
        )
        return ForkOutcome(form=replace(form, errors=(refusal,)))
    try:
        config = history.graph.update_state(
            history.config(checkpoint_id), bound.update, as_node=as_node
        )
    except ThreadBusyError:  # a run took the thread since _refuse_if_busy looked
        raise _busy(thread) from None
    except ENGINE_USER_ERRORS as exc:
        return ForkOutcome(form=_refused(form, exc))
    except Exception as exc:  # the graph's own code (edges, reducers) refused the edit
        log.info("fork of %s refused by the graph", thread.thread_id, exc_info=True)
        return ForkOutcome(form=_refused(form, exc))
    new_id = checkpoint_id_of(config)
    step = int((saved.metadata or {}).get("step", -1)) + 1
    AuditEntry.objects.create(
        actor=user,
        action=FORK_ACTION,
        thread_id=thread.thread_id,
        detail={
            "from": checkpoint_id,
            "checkpoint_id": new_id,
            "step": step,
            "as_node": as_node,
            "keys": sorted(bound.update),
            "values": plain(bound.update),
        },
    )
    Thread.objects.filter(pk=thread.pk).update(has_state=True)
    run_id = ""
    if run:
        run_id = _run_from(user, thread, new_id).run_id
    return ForkOutcome(form=form, checkpoint_id=new_id, run_id=run_id)


# -- helpers ------------------------------------------------------------------------------


def _run_from(user: Any, thread: Thread, checkpoint_id: str) -> Run:
    """Queue a run of the thread that resumes from ``checkpoint_id`` (no input);
    refused while another run of the thread is pending or running."""
    return start_run(
        graph=thread.graph,
        user=user,
        thread_id=thread.thread_id,
        input=None,
        checkpoint_id=checkpoint_id,
        strategy=Run.Strategy.REJECT,
    )


def _form(
    history: ThreadHistory, saved: Any, *, as_node: str, run: bool = False
) -> ForkFormView:
    info = history.state_info
    metadata = saved.metadata or {}
    governance = governance_for(history.thread.graph)
    return ForkFormView(
        thread_id=history.thread.thread_id,
        checkpoint_id=checkpoint_id_of(saved.config),
        step=int(metadata.get("step", -1)),
        fields=fork_fields(
            getattr(info, "schema", None),
            getattr(info, "kind", ""),
            history.state_keys,
            history.kinds,
            history.values(saved),
        ),
        nodes=history.nodes,
        as_node=as_node,
        run=run,
        schema_kind=getattr(info, "kind", ""),
        locked_keys=governance.protected_keys if governance else frozenset(),
        locked_nodes=governance.console_nodes if governance else frozenset(),
    )


def _default_node(history: ThreadHistory, saved: Any) -> str:
    """The node that made the checkpoint, when one did; else the first node."""
    governance = governance_for(history.thread.graph)
    locked = governance.console_nodes if governance else frozenset()
    nodes = [node for node in history.nodes if node not in locked]
    ran = [node for node in writers(saved.metadata) if node in nodes]
    if ran:
        return ran[-1]
    return nodes[0] if nodes else ""


def _reducers(history: ThreadHistory) -> dict[str, Any]:
    found = {}
    for key in history.state_keys:
        reducer = getattr(history.channel(key), "operator", None)
        if reducer is not None:
            found[key] = reducer
    return found


def _busy(thread: Thread) -> Conflict:
    return Conflict(
        "A run of this thread is pending or running. Wait for it to finish, "
        "then travel in time.",
        thread_id=thread.thread_id,
    )


def _refuse_if_busy(thread: Thread) -> None:
    if Run.objects.filter(thread=thread, status__in=ACTIVE).exists():
        raise _busy(thread)


def _refused(form: ForkFormView, exc: Exception) -> ForkFormView:
    message = str(exc).split("\n(error code", 1)[0]
    return replace(form, errors=(f"The graph refused the update: {message}",))

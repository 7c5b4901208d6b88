"""A thread's state for the HTTP API: read it, list its history, update it.

The Agent Server's ``ThreadState`` (``../shared/AGENT_SERVER_PROTOCOL.md``):
``{values, next, tasks, metadata, created_at, checkpoint, parent_checkpoint,
interrupts, checkpoint_id, parent_checkpoint_id}``, built from the engine's
``StateSnapshot`` by :func:`state_json`, values as plain JSON
(``studio.presentation.api_json``).

Access is the pages' (``studio.services.access``): reading needs
``visible_thread`` (owners, superusers, the reviewers of a governed thread);
updating needs ``writable_thread`` (owners and superusers; a reviewer gets 403).
An update is refused while a run of the thread is pending or running (409), and
on a governed graph (``studio.reviews.governance``) when it writes as a console
node or writes a protected key (403, for everyone, audited), exactly as a fork
from the thread page. An accepted update is audited as a fork with edits
(``thread.fork``), so the thread page shows the values it wrote.

Only the root namespace is addressable (``checkpoint_ns == ""``); subgraph
states come with ``subgraphs=True``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from engine.errors import (
    CheckpointNotFoundError,
    InvalidUpdateError,
    SchemaMigrationError,
    SerializationError,
    ThreadBusyError,
)
from engine.pregel import infer_as_node
from engine.types import StateSnapshot
from studio.errors import (
    CheckpointNotFound,
    Conflict,
    GraphNotFound,
    GraphUnavailable,
    InvalidInput,
    StudioError,
)
from studio.models import AuditEntry, Run, Thread
from studio.presentation.api_json import to_json
from studio.presentation.diff import plain
from studio.reviews import audit
from studio.reviews import queue as review_queue
from studio.reviews.governance import GovernedWrite, governance_for
from studio.services.access import visible_thread, writable_thread
from studio.services.fork_tree import FORK_ACTION
from studio.services.registered_graphs import runnable
from studio.services.runs import ACTIVE
from studio.services.saver import get_saver

__all__ = (
    "UPDATE_ACTION",
    "Current",
    "InvalidUpdate",
    "current",
    "history",
    "state",
    "state_json",
    "update_state",
)

log = logging.getLogger(__name__)

UPDATE_ACTION = FORK_ACTION
"""Audit action of an accepted update (the thread page shows it as an edit)."""

_CHECKPOINT_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._:-]{0,63}$")


class InvalidUpdate(StudioError):
    """The engine refused an update (``InvalidUpdateError``): 400, as the reference."""

    code = "invalid_update"
    http_status = 400
    title = "Invalid update"


@dataclass(frozen=True, slots=True)
class Current:
    """A thread's head, as the ``Thread`` JSON shows it."""

    values: Any
    interrupts: dict[str, list[dict[str, Any]]]
    created_at: str | None


# -- reading ----------------------------------------------------------------------------


def current(thread: Thread) -> Current | None:
    """The thread's head values and open interrupts (None: no graph or no checkpoint).

    A graph that can no longer be loaded, or a head saved under a state schema it
    cannot read, reads as no state (a search lists the thread), not as an error.
    """
    if not thread.graph:
        return None
    try:
        snapshot = runnable(thread.graph).get_state(_config(thread.thread_id))
    except (GraphNotFound, GraphUnavailable):
        return None
    except (SchemaMigrationError, SerializationError):  # state/{id} says why
        log.warning("cannot read the head of %s", thread.thread_id, exc_info=True)
        return None
    if snapshot.metadata is None:
        return None
    interrupts: dict[str, list[dict[str, Any]]] = {}
    for task in snapshot.tasks:
        if task.interrupts:
            interrupts[str(task.id)] = [_interrupt(i) for i in task.interrupts]
    return Current(
        values=to_json(snapshot.values),
        interrupts=interrupts,
        created_at=snapshot.created_at,
    )


def state(
    user: Any,
    thread_id: str,
    *,
    checkpoint: Mapping[str, Any] | None = None,
    checkpoint_id: str | None = None,
    subgraphs: bool = False,
) -> dict[str, Any]:
    """The thread's state at its head, or at a checkpoint.

    Raises:
        ThreadNotFound (404): unknown, or not visible to ``user``.
        CheckpointNotFound (404): no such checkpoint on the thread.
        InvalidInput (422): a checkpoint of another thread or a subgraph namespace.
    """
    thread = visible_thread(user, thread_id)
    wanted = _checkpoint_id(thread, checkpoint, checkpoint_id)
    if not thread.graph:
        if wanted:
            raise _not_found(wanted)
        return state_json(_empty(thread.thread_id))
    graph = runnable(thread.graph)
    try:
        snapshot = graph.get_state(
            _config(thread.thread_id, wanted), subgraphs=subgraphs
        )
    except CheckpointNotFoundError:
        raise _not_found(wanted) from None
    return state_json(snapshot)


def history(
    user: Any,
    thread_id: str,
    *,
    limit: int = 10,
    before: str | Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    checkpoint: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Up to ``limit`` states, newest first (the ``step -1`` input checkpoint included).

    ``before`` (an id or a checkpoint) keeps older checkpoints only, ``metadata``
    those whose metadata contains it, ``checkpoint`` that one only.

    Raises:
        ThreadNotFound (404), InvalidInput (422): as :func:`state`.
    """
    thread = visible_thread(user, thread_id)
    if isinstance(before, str):
        before_id = _shaped(before, "before")
    else:
        before_id = _checkpoint_id(thread, before, None, where="before")
    only = _checkpoint_id(thread, checkpoint, None)
    if not thread.graph:
        return []
    graph = runnable(thread.graph)
    snapshots = graph.get_state_history(
        _config(thread.thread_id, only),
        filter=dict(metadata) if metadata else None,
        before=_config(thread.thread_id, before_id) if before_id else None,
        limit=limit,
    )
    return [state_json(snapshot) for snapshot in snapshots]


# -- updating ---------------------------------------------------------------------------


def update_state(
    user: Any,
    thread_id: str,
    *,
    values: Mapping[str, Any] | None,
    as_node: str | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    checkpoint_id: str | None = None,
) -> dict[str, Any]:
    """Write ``values`` as if ``as_node`` returned them, at the head or from a checkpoint.

    Returns ``{"checkpoint": {...}, "configurable": {...}, "checkpoint_id"}`` of the
    new head. The thread becomes ``interrupted`` when the new head has nodes to
    run, ``idle`` otherwise (as the reference).

    Raises:
        ThreadNotFound (404): unknown or invisible thread.
        Forbidden (403): a reviewer who may only read the thread.
        GovernedWrite (403): a write as a console node or of a protected key.
        CheckpointNotFound (404): ``checkpoint`` is not on the thread.
        Conflict (409): a run is pending or running; the thread has no graph yet.
        InvalidUpdate (400): the engine refused it (an ambiguous update without
            ``as_node``, an unknown node or key).
        InvalidInput (422): the graph's own validation refused the values.
    """
    thread = writable_thread(user, thread_id)
    wanted = _checkpoint_id(thread, checkpoint, checkpoint_id)
    if not thread.graph:
        raise Conflict(
            f"Thread {thread.thread_id!r} has no graph yet: create it with a graph_id "
            "or run an assistant on it first.",
            thread_id=thread.thread_id,
        )
    if Run.objects.filter(thread=thread, status__in=ACTIVE).exists():
        raise _busy(thread)
    graph = runnable(thread.graph)
    saver = get_saver()
    base = saver.get_tuple(_config(thread.thread_id, wanted))
    if wanted and base is None:
        raise _not_found(wanted)
    keys = sorted(values) if isinstance(values, Mapping) else []
    _refuse_governed(user, thread, graph, base, as_node, keys)
    try:
        config = graph.update_state(
            _config(thread.thread_id, wanted),
            dict(values) if values is not None else None,
            as_node=as_node,
        )
    except CheckpointNotFoundError:
        raise _not_found(wanted) from None
    except ThreadBusyError:  # a run took the thread since the check above
        raise _busy(thread) from None
    except InvalidUpdateError as exc:
        raise InvalidUpdate(_message(exc), thread_id=thread.thread_id) from exc
    except (ValueError, TypeError, KeyError) as exc:  # the graph's validators, reducers
        log.info("update of %s refused by the graph", thread.thread_id, exc_info=True)
        raise InvalidInput(
            f"The graph refused the update: {_message(exc)}", thread_id=thread.thread_id
        ) from exc
    new_id = str(config["configurable"]["checkpoint_id"])
    head = graph.get_state(_config(thread.thread_id))
    _record(user, thread, base, head, new_id, as_node, keys, values)
    address = _address(thread.thread_id, new_id)
    return {
        "checkpoint": address,
        "configurable": dict(address),
        "checkpoint_id": new_id,
    }


def _busy(thread: Thread) -> Conflict:
    return Conflict(
        "A run of this thread is pending or running. Wait for it to finish, "
        "then update its state.",
        thread_id=thread.thread_id,
    )


def _refuse_governed(
    user: Any,
    thread: Thread,
    graph: Any,
    base: Any,
    as_node: str | None,
    keys: list[str],
) -> None:
    governance = governance_for(thread.graph)
    if governance is None:
        return
    node = as_node
    if node is None and base is not None:
        # the node the engine would write as: refuse it before anything is written
        node = infer_as_node(graph, base.checkpoint)
    refusal = governance.write_refusal(node, keys)
    if refusal:
        audit.record_refusal(
            user,
            thread,
            "thread.update_state",
            refusal,
            checkpoint_id=_id_of(base.config) if base is not None else "",
            as_node=node or "",
            keys=keys,
        )
        raise GovernedWrite(refusal, thread_id=thread.thread_id)


def _record(
    user: Any,
    thread: Thread,
    base: Any,
    head: StateSnapshot,
    new_id: str,
    as_node: str | None,
    keys: list[str],
    values: Any,
) -> None:
    metadata = head.metadata or {}
    writes = metadata.get("writes")
    node = as_node or (next(iter(writes), "") if isinstance(writes, dict) else "")
    AuditEntry.objects.create(
        actor=user,
        action=UPDATE_ACTION,
        thread_id=thread.thread_id,
        detail={
            "from": _id_of(base.config) if base is not None else "",
            "checkpoint_id": new_id,
            "step": int(metadata.get("step", 0)),
            "as_node": node or "",
            "keys": keys,
            "values": plain(values) if isinstance(values, Mapping) else None,
            "via": "api",
        },
    )
    status = Thread.Status.INTERRUPTED if head.next else Thread.Status.IDLE
    Thread.objects.filter(pk=thread.pk).update(
        has_state=True, status=status, updated_at=timezone.now()
    )
    if governance_for(thread.graph) is not None:
        review_queue.sync(thread.thread_id)


# -- presenting -------------------------------------------------------------------------


def state_json(snapshot: StateSnapshot) -> dict[str, Any]:
    """A ``StateSnapshot`` as the Agent Server's ``ThreadState``."""
    checkpoint = _ref(snapshot.config)
    parent = _ref(snapshot.parent_config)
    return {
        "values": to_json(snapshot.values),
        "next": list(snapshot.next),
        "tasks": [_task(task) for task in snapshot.tasks],
        "metadata": to_json(snapshot.metadata),
        "created_at": snapshot.created_at,
        "checkpoint": checkpoint,
        "parent_checkpoint": parent,
        "interrupts": [_interrupt(i) for i in snapshot.interrupts],
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def _task(task: Any) -> dict[str, Any]:
    sub = task.state
    return {
        "id": str(task.id),
        "name": str(task.name),
        "path": to_json(list(task.path)),
        "error": _error(task.error),
        "interrupts": [_interrupt(i) for i in task.interrupts],
        "checkpoint": _namespace(sub) if isinstance(sub, Mapping) else None,
        "state": state_json(sub) if isinstance(sub, StateSnapshot) else None,
        "result": to_json(task.result),
    }


def _interrupt(item: Any) -> dict[str, Any]:
    return {
        "id": str(getattr(item, "id", "") or ""),
        "value": to_json(getattr(item, "value", item)),
    }


def _error(error: Any) -> str | None:
    """A task's failure as the reference shows it: ``ValueError('boom')``."""
    if error is None:
        return None
    kind = getattr(
        error, "kind", None
    )  # read back from storage: its type name and text
    if isinstance(kind, str) and isinstance(getattr(error, "message", None), str):
        return f"{kind}({error.message!r})"
    return repr(error)


def _ref(config: Any) -> dict[str, Any] | None:
    """A config's checkpoint address; None without a checkpoint id (as the reference)."""
    configurable = (config or {}).get("configurable") or {}
    if not configurable.get("thread_id") or not configurable.get("checkpoint_id"):
        return None
    ref = {
        "thread_id": str(configurable["thread_id"]),
        "checkpoint_ns": str(configurable.get("checkpoint_ns") or ""),
        "checkpoint_id": str(configurable["checkpoint_id"]),
    }
    if configurable.get("checkpoint_map") is not None:
        ref["checkpoint_map"] = to_json(configurable["checkpoint_map"])
    return ref


def _namespace(config: Mapping[str, Any]) -> dict[str, Any]:
    """A subgraph task's address: its thread and namespace."""
    configurable = config.get("configurable") or {}
    return {
        "thread_id": str(configurable.get("thread_id") or ""),
        "checkpoint_ns": str(configurable.get("checkpoint_ns") or ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
    }


def _empty(thread_id: str) -> StateSnapshot:
    return StateSnapshot(
        values={},
        next=(),
        config=_config(thread_id),
        metadata=None,
        created_at=None,
        parent_config=None,
        tasks=(),
        interrupts=(),
    )


# -- helpers ----------------------------------------------------------------------------


def _config(thread_id: str, checkpoint_id: str = "") -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _address(thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}


def _id_of(config: Any) -> str:
    return str(((config or {}).get("configurable") or {}).get("checkpoint_id") or "")


def _checkpoint_id(
    thread: Thread,
    checkpoint: Mapping[str, Any] | None,
    checkpoint_id: str | None,
    *,
    where: str = "checkpoint",
) -> str:
    """The root-namespace checkpoint id a request addresses ("" for the head).

    Raises:
        InvalidInput (422): another thread's checkpoint, a subgraph namespace, or
            a ``checkpoint_id`` that disagrees with ``checkpoint``.
    """
    found = ""
    if checkpoint is not None:
        other = checkpoint.get("thread_id")
        if other and other != thread.thread_id:
            raise InvalidInput(
                f"{where}.thread_id: {other!r} is not this thread ({thread.thread_id!r})."
            )
        if checkpoint.get("checkpoint_ns"):
            raise InvalidInput(
                f'{where}.checkpoint_ns: only the root namespace ("") can be addressed '
                "here; read subgraph states with subgraphs=true."
            )
        found = str(checkpoint.get("checkpoint_id") or "")
    if checkpoint_id:
        if found and found != checkpoint_id:
            raise InvalidInput(
                "checkpoint_id and checkpoint.checkpoint_id name different checkpoints."
            )
        if not _CHECKPOINT_ID.match(checkpoint_id):  # an id from the path: unknown
            raise _not_found(checkpoint_id)
        return checkpoint_id
    return _shaped(found, where) if found else ""


def _shaped(checkpoint_id: str, where: str) -> str:
    if not _CHECKPOINT_ID.match(checkpoint_id):
        raise InvalidInput(f"{where}: {checkpoint_id!r} is not a checkpoint id.")
    return checkpoint_id


def _not_found(checkpoint_id: str) -> CheckpointNotFound:
    return CheckpointNotFound(
        f"There is no checkpoint {checkpoint_id!r} on this thread.",
        checkpoint_id=checkpoint_id,
    )


def _message(exc: Exception) -> str:
    return str(exc).split("\n(error code", 1)[0]

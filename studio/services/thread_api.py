"""Threads for the HTTP API (Agent Server protocol): create, read, search, change, delete, copy.

Access is the pages' (``studio.services.access``): another user's thread is
``ThreadNotFound`` (404, no existence leak); the reviewers of a governed thread
may read it but not change, copy or delete it (403). Results are the Agent
Server's ``Thread`` JSON (:func:`thread_json`), never model instances, except
for the two functions the runs resource builds on:

- :func:`create_thread` makes a thread (``POST /threads``; a run with
  ``if_not_exists="create"``);
- :func:`bind_graph` gives a thread its graph on its first run: a thread
  created through the API without ``graph_id`` has none yet (``graph == ""``).

Metadata: ``graph_id`` and ``assistant_id`` are the thread's graph and its
assistant, written by this module (a client may send them to choose the
graph, not to change it); ``request_id`` names a governed request and is set by
the run queue only (``studio.services.runs``): a client cannot write it,
since a request id names one request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import JSONNull, QuerySet
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from studio import graph_registry as registry
from studio.errors import Conflict, GraphUnavailable, InvalidInput, StudioError
from studio.models import ApprovalDecision, Run, Thread
from studio.presentation.api_json import contains, iso
from studio.reviews import audit
from studio.reviews.governance import governance_for
from studio.services import assistants
from studio.services.access import (
    can_change,
    visible_thread,
    visible_threads,
    writable_thread,
)
from studio.services.runs import ACTIVE
from studio.services.saver import get_saver
from studio.services.thread_state_api import Current, current

__all__ = (
    "GRAPH_KEYS",
    "SERVER_KEYS",
    "ThreadExists",
    "bind_graph",
    "copy",
    "count",
    "create",
    "create_thread",
    "delete",
    "get",
    "patch",
    "search",
    "thread_json",
)

GRAPH_KEYS = ("graph_id", "assistant_id")
"""Metadata keys that name the thread's graph (and its assistant)."""
SERVER_KEYS = ("request_id",)
"""Metadata keys only the server writes (the run queue, for governed requests)."""

IfExists = Literal["raise", "do_nothing"]
_SORTS = {
    "thread_id": "thread_id",
    "status": "status",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "state_updated_at": "updated_at",
}


class ThreadExists(Conflict):
    code = "thread_exists"
    title = "Thread exists"


# -- for the runs resource ---------------------------------------------------------------


def create_thread(
    user: Any,
    *,
    thread_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    if_exists: IfExists = "raise",
    graph: str = "",
) -> Thread:
    """Create a thread owned by ``user`` (what ``POST /threads`` does).

    Args:
        thread_id: a UUID (a new one when None).
        metadata: stored as given, plus ``graph_id`` and ``assistant_id`` when the
            thread has a graph. ``metadata["graph_id"]`` (what the SDK sends) or
            ``metadata["assistant_id"]`` choose the graph as ``graph`` does.
        if_exists: when ``thread_id`` is taken: ``raise`` (409), or
            ``do_nothing``: the existing thread, unchanged, if ``user`` may change
            it (409 otherwise, which says nothing else about it).
        graph: the registered graph the thread runs; ``""`` leaves it unbound
            until its first run (:func:`bind_graph`).

    Returns:
        The new (or, for ``do_nothing``, the existing) thread.

    Raises:
        InvalidInput (422): a malformed id, a server-set metadata key, or two
            different graphs named.
        GraphNotFound (404): an unknown graph ("Graph 'x' not found").
        AssistantNotFound (404), InvalidAssistantId (422): a bad ``assistant_id``.
        ThreadExists (409): the id is taken (see ``if_exists``).
    """
    if if_exists not in ("raise", "do_nothing"):
        raise InvalidInput("if_exists: use 'raise' or 'do_nothing'.")
    given = dict(metadata or {})
    _refuse_server_keys(given)
    graph = _graph_named(given, graph)
    given.update(_graph_keys(graph))
    thread_id = _uuid(thread_id) if thread_id is not None else str(uuid.uuid4())
    with transaction.atomic():
        existing = Thread.objects.select_for_update().filter(pk=thread_id).first()
        if existing is None:
            try:
                with transaction.atomic():
                    return Thread.objects.create(
                        thread_id=thread_id, graph=graph, owner=user, metadata=given
                    )
            except IntegrityError:  # created by someone else meanwhile
                existing = None
        if (
            existing is not None
            and if_exists == "do_nothing"
            and can_change(user, existing)
        ):
            return existing
    raise ThreadExists(f"Thread {thread_id!r} already exists.", thread_id=thread_id)


def bind_graph(thread: Thread, graph_name: str) -> Thread:
    """Give ``thread`` its graph, before a run of ``graph_name`` is queued on it.

    The runs resource calls this when a run names an assistant, before
    ``runs.start_run`` (which refuses a thread of another graph, and ``""`` is
    another graph): a thread created through the API without a graph gets
    ``graph_name``, and the thread's metadata gets ``graph_id`` and
    ``assistant_id`` (also on threads the pages created). Idempotent.

    Permissions are the caller's: check that the user may run on the thread
    (``access.writable_thread``) first. To leave an unbound thread unbound when
    the run is then refused, call both inside one ``transaction.atomic()``.

    Returns:
        ``thread``, updated in place.

    Raises:
        GraphNotFound (404): ``graph_name`` is not registered.
        Conflict (409): the thread already runs another graph.
    """
    _registered(graph_name)
    with transaction.atomic():
        locked = Thread.objects.select_for_update().get(pk=thread.pk)
        if locked.graph and locked.graph != graph_name:
            raise Conflict(
                f"Thread {locked.thread_id!r} belongs to graph {locked.graph!r}, "
                f"not {graph_name!r}.",
                thread_id=locked.thread_id,
            )
        metadata = {**(locked.metadata or {}), **_graph_keys(graph_name)}
        if locked.graph != graph_name or metadata != locked.metadata:
            Thread.objects.filter(pk=locked.pk).update(
                graph=graph_name, metadata=metadata
            )
    thread.graph = graph_name
    thread.metadata = metadata
    return thread


# -- the resource ------------------------------------------------------------------------


def create(
    user: Any,
    *,
    thread_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    if_exists: IfExists | None = None,
    graph_id: str | None = None,
) -> dict[str, Any]:
    """``POST /threads``: :func:`create_thread`, as JSON."""
    thread = create_thread(
        user,
        thread_id=thread_id,
        metadata=metadata,
        if_exists=if_exists or "raise",
        graph=graph_id or "",
    )
    return thread_json(thread)


def get(user: Any, thread_id: str) -> dict[str, Any]:
    """``GET /threads/{thread_id}``.

    Raises:
        ThreadNotFound (404): unknown, or not visible to ``user``.
    """
    return thread_json(visible_thread(user, thread_id))


def search(
    user: Any,
    *,
    metadata: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
    status: str | None = None,
    ids: list[str] | None = None,
    limit: int = 10,
    offset: int = 0,
    sort_by: str | None = None,
    sort_order: str | None = None,
    select: list[str] | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """One page of the threads ``user`` may see, and whether more follow.

    ``metadata`` and ``values`` match by containment (as Postgres ``@>``);
    scalar metadata values, ``graph_id``, ``assistant_id``, ``status`` and ``ids``
    are filtered in the database, the rest while reading. Default order:
    ``created_at`` descending.
    """
    threads, rest = _filtered(user, metadata=metadata, status=status, ids=ids)
    key = _SORTS.get(sort_by or "created_at", "created_at")
    sign = "" if (sort_order or "desc") == "asc" else "-"
    threads = threads.order_by(f"{sign}{key}", f"{sign}thread_id")
    if rest is None and values is None:
        page = list(threads[offset : offset + limit + 1])
        found = [thread_json(t) for t in page[:limit]]
        more = len(page) > limit
    else:
        matches = _matching(threads, rest, values)
        found = []
        for index, shown in enumerate(matches):
            if index >= offset + limit:
                break
            if index >= offset:
                found.append(shown)
        more = next(matches, None) is not None
    if select:
        found = [{k: v for k, v in t.items() if k in select} for t in found]
    return found, more


def count(
    user: Any,
    *,
    metadata: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
    status: str | None = None,
) -> int:
    """How many threads :func:`search` would find."""
    threads, rest = _filtered(user, metadata=metadata, status=status, ids=None)
    if rest is None and values is None:
        return threads.count()
    return sum(1 for _ in _matching(threads.order_by("pk"), rest, values))


def patch(user: Any, thread_id: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``PATCH /threads/{thread_id}``: merge ``metadata`` into the thread's.

    ``graph_id`` / ``assistant_id`` may bind a thread that has no graph yet;
    they cannot change a thread's graph.

    Raises:
        ThreadNotFound (404), Forbidden (403): see the module doc.
        InvalidInput (422): a server-set key, or another graph named.
        GraphNotFound (404): an unknown graph named.
    """
    thread = writable_thread(user, thread_id)
    given = dict(metadata)
    _refuse_server_keys(given)
    named = _graph_named(given, "")
    if named and thread.graph and named != thread.graph:
        raise InvalidInput(
            f"metadata.graph_id: this thread runs {thread.graph!r}; its graph cannot "
            "be changed (create a new thread)."
        )
    with transaction.atomic():
        locked = Thread.objects.select_for_update().get(pk=thread.pk)
        merged = {**(locked.metadata or {}), **given}
        graph = locked.graph or named
        merged.update(_graph_keys(graph))
        Thread.objects.filter(pk=locked.pk).update(
            metadata=merged, graph=graph, updated_at=timezone.now()
        )
        locked.refresh_from_db()
    return thread_json(locked)


def delete(user: Any, thread_id: str) -> None:
    """``DELETE /threads/{thread_id}``: the thread, its runs, their events and its checkpoints.

    Raises:
        ThreadNotFound (404), Forbidden (403): see the module doc.
        Conflict (409): a run is pending or running; or reviewers decided on it
            (the approval ledger keeps its decisions and their thread).
    """
    thread = writable_thread(user, thread_id)
    with transaction.atomic():
        locked = Thread.objects.select_for_update().get(pk=thread.pk)
        _refuse_if_busy(locked, "delete it")
        if ApprovalDecision.objects.filter(thread=locked).exists():
            raise Conflict(
                "Reviewers decided on this thread's request: the approval ledger keeps "
                "every decision with its thread, so this thread cannot be deleted.",
                thread_id=locked.thread_id,
            )
        locked.delete()  # runs, run events and review requests go with it
        audit.record(user, "thread.deleted", thread_id=thread_id, graph=locked.graph)
        get_saver().delete_thread(thread_id)  # fails -> nothing above is kept


def copy(user: Any, thread_id: str) -> dict[str, Any]:
    """``POST /threads/{thread_id}/copy``: a new thread of ``user`` with the same history.

    Every checkpoint (all namespaces, pending writes included) is copied; runs
    and their events are not. The copy keeps the metadata (not ``request_id``)
    and the status.

    Raises:
        ThreadNotFound (404), Forbidden (403): see the module doc.
        Conflict (409): a run is pending or running; the thread's graph is
            governed (a request id names one request: a copy would be a second).
    """
    source = writable_thread(user, thread_id)
    if governance_for(source.graph) is not None:
        raise Conflict(
            f"Threads of {source.graph!r} cannot be copied: the reviewer console "
            "governs them and a request id names one request. Start a new request.",
            thread_id=source.thread_id,
        )
    _refuse_if_busy(source, "copy it")
    new_id = str(uuid.uuid4())
    saver = get_saver()
    config = {"configurable": {"thread_id": source.thread_id, "checkpoint_ns": ""}}
    with transaction.atomic():
        metadata = {
            k: v for k, v in (source.metadata or {}).items() if k not in SERVER_KEYS
        }
        copied = Thread.objects.create(
            thread_id=new_id,
            graph=source.graph,
            owner=user,
            status=source.status,
            has_state=source.has_state,
            title=source.title,
            metadata={**metadata, **_graph_keys(source.graph)},
        )
        if saver.get_tuple(config) is not None:
            saver.copy_thread(source.thread_id, new_id)
        audit.record(user, "thread.copied", thread_id=new_id, source=source.thread_id)
    return thread_json(copied)


# -- presenting --------------------------------------------------------------------------


def thread_json(thread: Thread, head: Current | None = None) -> dict[str, Any]:
    """The Agent Server's ``Thread``: ``values`` null and ``interrupts`` empty
    until the thread has a checkpoint."""
    head = head if head is not None else current(thread)
    error = None
    if thread.status == Thread.Status.ERROR:
        error = (
            Run.objects.filter(thread=thread)
            .exclude(error__isnull=True)
            .order_by("-created_at")
            .values_list("error", flat=True)
            .first()
        )
    return {
        "thread_id": thread.thread_id,
        "created_at": iso(thread.created_at),
        "updated_at": iso(thread.updated_at),
        "state_updated_at": (head.created_at if head else None)
        or iso(thread.updated_at),
        "metadata": {**(thread.metadata or {}), **_graph_keys(thread.graph)},
        "status": thread.status,
        "config": {},
        "values": head.values if head else None,
        "interrupts": head.interrupts if head else {},
        "error": error,
    }


# -- helpers -----------------------------------------------------------------------------


def _graph_keys(graph: str) -> dict[str, str]:
    if not graph:
        return {}
    return {"graph_id": graph, "assistant_id": assistants.assistant_id_for(graph)}


def _registered(graph: str) -> str:
    try:
        names = registry.graph_names()
    except registry.GraphLoadError as exc:
        raise GraphUnavailable(str(exc), graph=exc.name) from exc
    if graph not in names:
        raise assistants.graph_not_found(graph)
    return graph


def _graph_named(metadata: Mapping[str, Any], graph: str) -> str:
    """The one graph ``graph``, ``metadata.graph_id`` and ``metadata.assistant_id`` name."""
    named = {graph} if graph else set()
    for key in GRAPH_KEYS:
        if key not in metadata:
            continue
        value = metadata[key]
        if not isinstance(value, str) or not value:
            raise InvalidInput(f"metadata.{key}: a {key} is a non-empty string.")
        named.add(assistants.resolve(value) if key == "assistant_id" else value)
    if len(named) > 1:
        raise InvalidInput(
            f"graph_id and metadata name different graphs: {', '.join(sorted(named))}."
        )
    return _registered(named.pop()) if named else ""


def _refuse_server_keys(metadata: Mapping[str, Any]) -> None:
    for key in SERVER_KEYS:
        if key in metadata:
            raise InvalidInput(
                f"metadata.{key}: set by the server for the governed request the "
                "thread runs; it cannot be sent."
            )


def _uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise InvalidInput(f"thread_id: {value!r} must be a UUID.") from None


def _refuse_if_busy(thread: Thread, what: str) -> None:
    if Run.objects.filter(thread=thread, status__in=ACTIVE).exists():
        raise Conflict(
            f"A run of this thread is pending or running: cancel it or wait for it "
            f"to finish, then {what}.",
            thread_id=thread.thread_id,
        )


def _filtered(
    user: Any,
    *,
    metadata: Mapping[str, Any] | None,
    status: str | None,
    ids: list[str] | None,
) -> tuple[QuerySet[Thread], dict[str, Any] | None]:
    """The visible threads narrowed in the database, and the metadata left to match
    while reading (None when nothing is left)."""
    threads = visible_threads(user)
    if status:
        threads = threads.filter(status=status)
    if ids is not None:
        threads = threads.filter(pk__in=ids)
    rest: dict[str, Any] = {}
    for index, (key, value) in enumerate((metadata or {}).items()):
        if key in GRAPH_KEYS:
            threads = threads.filter(graph=_graph_of(key, value))
        elif value is None or isinstance(value, bool | int | float | str):
            alias = f"_metadata_{index}"
            wanted = JSONNull() if value is None else value
            threads = threads.alias(**{alias: KeyTransform(key, "metadata")}).filter(
                **{alias: wanted}
            )
        else:
            rest[key] = value
    return threads, rest or None


def _graph_of(key: str, value: Any) -> str:
    """The graph a ``graph_id``/``assistant_id`` filter names ("\\0": none can match)."""
    if not isinstance(value, str):
        return "\0"
    if key == "graph_id":
        return value
    try:
        return assistants.resolve(value)
    except StudioError:
        return "\0"


def _matching(
    threads: QuerySet[Thread],
    metadata: Mapping[str, Any] | None,
    values: Mapping[str, Any] | None,
) -> Iterator[dict[str, Any]]:
    """The threads (as JSON) whose metadata and values contain the filters, in order."""
    for thread in threads.iterator(chunk_size=200):
        if metadata and not contains(thread.metadata or {}, metadata):
            continue
        shown = thread_json(thread)
        if values is not None and not contains(shown["values"] or {}, values):
            continue
        yield shown

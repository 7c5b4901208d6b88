"""The API's request and response shapes, as pydantic models (Agent Server protocol).

One model per request body (:class:`Body`: strict JSON types, unknown fields
refused, so ``"10"`` is not a limit and a misspelt field is a 422) and per query
string (:class:`Query`: query strings read as text, unknown parameters ignored,
as the reference server does). The route table (``studio.api.routes``) validates
every request with these models and the OpenAPI document
(``studio.api.openapi``) is generated from the same classes, so the two cannot
disagree.

Response models describe what the services return (``studio.services.assistants``,
``studio.services.thread_api``); they are used for the document and by the
tests, not to re-validate each answer. Field names and shapes follow
``../shared/AGENT_SERVER_PROTOCOL.md`` and ``langgraph_sdk.schema``.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
)

from studio.json_input import WHOLE_NUMBER

__all__ = (
    "Assistant",
    "AssistantCount",
    "AssistantSearch",
    "Body",
    "CheckpointAddress",
    "CheckpointRef",
    "DecisionOutcome",
    "ErrorDetail",
    "GraphDrawing",
    "GraphEdge",
    "GraphNode",
    "GraphQuery",
    "GraphSchemas",
    "HistoryRequest",
    "InterruptOut",
    "Query",
    "Shape",
    "StateAtCheckpoint",
    "StateQuery",
    "StateUpdate",
    "StateUpdateResult",
    "SubgraphsQuery",
    "Thread",
    "ThreadCount",
    "ThreadCreate",
    "ThreadPatch",
    "ThreadSearch",
    "ThreadState",
    "ThreadStatus",
    "ThreadTask",
    "UuidText",
)

MAX_PAGE = 1000
"""The largest ``limit`` a search or history request may ask for."""

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
SortOrder = Literal["asc", "desc"]
AssistantSortBy = Literal[
    "assistant_id", "graph_id", "name", "created_at", "updated_at"
]
AssistantField = Literal[
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "created_at",
    "updated_at",
    "metadata",
    "version",
]
ThreadSortBy = Literal[
    "thread_id", "status", "created_at", "updated_at", "state_updated_at"
]
ThreadField = Literal[
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "config",
    "status",
    "values",
    "interrupts",
    "error",
]
JsonObject = dict[str, Any]


class Shape(BaseModel):
    """A response shape; field docstrings become schema descriptions."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Body(BaseModel):
    """A JSON request body: strict types, unknown fields refused."""

    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, use_attribute_docstrings=True
    )


class Query(BaseModel):
    """A query string: values are text (``"true"``, ``"2"``), unknown parameters ignored."""

    model_config = ConfigDict(
        extra="ignore", frozen=True, use_attribute_docstrings=True
    )


UuidText = Annotated[str, WithJsonSchema({"type": "string", "format": "uuid"})]
"""Text the view reads as a UUID (documented so; the view checks it)."""
Limit = Annotated[int, Field(ge=1, le=MAX_PAGE), WHOLE_NUMBER]
Offset = Annotated[int, Field(ge=0), WHOLE_NUMBER]


# -- assistants ---------------------------------------------------------------------


class AssistantSearch(Body):
    """``POST /assistants/search``: one assistant per registered graph, filtered."""

    graph_id: str | None = None
    """Only this graph's assistant; an unknown graph is 404 (as the reference)."""
    metadata: JsonObject | None = None
    """Containment: every key given must be in the assistant's metadata, equal."""
    name: str | None = None
    """Case-insensitive substring of the assistant's name."""
    limit: Limit = 10
    offset: Offset = 0
    sort_by: AssistantSortBy | None = None
    sort_order: SortOrder | None = None
    select: list[AssistantField] | None = None
    """Only these fields of each assistant."""


class AssistantCount(Body):
    """``POST /assistants/count``: how many assistants a search would find."""

    graph_id: str | None = None
    metadata: JsonObject | None = None
    name: str | None = None


def _xray(value: Any) -> Any:
    """``true``/``false`` or a depth: what ``get_graph(xray=...)`` sends as text."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
        if text.isdigit():
            return int(text)
    return value


class GraphQuery(Query):
    """``GET /assistants/{assistant_id}/graph``."""

    xray: Annotated[bool | Annotated[int, Field(ge=0)], BeforeValidator(_xray)] = False
    """Expand subgraphs: ``true`` for every level, or a depth."""


class SubgraphsQuery(Query):
    """``GET /assistants/{assistant_id}/subgraphs``."""

    recurse: bool = False
    """Also the subgraphs of subgraphs (namespaces joined with ``|``)."""


class Assistant(Shape):
    """The assistant of a registered graph: one per graph, ``name == graph_id``."""

    assistant_id: str
    """``uuid5(6ba7b821-9dad-11d1-80b4-00c04fd430c8, graph_id)``."""
    graph_id: str
    config: JsonObject
    context: JsonObject
    metadata: JsonObject
    """``{"created_by": "system"}``."""
    name: str
    description: str | None
    version: int
    created_at: str
    updated_at: str


class GraphNode(Shape):
    id: str
    type: str | None = None
    """``runnable`` for nodes, ``schema`` for ``__start__`` and ``__end__``."""
    data: Any = None


class GraphEdge(Shape):
    source: str
    target: str
    data: str | None = None
    """The branch label of a conditional edge, when it has one."""
    conditional: bool | None = None
    """Present (``true``) on conditional edges only."""


class GraphDrawing(Shape):
    """``GET /assistants/{assistant_id}/graph``: nodes and edges, START and END included."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]


class GraphSchemas(Shape):
    """JSON Schemas of a graph; ``null`` where one cannot be built."""

    graph_id: str
    input_schema: JsonObject | None
    output_schema: JsonObject | None
    state_schema: JsonObject | None
    config_schema: JsonObject | None
    context_schema: JsonObject | None


# -- threads ------------------------------------------------------------------------


def _canonical_uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError("must be a UUID") from None


class ThreadCreate(Body):
    """``POST /threads``."""

    thread_id: UuidText | None = None
    """A UUID; a new one when absent."""
    metadata: JsonObject | None = None
    """``graph_id`` (what the SDK sends for ``graph_id=``) binds the thread to a graph."""
    if_exists: Literal["raise", "do_nothing"] | None = None
    """When the id is taken: 409 (``raise``, the default) or the existing thread (``do_nothing``, yours only)."""
    graph_id: str | None = None
    """The graph the thread runs; the first run binds it when absent."""

    @field_validator("thread_id")
    @classmethod
    def _thread_id_is_uuid(cls, value: str | None) -> str | None:
        return None if value is None else _canonical_uuid(value)


class ThreadSearch(Body):
    """``POST /threads/search``: your threads (and those you review), filtered and paged."""

    metadata: JsonObject | None = None
    """Containment: ``{"graph_id": "purchase"}`` finds the purchase threads."""
    values: JsonObject | None = None
    """Containment on the thread's current state values."""
    status: ThreadStatus | None = None
    ids: list[str] | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: ThreadSortBy | None = None
    """Default ``created_at``."""
    sort_order: SortOrder | None = None
    """Default ``desc``."""
    select: list[ThreadField] | None = None


class ThreadCount(Body):
    """``POST /threads/count``: how many threads a search would find."""

    metadata: JsonObject | None = None
    values: JsonObject | None = None
    status: ThreadStatus | None = None


class ThreadPatch(Body):
    """``PATCH /threads/{thread_id}``: metadata merged into the thread's."""

    metadata: JsonObject


class InterruptOut(Shape):
    id: str
    value: Any


class Thread(Shape):
    """A thread as the Agent Server shows it."""

    thread_id: str
    created_at: str
    updated_at: str
    state_updated_at: str
    metadata: JsonObject
    """Includes ``graph_id`` and ``assistant_id`` once the thread has a graph."""
    status: ThreadStatus
    config: JsonObject
    values: JsonObject | None
    """The current state (``null`` before the first checkpoint)."""
    interrupts: dict[str, list[InterruptOut]]
    """Open interrupts by task id."""
    error: Any = None
    """The last run's error when ``status`` is ``error``."""


CheckpointIdText = Annotated[
    str,
    WithJsonSchema({"type": "string", "pattern": "^[0-9A-Za-z][0-9A-Za-z._:-]{0,63}$"}),
]
"""A checkpoint id as sent (documented shape; ``thread_state_api`` checks it: 422)."""


class CheckpointAddress(Body):
    """A checkpoint as clients send it back (``state["checkpoint"]``)."""

    thread_id: str | None = None
    """When given, the thread in the path."""
    checkpoint_ns: Annotated[str, WithJsonSchema({"type": "string", "const": ""})] = ""
    """Only the root namespace (``""``) is addressable here (another is 422)."""
    checkpoint_id: CheckpointIdText | None = None
    checkpoint_map: JsonObject | None = None


class StateQuery(Query):
    """``GET /threads/{thread_id}/state`` (and ``/state/{checkpoint_id}``)."""

    subgraphs: bool = False
    """Include the state of subgraphs that are running or interrupted."""


class StateAtCheckpoint(Body):
    """``POST /threads/{thread_id}/state/checkpoint``."""

    checkpoint: CheckpointAddress
    subgraphs: bool = False


class StateUpdate(Body):
    """``POST /threads/{thread_id}/state``: write ``values`` as if ``as_node`` returned them."""

    values: JsonObject | None = None
    as_node: str | None = None
    """Required after a step where several nodes wrote (else 400, as the reference)."""
    checkpoint: CheckpointAddress | None = None
    """Update from this checkpoint (a fork) instead of the head."""
    checkpoint_id: CheckpointIdText | None = None
    """Shorthand for ``checkpoint.checkpoint_id``."""


class HistoryRequest(Body):
    """``POST /threads/{thread_id}/history``: newest first."""

    limit: Limit = 10
    before: CheckpointIdText | CheckpointAddress | None = None
    """Only checkpoints older than this one (an id or a checkpoint)."""
    metadata: JsonObject | None = None
    """Only checkpoints whose metadata contains this."""
    checkpoint: CheckpointAddress | None = None
    """Only this checkpoint."""


class CheckpointRef(Shape):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None = None
    checkpoint_map: JsonObject | None = None


class ThreadTask(Shape):
    id: str
    name: str
    path: list[Any]
    error: str | None
    """The failure, as ``ValueError('...')``."""
    interrupts: list[InterruptOut]
    checkpoint: CheckpointRef | None
    """A subgraph task's namespace (when ``subgraphs`` is off)."""
    state: ThreadState | None
    """A subgraph task's state (when ``subgraphs`` is on)."""
    result: Any


class ThreadState(Shape):
    """The state of a thread at one checkpoint (``get_state``, each history item)."""

    values: Any
    next: list[str]
    tasks: list[ThreadTask]
    metadata: JsonObject | None
    """``step``, ``source`` (``input`` | ``loop`` | ``update`` | ``fork``), ``parents``, ..."""
    created_at: str | None
    checkpoint: CheckpointRef | None
    parent_checkpoint: CheckpointRef | None
    interrupts: list[InterruptOut]
    checkpoint_id: str | None
    parent_checkpoint_id: str | None


class StateUpdateResult(Shape):
    """The new head made by ``update_state``."""

    checkpoint: CheckpointRef
    configurable: JsonObject
    checkpoint_id: str


# -- reviews and errors -------------------------------------------------------------


class DecisionOutcome(Shape):
    """``POST /reviews/{thread_id}/decision``'s answer (``studio.reviews.decisions``)."""

    decision_id: str
    thread_id: str
    request_id: str
    approval_version: int
    level: int
    levels_required: int
    action: Literal["approve", "reject"]
    reviewer: str
    decided_at: str
    run_id: str | None
    final: bool
    duplicate: bool
    message: str


class ErrorDetail(Shape):
    """Every error: ``{"detail": "..."}``."""

    detail: str


ThreadTask.model_rebuild()

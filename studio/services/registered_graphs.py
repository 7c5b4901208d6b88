"""Registered graphs: compiled with the studio's checkpointer, described, drawn, and their forms.

``runnable`` is for executing (workers). The rest serve the graph pages and
return plain data (dataclasses, strings, the one safe SVG) for templates:
no engine objects leave this module. A registry entry that cannot be imported
or compiled becomes ``GraphUnavailable`` (503, naming the entry and the reason).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.utils.safestring import SafeString

from engine.constants import END, START
from engine.pregel import Pregel
from studio import graph_registry as registry
from studio.errors import GraphUnavailable
from studio.forms import RunInputForm
from studio.input_fields import input_fields
from studio.services import graph_svg
from studio.services.access import visible_threads
from studio.services.saver import get_saver

__all__ = (
    "GraphPage",
    "GraphSummary",
    "ThreadRow",
    "describe_graph",
    "draw_mermaid",
    "draw_svg",
    "draw_svg_document",
    "graph_page",
    "input_form",
    "list_graphs",
    "recent_threads",
    "runnable",
    "runnable_or_none",
    "waiting_nodes",
)

_lock = threading.Lock()
_bound: dict[tuple[str, int, int], Pregel] = {}


def runnable(name: str) -> Pregel:
    """The graph registered as ``name``, using the studio's checkpointer.

    Raises:
        GraphNotFound: no such graph.
        GraphLoadError: the entry cannot be imported or compiled.
    """
    graph = registry.get_graph(name)
    saver = get_saver()
    key = (name, id(graph), id(saver))
    with _lock:
        bound = _bound.get(key)
        if bound is None:
            bound = graph.copy(checkpointer=saver)
            _bound.clear() if len(_bound) > 64 else None
            _bound[key] = bound
    return bound


def waiting_nodes(name: str, thread_id: str) -> tuple[str, ...]:
    """The nodes whose interrupts wait unanswered at the thread's head."""
    state = runnable(name).get_state({"configurable": {"thread_id": thread_id}})
    return tuple(
        task.name
        for task in state.tasks
        if task.interrupts and task.result is None and task.error is None
    )


def runnable_or_none(name: str) -> Any:
    try:
        return runnable(name)
    except Exception:
        return None


# -- pages -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GraphSummary:
    """A graph as the graphs list and the graph page's header show it."""

    name: str
    spec: str
    """The ``STUDIO_GRAPHS`` entry, ``"module:attr"``."""
    description: str = ""
    """First line of the graph module's docstring."""
    node_count: int | None = None
    """Nodes, not counting START and END; None when the graph is unavailable."""
    problem: str = ""
    """Why the graph cannot be loaded (empty when it can)."""


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """One of a graph's threads, for the "recent threads" list."""

    thread_id: str
    status: str
    """``running`` / ``interrupted`` / ``done`` / ``failed`` / ``new``."""
    created_at: datetime
    updated_at: datetime
    title: str = ""

    @property
    def url(self) -> str:
        return f"/threads/{self.thread_id}/"


def list_graphs() -> list[GraphSummary]:
    """Every registered graph; one that cannot be loaded says why instead of failing.

    Raises:
        GraphUnavailable: ``STUDIO_GRAPHS_FILE`` cannot be read.
    """
    try:
        specs = registry.graph_specs()
    except registry.GraphLoadError as exc:
        raise _unavailable(exc) from exc
    summaries = []
    for name, spec in specs.items():
        try:
            summaries.append(describe_graph(name))
        except GraphUnavailable as exc:
            reason = str(exc.detail.get("reason", exc.message))
            summaries.append(GraphSummary(name=name, spec=spec, problem=reason))
    return summaries


def describe_graph(name: str) -> GraphSummary:
    """Name, entry, one-line description and node count.

    Raises:
        GraphNotFound: no such graph.
        GraphUnavailable: the entry cannot be imported or compiled.
    """
    return _summary(name, _drawing(name))


def _summary(name: str, drawable: Any) -> GraphSummary:
    count = sum(1 for node_id in drawable.nodes if node_id not in (START, END))
    return GraphSummary(
        name=name,
        spec=registry.graph_specs()[name],
        description=registry.describe(name),
        node_count=count,
    )


@dataclass(frozen=True, slots=True)
class GraphPage:
    """Everything the graph page shows, from one drawing of the graph."""

    graph: GraphSummary
    svg: SafeString
    """The inline ``<svg>``; nodes are ``#node-<name>``."""
    legend: list[str]
    """Marker badges used in the drawing."""
    threads: list[ThreadRow]


def graph_page(name: str, user: Any) -> GraphPage:
    """The graph page's data for ``user``.

    Raises:
        GraphNotFound: no such graph.
        GraphUnavailable: the entry cannot be imported or compiled.
    """
    drawable = _drawing(name)
    used = {marker for node in drawable.nodes.values() for marker in node.markers}
    return GraphPage(
        graph=_summary(name, drawable),
        svg=graph_svg.inline_svg(drawable),
        legend=[
            badge for marker, badge in graph_svg.MARKER_BADGES.items() if marker in used
        ],
        threads=recent_threads(name, user),
    )


def draw_svg(name: str) -> SafeString:
    """The topology as an inline ``<svg>`` (subgraphs expanded), ready for a template."""
    return graph_svg.inline_svg(_drawing(name))


def draw_svg_document(name: str) -> str:
    """The topology as a standalone SVG file."""
    return graph_svg.svg_document(_drawing(name))


def draw_mermaid(name: str) -> str:
    """The topology as Mermaid flowchart text."""
    return str(_drawing(name).draw_mermaid())


def input_form(name: str) -> RunInputForm:
    """The start-a-run form for the graph's input schema (no fields: raw JSON only)."""
    info = getattr(_loaded(name), "input_info", None)
    if info is None:
        return _form(None, "")
    return _form(info.schema, info.kind)


def recent_threads(name: str, user: Any, *, limit: int = 10) -> list[ThreadRow]:
    """The graph's newest threads that ``user`` may see (owner, or any for superusers)."""
    threads = visible_threads(user).filter(graph=name).order_by("-created_at")[:limit]
    return [
        ThreadRow(
            thread_id=thread.thread_id,
            status=thread.display_status,
            created_at=thread.created_at,
            updated_at=thread.updated_at,
            title=thread.title,
        )
        for thread in threads
    ]


def _loaded(name: str) -> Any:
    try:
        return registry.get_graph(name)
    except registry.GraphLoadError as exc:
        raise _unavailable(exc) from exc


_drawings: dict[str, tuple[Any, Any]] = {}
"""name -> (compiled graph, its drawing): a compiled graph does not change, so its
drawing is made once (a 200-node graph took ~60 ms to walk on every page view)."""


def _drawing(name: str) -> Any:
    graph = _loaded(name)
    cached = _drawings.get(name)
    if cached is not None and cached[0] is graph:
        return cached[1]
    drawing = graph.get_graph(xray=1)
    _drawings[name] = (graph, drawing)
    return drawing


@lru_cache(maxsize=64)
def _form(schema: Any, kind: str) -> RunInputForm:
    return RunInputForm(input_fields(schema, kind), schema)


def _unavailable(exc: registry.GraphLoadError) -> GraphUnavailable:
    return GraphUnavailable(
        f"The graph {exc.name!r} cannot be loaded.\n"
        f"Entry: {exc.spec}\n"
        f"Reason: {exc.reason}\n"
        "Fix the entry in STUDIO_GRAPHS (or STUDIO_GRAPHS_FILE) and reload.",
        graph=exc.name,
        spec=exc.spec,
        reason=exc.reason,
    )

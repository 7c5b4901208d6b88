"""Assistants: the Agent Server's view of the registered graphs, one assistant per graph.

An assistant here is not stored: each graph of the registry (``studio.graph_registry``)
is one, with the reference server's id (``uuid5`` of the graph name in the
namespace below), ``name == graph_id``, ``version`` 1, empty ``config`` and
``context`` and ``metadata == {"created_by": "system"}``. Its timestamps are the
graph module's modification time (the same in every process of a deployment),
or when this process started if the module has no file.

Where the SDK accepts an assistant id it also accepts the graph name
(:func:`resolve`), so ``runs.create(thread_id, "purchase")`` works.

Results are plain JSON (dicts); the graph objects never leave this module.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from studio import graph_registry as registry
from studio.errors import (
    GraphNotFound,
    GraphUnavailable,
    InvalidInput,
    NotFound,
)
from studio.presentation.api_json import contains, iso

__all__ = (
    "ASSISTANT_NAMESPACE",
    "SYSTEM_METADATA",
    "AssistantNotFound",
    "InvalidAssistantId",
    "assistant_id_for",
    "count",
    "drawing",
    "get",
    "graph_not_found",
    "json_schemas",
    "resolve",
    "search",
    "subgraphs",
)

ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""The reference server's namespace for the default assistant of each graph."""
SYSTEM_METADATA: dict[str, Any] = {"created_by": "system"}

_STARTED = datetime.now(UTC)
_SORT_KEYS = ("assistant_id", "graph_id", "name", "created_at", "updated_at")


class AssistantNotFound(NotFound):
    code = "assistant_not_found"
    title = "No such assistant"


class InvalidAssistantId(InvalidInput):
    code = "invalid_assistant_id"


def assistant_id_for(graph_name: str) -> str:
    """The id of a graph's assistant: ``ff2c5b94-ed56-55ab-b444-e28b4ff8af58`` for purchase."""
    return str(uuid.uuid5(ASSISTANT_NAMESPACE, graph_name))


def graph_not_found(graph_name: str) -> GraphNotFound:
    """The reference server's answer to an unknown ``graph_id`` (404)."""
    return GraphNotFound(f"Graph '{graph_name}' not found", graph=graph_name)


def resolve(assistant_id: str) -> str:
    """The graph name an assistant id (or a graph name) stands for.

    Raises:
        InvalidAssistantId (422): neither a registered graph name nor a UUID.
        AssistantNotFound (404): a UUID that is no graph's assistant.
        GraphUnavailable (503): ``STUDIO_GRAPHS_FILE`` cannot be read.
    """
    names = _graph_names()
    if assistant_id in names:
        return assistant_id
    try:
        wanted = uuid.UUID(assistant_id)
    except ValueError:
        raise InvalidAssistantId(
            "Invalid assistant ID: must be a UUID", assistant_id=assistant_id
        ) from None
    for name in names:
        if uuid.uuid5(ASSISTANT_NAMESPACE, name) == wanted:
            return name
    raise AssistantNotFound(
        f"Assistant '{assistant_id}' not found", assistant_id=assistant_id
    )


def get(assistant_id: str) -> dict[str, Any]:
    """The assistant (see :func:`resolve` for the errors)."""
    return _assistant(resolve(assistant_id))


def search(
    *,
    graph_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    name: str | None = None,
    limit: int = 10,
    offset: int = 0,
    sort_by: str | None = None,
    sort_order: str | None = None,
    select: list[str] | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """One page of assistants, and whether there are more after it.

    Default order: ``created_at`` descending, then ``graph_id``.

    Raises:
        GraphNotFound (404): ``graph_id`` is not a registered graph.
    """
    found = _matching(graph_id=graph_id, metadata=metadata, name=name)
    key = sort_by if sort_by in _SORT_KEYS else "created_at"
    order = sort_order or ("desc" if key in ("created_at", "updated_at") else "asc")
    found.sort(key=lambda a: a["graph_id"])
    found.sort(key=lambda a: a[key], reverse=order == "desc")
    page = found[offset : offset + limit]
    if select:
        page = [{k: v for k, v in a.items() if k in select} for a in page]
    return page, len(found) > offset + limit


def count(
    *,
    graph_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> int:
    """How many assistants :func:`search` would find (same errors)."""
    return len(_matching(graph_id=graph_id, metadata=metadata, name=name))


def drawing(assistant_id: str, *, xray: int | bool = False) -> dict[str, Any]:
    """``{"nodes": [...], "edges": [...]}`` with ``__start__`` and ``__end__``.

    Nodes are ``{"id", "type": "runnable", "data": {"name"}}`` (``"schema"`` for
    START and END); conditional edges carry ``"conditional": true`` and their
    label as ``data``. ``xray`` expands subgraphs (their nodes are
    ``parent:child``), ``True`` for one level or a depth.

    Raises:
        GraphUnavailable (503): the graph cannot be imported or compiled.
    """
    drawn = _loaded(resolve(assistant_id)).get_graph(xray=xray).to_json()
    for edge in drawn["edges"]:
        edge.pop("join", None)  # ours (fan-in edges); not in the protocol
    return dict(drawn)


def json_schemas(assistant_id: str) -> dict[str, Any]:
    """The graph's input, output, state, config and context JSON Schemas (null when
    one cannot be built: a graph without that schema, or a type pydantic cannot
    describe)."""
    name = resolve(assistant_id)
    return _schemas(name, _loaded(name))


def subgraphs(
    assistant_id: str, *, namespace: str | None = None, recurse: bool = False
) -> dict[str, dict[str, Any]]:
    """The schemas of the graph's subgraphs by namespace (``parent|child`` when recursing)."""
    name = resolve(assistant_id)
    return {
        ns: _schemas(name, sub)
        for ns, sub in _loaded(name).get_subgraphs(namespace=namespace, recurse=recurse)
    }


# -- helpers --------------------------------------------------------------------------


def _graph_names() -> list[str]:
    try:
        return registry.graph_names()
    except registry.GraphLoadError as exc:
        raise _unavailable(exc) from exc


def _matching(
    *, graph_id: str | None, metadata: Mapping[str, Any] | None, name: str | None
) -> list[dict[str, Any]]:
    names = _graph_names()
    if graph_id is not None:
        if graph_id not in names:
            raise graph_not_found(graph_id)
        names = [graph_id]
    found = [_assistant(n) for n in names]
    if metadata:
        found = [a for a in found if contains(a["metadata"], metadata)]
    if name:
        needle = name.casefold()
        found = [a for a in found if needle in a["name"].casefold()]
    return found


def _assistant(graph_name: str) -> dict[str, Any]:
    stamp = iso(_modified(graph_name))
    description = _description(graph_name)
    return {
        "assistant_id": assistant_id_for(graph_name),
        "graph_id": graph_name,
        "config": {},
        "context": {},
        "metadata": dict(SYSTEM_METADATA),
        "name": graph_name,
        "description": description or None,
        "version": 1,
        "created_at": stamp,
        "updated_at": stamp,
    }


def _description(graph_name: str) -> str:
    try:
        registry.get_graph(graph_name)  # describe() reads the imported module
    except registry.GraphLoadError:
        return ""
    return registry.describe(graph_name)


def _modified(graph_name: str) -> datetime:
    spec = registry.graph_specs().get(graph_name, "")
    return _module_time(spec.rpartition(":")[0])


@lru_cache(maxsize=128)
def _module_time(target: str) -> datetime:
    """When the graph's module file last changed (process start when unknown)."""
    try:
        if target.endswith(".py"):
            origin: str | None = target
        else:
            found = importlib.util.find_spec(target)
            origin = found.origin if found is not None else None
        if not origin:
            return _STARTED
        return datetime.fromtimestamp(Path(origin).stat().st_mtime, UTC)
    except (ImportError, OSError, ValueError):
        return _STARTED


def _loaded(graph_name: str) -> Any:
    try:
        return registry.get_graph(graph_name)
    except registry.GraphLoadError as exc:
        raise _unavailable(exc) from exc


def _unavailable(exc: registry.GraphLoadError) -> GraphUnavailable:
    return GraphUnavailable(
        f"The graph {exc.name!r} cannot be loaded: {exc.reason}",
        graph=exc.name,
        reason=exc.reason,
    )


def _schemas(graph_name: str, graph: Any) -> dict[str, Any]:
    def schema_of(info_attr: str) -> dict[str, Any] | None:
        info = getattr(graph, info_attr, None)
        return _json_schema(getattr(info, "schema", None))

    return {
        "graph_id": graph_name,
        "input_schema": schema_of("input_info"),
        "output_schema": schema_of("output_info"),
        "state_schema": schema_of("state_info"),
        "config_schema": None,  # LangGraph 1.x: configuration is the context
        "context_schema": _json_schema(getattr(graph, "context_schema", None)),
    }


def _json_schema(kind: Any) -> dict[str, Any] | None:
    if kind is None:
        return None
    try:
        schema = TypeAdapter(kind).json_schema()
    except Exception:  # a type pydantic cannot describe: null, as the reference
        return None
    return schema if isinstance(schema, dict) else None

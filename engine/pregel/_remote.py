"""PURE helpers of :class:`~engine.pregel.remote.RemoteGraph`: what it sends to an
Agent Server and how it reads the answers. No I/O, no ``langgraph_sdk`` import.

- :func:`sanitize_config`: the JSON-safe part of a config a server accepts;
- :func:`plan_stream_modes`: the modes to ask for, given the caller's and the parent's;
- :func:`shape_chunk`: one server event as ``stream()`` yields it;
- :func:`snapshot_from_state`, :func:`config_from_checkpoint`,
  :func:`checkpoint_from_config`: thread states to and from the engine's types;
- :func:`drawable_from_json`: ``/assistants/{id}/graph`` as a drawing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from engine._internal._config import _DefaultRecursionLimit
from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    INTERRUPT,
    NS_SEP,
)
from engine._internal._typing import RunnableConfig
from engine.pregel._draw import DrawableGraph, Edge, Node
from engine.types import Command, Interrupt, PregelTask, Send, StateSnapshot

__all__ = (
    "StreamPlan",
    "checkpoint_from_config",
    "command_to_json",
    "config_from_checkpoint",
    "drawable_from_json",
    "interrupt_from_json",
    "plan_stream_modes",
    "sanitize_config",
    "shape_chunk",
    "snapshot_from_state",
    "split_event",
)

_DROPPED_CONFIGURABLE = frozenset(
    {CONFIG_KEY_CHECKPOINT_MAP, CONFIG_KEY_CHECKPOINT_ID, CONFIG_KEY_CHECKPOINT_NS}
)
"""The caller's position in its own graph: meaningless to the server."""

_CHECKPOINT_KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map")


def _json_safe(value: Any) -> Any:
    """``value`` with everything that is not JSON data dropped (``None`` if nothing is left)."""
    if isinstance(value, (str, int, float, bool, UUID)):
        return value
    if isinstance(value, Mapping):
        kept = {}
        for key, item in value.items():
            if isinstance(key, str) and (safe := _json_safe(item)) is not None:
                kept[key] = safe
        return kept
    if isinstance(value, (list, tuple)):
        return [safe for item in value if (safe := _json_safe(item)) is not None]
    return None


def sanitize_config(config: RunnableConfig) -> RunnableConfig:
    """What of ``config`` goes to the server: ``recursion_limit`` (when given),
    string ``tags``, and the JSON data in ``metadata`` and ``configurable``.

    Dropped from ``configurable``, besides what is not JSON data: the caller's
    checkpoint position (namespace, id, map) and the runtime's own keys (those
    starting with ``__``), which an Agent Server refuses to take from a client.
    """
    sanitized: dict[str, Any] = {}
    limit = config.get("recursion_limit")
    if limit is not None and not isinstance(limit, _DefaultRecursionLimit):
        sanitized["recursion_limit"] = limit
    if "tags" in config:
        sanitized["tags"] = [
            tag for tag in config["tags"] or () if isinstance(tag, str)
        ]
    if "metadata" in config:
        sanitized["metadata"] = _json_safe(config["metadata"] or {})
    if CONF in config:
        sanitized[CONF] = {
            key: safe
            for key, value in (config[CONF] or {}).items()
            if isinstance(key, str)
            and key not in _DROPPED_CONFIGURABLE
            and not key.startswith("__")
            and (safe := _json_safe(value)) is not None
        }
    return sanitized


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """The modes a remote run streams, and what the caller asked for."""

    sent: list[str]
    """Asked of the server: the caller's, the parent run's, and ``updates``
    (interrupts are read from it); ``messages`` as ``messages-tuple``."""
    requested: frozenset[str]
    """What the caller asked for (``messages-tuple`` read as ``messages``)."""
    single: bool
    """One mode given as a string: chunks are yielded bare."""


def plan_stream_modes(
    stream_mode: str | Sequence[str] | None,
    parent_modes: Iterable[str] = (),
    default: str = "updates",
) -> StreamPlan:
    """The stream modes of a remote run (LangGraph's rules)."""
    if not stream_mode:
        requested, single = [default], True
    elif isinstance(stream_mode, str):
        requested, single = [stream_mode], True
    else:
        requested, single = list(stream_mode), False
    sent = [*requested, *parent_modes]
    sent = ["messages-tuple" if mode == "messages" else mode for mode in sent]
    if "updates" not in sent:
        sent.append("updates")
    sent = [mode for mode in dict.fromkeys(sent) if mode != "events"]
    wanted = {"messages" if mode == "messages-tuple" else mode for mode in requested}
    return StreamPlan(sent=sent, requested=frozenset(wanted), single=single)


def split_event(event: str) -> tuple[str, tuple[str, ...]]:
    """``"updates|child:1"`` -> ``("updates", ("child:1",))``."""
    mode, sep, rest = event.partition(NS_SEP)
    return mode, tuple(rest.split(NS_SEP)) if sep else ()


def interrupt_from_json(data: Any) -> Interrupt[Any]:
    """An interrupt as a server sends it (``{"value", "id", "response_schema"}``).

    A missing id leaves :class:`Interrupt`'s default, as LangGraph's client does;
    the schema the server shows for the answer is kept. Other keys are ignored.
    """
    if isinstance(data, Interrupt):
        return data
    if isinstance(data, Mapping):
        options: dict[str, Any] = {}
        if data.get("id"):
            options["id"] = str(data["id"])
        if data.get("response_schema") is not None:
            options["response_schema"] = data["response_schema"]
        return Interrupt(value=data.get("value"), **options)
    return Interrupt(value=data)


def shape_chunk(
    part: Any,
    mode: str,
    ns: tuple[str, ...],
    data: Any,
    *,
    single: bool,
    subgraphs: bool,
    version: str,
) -> Any:
    """One event as ``stream()`` yields it: a v2 part, ``(ns, [mode,] data)``,
    bare data (one mode) or the SDK's ``StreamPart`` (several modes)."""
    if version == "v2":
        interrupts: tuple[Interrupt[Any], ...] = ()
        if mode == "values" and isinstance(data, dict) and INTERRUPT in data:
            data = dict(data)
            interrupts = tuple(interrupt_from_json(i) for i in data.pop(INTERRUPT))
        return {"type": mode, "ns": ns, "data": data, "interrupts": interrupts}
    if subgraphs:
        return (ns, data) if single else (ns, mode, data)
    if single:
        return data
    return part


def _goto_to_json(target: Any) -> Any:
    if isinstance(target, Send):
        return {"node": target.node, "input": target.arg}
    return target


def command_to_json(command: Command[Any]) -> dict[str, Any]:
    """A ``Command`` as the server's run ``command``: only the parts it sets."""
    sent: dict[str, Any] = {}
    if command.graph is not None:
        sent["graph"] = command.graph
    if command.update is not None:
        update = command.update
        if isinstance(update, (list, tuple)):
            update = [list(pair) for pair in update]
        sent["update"] = update
    if command.resume is not None:
        sent["resume"] = command.resume
    if targets := command.goto_targets():
        goto = [_goto_to_json(target) for target in targets]
        sent["goto"] = goto[0] if len(goto) == 1 else goto
    return sent


def checkpoint_from_config(config: RunnableConfig | None) -> dict[str, Any] | None:
    """The checkpoint a config addresses, as the server's ``Checkpoint`` (or ``None``)."""
    if not config:
        return None
    conf = config.get(CONF) or {}
    checkpoint = {key: conf[key] for key in _CHECKPOINT_KEYS if key in conf}
    return checkpoint or None


def config_from_checkpoint(checkpoint: Mapping[str, Any]) -> RunnableConfig:
    """The config that addresses a checkpoint the server returned."""
    return {
        CONF: {
            "thread_id": checkpoint["thread_id"],
            "checkpoint_ns": checkpoint["checkpoint_ns"],
            "checkpoint_id": checkpoint["checkpoint_id"],
            "checkpoint_map": checkpoint.get("checkpoint_map") or {},
        }
    }


def _task_from_json(task: Mapping[str, Any]) -> PregelTask:
    state: Any = None
    if task.get("state"):
        state = snapshot_from_state(task["state"])
    elif task.get("checkpoint"):
        state = {CONF: task["checkpoint"]}
    return PregelTask(
        id=task["id"],
        name=task["name"],
        path=(),
        error=Exception(task["error"]) if task.get("error") else None,
        interrupts=tuple(interrupt_from_json(i) for i in task.get("interrupts") or ()),
        state=state,
        result=task.get("result"),
    )


def snapshot_from_state(state: Mapping[str, Any]) -> StateSnapshot:
    """A server's ``ThreadState`` as a :class:`~engine.types.StateSnapshot`."""
    tasks = tuple(_task_from_json(task) for task in state.get("tasks") or ())
    parent = state.get("parent_checkpoint")
    metadata = state.get("metadata")
    return StateSnapshot(
        values=state["values"],
        next=tuple(state.get("next") or ()),
        config=config_from_checkpoint(state["checkpoint"]),
        metadata=dict(metadata) if metadata is not None else None,
        created_at=state.get("created_at"),
        parent_config=config_from_checkpoint(parent) if parent else None,
        tasks=tasks,
        interrupts=tuple(i for task in tasks for i in task.interrupts),
    )


def drawable_from_json(graph: Mapping[str, Any]) -> DrawableGraph:
    """``/assistants/{id}/graph`` (nodes and edges as JSON) as a drawing."""
    drawable = DrawableGraph()
    for node in graph.get("nodes") or ():
        node_id = str(node["id"])
        data = node.get("data", {})
        name = node.get("name")
        if name is None:
            name = data.get("name", node_id) if isinstance(data, dict) else node_id
        drawable.add_node(
            Node(id=node_id, name=str(name), data=data, metadata=node.get("metadata"))
        )
    for edge in graph.get("edges") or ():
        drawable.add_edge(
            Edge(
                source=str(edge["source"]),
                target=str(edge["target"]),
                data=edge.get("data"),
                conditional=bool(edge.get("conditional", False)),
                join=bool(edge.get("join", False)),
            )
        )
    return drawable

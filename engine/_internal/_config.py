"""Pure helpers for RunnableConfig dicts: merging, defaults, a nested run's inherited config."""

from __future__ import annotations

import os
from typing import Any

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_THREAD_ID,
)
from engine._internal._typing import RunnableConfig

__all__ = (
    "DEFAULT_RECURSION_LIMIT",
    "addresses_own_thread",
    "merge_configs",
    "outside_config",
    "resolve_parent_config",
)

_COORDINATES = (
    CONFIG_KEY_THREAD_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
)


class _DefaultRecursionLimit(int):
    """The recursion limit filled in when no config names one.

    Merging skips values of this type, so the filled-in default never replaces
    a limit set explicitly in an earlier config, while an explicit limit that
    equals the default (a plain ``int``) still applies. The type, not identity,
    marks it: copying or pickling a config makes a new object.
    """

    __slots__ = ()


DEFAULT_RECURSION_LIMIT = _DefaultRecursionLimit(
    os.environ.get("LANGGRAPH_DEFAULT_RECURSION_LIMIT", "10007")
)
"""LangGraph 1.2's default: 10007 super-steps, or the integer in the environment
variable ``LANGGRAPH_DEFAULT_RECURSION_LIMIT`` when the engine is imported."""


def merge_configs(*configs: RunnableConfig | dict[str, Any] | None) -> RunnableConfig:
    """Merge configs left to right: ``configurable`` and ``metadata`` merge key by key,
    ``tags`` concatenate (deduplicated), other keys are replaced.

    ``recursion_limit`` is always set: the last one given explicitly, else
    :data:`DEFAULT_RECURSION_LIMIT` (a default filled in by an earlier merge does
    not count as given).
    """
    merged: dict[str, Any] = {}
    for config in configs:
        if not config:
            continue
        for key, value in config.items():
            if key == "recursion_limit":
                if not isinstance(value, _DefaultRecursionLimit):
                    merged[key] = value
                continue
            if value is None:
                continue
            if key in ("configurable", "metadata"):
                merged[key] = {**merged.get(key, {}), **value}
            elif key == "tags":
                tags = list(merged.get("tags", ()))
                tags.extend(t for t in value if t not in tags)
                merged["tags"] = tags
            elif (
                key == "callbacks"
                and merged.get("callbacks") is not None
                and value is not None
            ):
                merged["callbacks"] = value
            else:
                merged[key] = value
    if CONF not in merged:
        merged[CONF] = {}
    if "recursion_limit" not in merged:
        merged["recursion_limit"] = DEFAULT_RECURSION_LIMIT
    return merged


def resolve_parent_config(parent: Any, graph: Any) -> RunnableConfig:
    """The config a graph run inside a running task inherits from that task.

    It keeps the thread, the task's namespace (so the child's checkpoints nest
    under it) and the parent's checkpointer for children compiled without one.
    """
    config: dict[str, Any] = dict(parent.config)
    conf = dict(config.get(CONF, {}))
    checkpointer = getattr(graph, "checkpointer", None)
    if checkpointer is False:
        conf.pop(CONFIG_KEY_CHECKPOINTER, None)
    config[CONF] = conf
    config.pop("callbacks", None)
    return config


def addresses_own_thread(config: RunnableConfig | None) -> bool:
    """True when a config given to a graph run inside a task names its own thread.

    As in LangGraph, a graph invoked from a node with a ``thread_id`` (or a
    checkpoint namespace, id or map) of its own in the config is a root graph on
    that thread: it does not nest under the calling task (its checkpoints, its
    stream and its interrupts are its own). A task's own config, passed on
    (``subgraph.invoke(state, config)``), still nests: it carries the task's id.
    """
    if not config:
        return False
    conf = config.get(CONF)
    if not conf or "__engine_task_id" in conf:
        return False
    return any(conf.get(key) for key in _COORDINATES)


def outside_config(parent: Any) -> RunnableConfig:
    """What a root graph run inside a task keeps of the task's config: tags,
    metadata and limits, not its thread, namespace or checkpointer."""
    return {
        key: value
        for key, value in parent.config.items()
        if key not in (CONF, "callbacks")
    }

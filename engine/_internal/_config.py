"""Pure helpers for RunnableConfig dicts: merging, and a nested run's inherited config."""

from __future__ import annotations

from typing import Any

from engine._internal._constants import CONF, CONFIG_KEY_CHECKPOINTER
from engine._internal._typing import RunnableConfig

__all__ = ("merge_configs", "resolve_parent_config")

_DEFAULT_RECURSION_LIMIT = 25


def merge_configs(*configs: RunnableConfig | dict[str, Any] | None) -> RunnableConfig:
    """Merge configs left to right: ``configurable`` and ``metadata`` merge key by key,
    ``tags`` concatenate (deduplicated), other keys are replaced."""
    merged: dict[str, Any] = {}
    for config in configs:
        if not config:
            continue
        for key, value in config.items():
            if value is None and key != "recursion_limit":
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

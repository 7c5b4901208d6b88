"""Registered graphs, compiled with the studio's checkpointer (the one place that wires them)."""

from __future__ import annotations

import threading
from typing import Any

from engine.pregel import Pregel
from studio import registry
from studio.services.checkpointer import get_saver

__all__ = ("runnable", "runnable_or_none")

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


def runnable_or_none(name: str) -> Any:
    try:
        return runnable(name)
    except Exception:
        return None

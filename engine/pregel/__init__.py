"""Pregel: the super-step runtime behind every compiled graph."""

from __future__ import annotations

from engine.pregel._read import PregelNode
from engine.pregel._state_update import infer_as_node
from engine.pregel._write import ChannelWriteEntry
from engine.pregel.main import NodeBuilder, Pregel

__all__ = (
    "ChannelWriteEntry",
    "NodeBuilder",
    "Pregel",
    "PregelNode",
    "infer_as_node",  # ours: the node update_state writes as when as_node is omitted
)

"""Checks of a graph written against channels (``Pregel.validate``).

Every name a node, the input, the output or a breakpoint mentions must exist;
reserved write keys cannot be channels or nodes; a timeout needs an async node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine._internal._constants import RESERVED_WRITES
from engine.errors import GraphValidationError
from engine.pregel._read import PregelNode
from engine.types import All

__all__ = ("validate_graph",)


def _known(channels: Mapping[str, Any]) -> str:
    return repr(sorted(channels))[:100]


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def validate_graph(
    nodes: Mapping[str, PregelNode],
    channels: Mapping[str, Any],
    input_channels: str | Sequence[str],
    output_channels: str | Sequence[str],
    stream_channels: str | Sequence[str] | None,
    interrupt_after_nodes: All | Sequence[str],
    interrupt_before_nodes: All | Sequence[str],
) -> None:
    """Raise :class:`~engine.errors.GraphValidationError` (a ``ValueError``) naming
    the first thing at fault, as LangGraph does (its messages, reworded)."""
    for chan in channels:
        if chan in RESERVED_WRITES:
            raise GraphValidationError(f"Channel name {chan!r} is reserved")
    subscribed: set[str] = set()
    for name, node in nodes.items():
        if name in RESERVED_WRITES:
            raise GraphValidationError(f"Node name {name!r} is reserved")
        if not isinstance(node, PregelNode):
            raise TypeError(
                f"Invalid node type {type(node).__name__} for node {name!r}, "
                "expected PregelNode or NodeBuilder"
            )
        subscribed.update(node.triggers)
        for chan in _names(node.channels):
            if chan not in channels:
                raise GraphValidationError(
                    f"Node {name!r} reads channel {chan!r}, not one of the known "
                    f"channels: {_known(channels)}"
                )
        if node.timeout is not None and not (
            node.bound.is_async or node.bound.afunc is not None
        ):
            raise GraphValidationError(
                f"Node {name!r} has a timeout but is synchronous: timeouts need an "
                "async node (Python cannot stop a running thread)."
            )
    for chan in sorted(subscribed):
        if chan not in channels:
            raise GraphValidationError(
                f"Subscribed channel {chan!r} is not one of the known channels: "
                f"{_known(channels)}"
            )
    inputs = _names(input_channels)
    for chan in inputs:
        if chan not in channels:
            raise GraphValidationError(
                f"Input channel {chan!r} is not one of the known channels: "
                f"{_known(channels)}"
            )
    if inputs and subscribed.isdisjoint(inputs):
        raise GraphValidationError(
            f"No node subscribes to the input channels {list(inputs)!r}"
        )
    for chan in (*_names(output_channels), *_names(stream_channels)):
        if chan not in channels:
            raise GraphValidationError(
                f"Output channel {chan!r} is not one of the known channels: "
                f"{_known(channels)}"
            )
    for breakpoints in (interrupt_after_nodes, interrupt_before_nodes):
        if breakpoints == "*":
            continue
        for name in breakpoints:
            if name not in nodes:
                raise GraphValidationError(f"Interrupt node {name!r} is not a node")

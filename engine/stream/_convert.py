"""Turn a v2 stream part (``{"type", "ns", "data"[, "interrupts"]}``) into a ProtocolEvent."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from engine.stream._types import ProtocolEvent, ProtocolEventParams

__all__ = ("to_protocol_event",)


def to_protocol_event(part: Mapping[str, Any]) -> ProtocolEvent:
    """The event for ``part``: its mode becomes the method, its namespace a list."""
    params: ProtocolEventParams = {
        "namespace": list(part["ns"]),
        "timestamp": int(time.time() * 1000),
        "data": part["data"],
    }
    if "interrupts" in part:
        params["interrupts"] = part["interrupts"]
    return {"type": "event", "method": part["type"], "params": params}

"""The studio's tool agent without the token delay (tests run it many times)."""

from __future__ import annotations

from typing import Any

from studio.demo_graphs.tool_agent import GOVERNANCE, build

__all__ = ("GOVERNANCE", "fast_agent")


def fast_agent() -> Any:
    """The tool agent, streaming its tokens without pausing between them."""
    return build(token_delay=0)

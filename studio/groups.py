"""Channel-layer group names (one place, so producers and consumers agree)."""

from __future__ import annotations

import hashlib

__all__ = ("thread_group",)


def thread_group(thread_id: str) -> str:
    """The group of a thread's live events (group names allow only [a-zA-Z0-9._-])."""
    digest = hashlib.sha256(thread_id.encode()).hexdigest()[:32]
    return f"thread.{digest}"

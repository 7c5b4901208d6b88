"""UUIDv6 ids, at LangGraph's address (``langgraph.checkpoint.base.id``).

Checkpoint ids are version 6 UUIDs (RFC 9562): their text sorts by creation
time, which is how savers find a thread's newest checkpoint. Tools written
against LangGraph's layout import :func:`uuid6` from here to make ids that sort
the same way as the engine's own.
"""

from __future__ import annotations

import random
import uuid

from engine._internal._ids import uuid6_int

__all__ = ("UUID", "uuid6")


class UUID(uuid.UUID):
    """A :class:`uuid.UUID` whose ``time`` also reads version 6 timestamps."""

    __slots__ = ()

    @property
    def time(self) -> int:
        """100ns intervals since 1582-10-15; for version 6 read in its field order."""
        if self.version == 6:
            return ((self.int >> 80) << 12) | ((self.int >> 64) & 0x0FFF)
        return super().time


def uuid6(node: int | None = None, clock_seq: int | None = None) -> UUID:
    """A new UUIDv6, later than every one made before in this process.

    Args:
        node: the low 48 bits (random when omitted).
        clock_seq: 14 bits between the timestamp and the node (random when
            omitted); the engine puts the step there.

    Example:
        >>> str(uuid6(clock_seq=-1)) < str(uuid6())
        True
    """
    if node is None:
        node = random.getrandbits(48)
    if clock_seq is None:
        clock_seq = random.getrandbits(14)
    return UUID(int=uuid6_int(node, clock_seq))

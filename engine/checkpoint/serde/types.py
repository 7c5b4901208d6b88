"""What serializers and savers know of channels and sends, without the runtime.

At LangGraph's address (``langgraph.checkpoint.serde.types``): the reserved
write keys a saver treats specially, and the protocols a channel and a ``Send``
satisfy, so storage code can type them without importing the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

from engine._internal._constants import ERROR, INTERRUPT, RESUME, TASKS

__all__ = (
    "ERROR",
    "INTERRUPT",
    "RESUME",
    "SCHEDULED",
    "TASKS",
    "ChannelProtocol",
    "SendProtocol",
)

SCHEDULED = "__scheduled__"
"""Write key LangGraph reserves for a scheduled task; the engine writes none."""

Value = TypeVar("Value", covariant=True)
Update = TypeVar("Update", contravariant=True)
C = TypeVar("C")


class ChannelProtocol(Protocol[Value, Update, C]):
    """What a channel offers (``engine.channels.base.BaseChannel`` implements it)."""

    @property
    def ValueType(self) -> Any: ...

    @property
    def UpdateType(self) -> Any: ...

    def checkpoint(self) -> C | None: ...

    def from_checkpoint(self, checkpoint: C | None) -> Self: ...

    def update(self, values: Sequence[Update]) -> bool: ...

    def get(self) -> Value: ...

    def consume(self) -> bool: ...


@runtime_checkable
class SendProtocol(Protocol):
    """A message to run ``node`` with ``arg`` (``engine.types.Send`` implements it)."""

    node: str
    arg: Any

    def __hash__(self) -> int: ...

    def __eq__(self, value: object) -> bool: ...

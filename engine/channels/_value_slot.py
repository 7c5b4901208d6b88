"""ValueSlot: the reads shared by the channels whose state is one value."""

from __future__ import annotations

from typing import Any

from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel, Checkpoint, Update, Value
from engine.errors import EmptyChannelError

__all__ = ("ValueSlot",)


class ValueSlot(BaseChannel[Value, Update, Checkpoint]):
    """A channel holding one ``value`` (MISSING when empty) and storing it as is:
    ``LastValue``, ``AnyValue``, ``EphemeralValue``, ``BinaryOperatorAggregate``
    and ``UntrackedValue`` (which stores nothing). Subclasses declare the
    ``value`` slot and decide how updates change it."""

    __slots__ = ()

    value: Any

    def get(self) -> Value:
        if self.value is MISSING:
            raise EmptyChannelError(self.key)
        value: Value = self.value
        return value

    def is_available(self) -> bool:
        return self.value is not MISSING

    def peek(self) -> Any:
        return self.value

    def checkpoint(self) -> Any:
        return self.value

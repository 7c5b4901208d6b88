"""BaseChannel: the contract every channel implements (value, update, checkpoint)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Self, TypeVar

from engine._internal._typing import MISSING
from engine.errors import EmptyChannelError

__all__ = ("BaseChannel", "Checkpoint", "Update", "Value")

Value = TypeVar("Value")
Update = TypeVar("Update")
Checkpoint = TypeVar("Checkpoint")


class BaseChannel(Generic[Value, Update, Checkpoint], ABC):
    """A named slot of state with its own merge rule.

    A channel receives the writes of one super-step at once (``update``), exposes
    its value (``get``), and turns itself into a checkpointable value and back.
    """

    __slots__ = ("key", "typ")

    clears_when_idle: ClassVar[bool] = False
    """True when a step that does not write this channel may still change it
    (ephemeral channels forget their value). The loop only offers empty updates
    to channels that declare this, so idle channels cost nothing per step."""

    def __init__(self, typ: Any, key: str = "") -> None:
        self.typ = typ
        self.key = key

    @property
    def ValueType(self) -> Any:
        """Type of the value stored in the channel."""
        return self.typ

    @property
    def UpdateType(self) -> Any:
        """Type of the writes the channel accepts."""
        return self.typ

    def copy(self) -> Self:
        """An independent channel with the same value."""
        return self.from_checkpoint(self.checkpoint())

    def checkpoint(self) -> Checkpoint | Any:
        """The value to store in a checkpoint, or MISSING when empty."""
        try:
            return self.get()
        except EmptyChannelError:
            return MISSING

    @abstractmethod
    def from_checkpoint(self, checkpoint: Checkpoint | Any) -> Self:
        """A new channel of the same kind holding ``checkpoint`` (MISSING = empty)."""

    @abstractmethod
    def get(self) -> Value:
        """The current value; raises EmptyChannelError when never written."""

    def peek(self) -> Value | Any:
        """The current value, or MISSING when empty (one call on the hot path)."""
        try:
            return self.get()
        except EmptyChannelError:
            return MISSING

    def is_available(self) -> bool:
        """True when ``get()`` would return a value."""
        try:
            self.get()
            return True
        except EmptyChannelError:
            return False

    @abstractmethod
    def update(self, values: Sequence[Update]) -> bool:
        """Apply one step's writes (any order); True when the value changed."""

    def consume(self) -> bool:
        """Called after a subscribed task ran; True when that changed the channel."""
        return False

    def finish(self) -> bool:
        """Called when the run would otherwise stop; True when that changed the channel."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r})"

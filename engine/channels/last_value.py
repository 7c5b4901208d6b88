"""LastValue: holds the single value written in the last step that wrote it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels._value_slot import ValueSlot
from engine.channels.base import BaseChannel, Value
from engine.errors import (
    EmptyChannelError,
    ErrorCode,
    InvalidUpdateError,
    error_message,
)

__all__ = ("LastValue", "LastValueAfterFinish")


def _too_many_writes(key: str, count: int) -> InvalidUpdateError:
    return InvalidUpdateError(
        error_message(
            f"At key {key!r}: can receive only one value per step, got {count}. "
            "Use an Annotated key with a reducer to accept several values per step.",
            ErrorCode.INVALID_CONCURRENT_GRAPH_UPDATE,
        )
    )


class LastValue(Generic[Value], ValueSlot[Value, Value, Value]):
    """Store the last value written. Accepts at most one write per super-step."""

    __slots__ = ("value",)

    def __init__(self, typ: Any, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LastValue)

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Self:
        new = type(self)(self.typ, self.key)
        new.value = self.value
        return new

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, self.key)
        new.value = checkpoint
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return False
        if len(values) != 1:
            raise _too_many_writes(self.key, len(values))
        self.value = values[-1]
        return True


class LastValueAfterFinish(
    Generic[Value], BaseChannel[Value, Value, tuple[Value, bool]]
):
    """A LastValue that becomes readable only once the run has nothing else to do.

    Used for deferred nodes (``add_node(..., defer=True)``); consumed when read.
    """

    __slots__ = ("finished", "value")

    def __init__(self, typ: Any, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING
        self.finished = False

    def checkpoint(self) -> Any:
        if self.value is MISSING:
            return MISSING
        return (self.value, self.finished)

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, self.key)
        if checkpoint is not MISSING:
            new.value, new.finished = checkpoint
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return False
        self.finished = False
        self.value = values[-1]
        return True

    def consume(self) -> bool:
        if self.finished:
            self.finished = False
            self.value = MISSING
            return True
        return False

    def finish(self) -> bool:
        if not self.finished and self.value is not MISSING:
            self.finished = True
            return True
        return False

    def get(self) -> Value:
        if self.value is MISSING or not self.finished:
            raise EmptyChannelError(self.key)
        value: Value = self.value
        return value

    def is_available(self) -> bool:
        return self.value is not MISSING and self.finished

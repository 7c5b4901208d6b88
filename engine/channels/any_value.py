"""AnyValue: a permissive last-write-wins channel, cleared by an idle step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel, Value
from engine.errors import EmptyChannelError

__all__ = ("AnyValue",)


class AnyValue(Generic[Value], BaseChannel[Value, Value, Value]):
    """Keeps the last of several writes per step (assumes they are equal); cleared
    by a step that does not write it."""

    __slots__ = ("value",)

    clears_when_idle = True

    def __init__(self, typ: Any, key: str = "") -> None:
        super().__init__(typ, key)
        self.value: Any = MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, self.key)
        new.value = checkpoint
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            if self.value is MISSING:
                return False
            self.value = MISSING
            return True
        self.value = values[-1]
        return True

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

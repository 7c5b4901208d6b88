"""AnyValue: a permissive last-write-wins channel, cleared by an idle step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels._value_slot import ValueSlot
from engine.channels.base import Value

__all__ = ("AnyValue",)


class AnyValue(Generic[Value], ValueSlot[Value, Value, Value]):
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

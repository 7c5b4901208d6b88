"""EphemeralValue: a value that lives for exactly one step after it is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels._value_slot import ValueSlot
from engine.channels.base import Value
from engine.errors import InvalidUpdateError

__all__ = ("EphemeralValue",)


class EphemeralValue(Generic[Value], ValueSlot[Value, Value, Value]):
    """Holds the value written in the previous step; cleared by the next step.

    With ``guard=True`` (default) more than one write per step is an error;
    with ``guard=False`` the last write wins (edge trigger channels).
    """

    __slots__ = ("guard", "value")

    clears_when_idle = True

    def __init__(self, typ: Any, guard: bool = True, key: str = "") -> None:
        super().__init__(typ, key)
        self.guard = guard
        self.value: Any = MISSING

    def copy(self) -> Self:
        new = type(self)(self.typ, self.guard, self.key)
        new.value = self.value
        return new

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, self.guard, self.key)
        new.value = checkpoint
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            if self.value is MISSING:
                return False
            self.value = MISSING
            return True
        if len(values) != 1 and self.guard:
            raise InvalidUpdateError(
                f"At key {self.key!r}: EphemeralValue can receive only one value per step; "
                f"got {len(values)}."
            )
        self.value = values[-1]
        return True

"""UntrackedValue: a last-value channel that lives only for the run, never in a checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels._value_slot import ValueSlot
from engine.channels.base import Value
from engine.errors import InvalidUpdateError

__all__ = ("UntrackedValue",)


class UntrackedValue(Generic[Value], ValueSlot[Value, Value, Value]):
    """Holds the last value written; a checkpoint never stores it.

    Use it for run-scoped things that must not (or cannot) be saved: a client
    handle, a large intermediate result. A run loaded from a checkpoint starts
    with the channel empty. With ``guard=True`` (the default) two writes in one
    step raise ``InvalidUpdateError``; ``guard=False`` keeps the last of them.
    """

    __slots__ = ("guard", "value")

    def __init__(self, typ: Any, guard: bool = True, key: str = "") -> None:
        super().__init__(typ, key)
        self.guard = guard
        self.value: Any = MISSING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UntrackedValue) and other.guard == self.guard

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Self:
        new = type(self)(self.typ, self.guard, self.key)
        new.value = self.value
        return new

    def checkpoint(self) -> Any:
        return MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        return type(self)(self.typ, self.guard, self.key)

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return False
        if len(values) != 1 and self.guard:
            raise InvalidUpdateError(
                f"At key {self.key!r}: UntrackedValue(guard=True) can receive only one "
                "value per step; use guard=False to keep the last of several."
            )
        self.value = values[-1]
        return True

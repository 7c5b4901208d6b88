"""NamedBarrierValue: becomes available once every named source has written (join edges)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel, Value
from engine.errors import EmptyChannelError, InvalidUpdateError

__all__ = ("NamedBarrierValue", "NamedBarrierValueAfterFinish")


class NamedBarrierValue(Generic[Value], BaseChannel[Value, Value, set[Value]]):
    """Waits until all of ``names`` have written; consumed by the task it triggers.

    ``add_edge(["a", "b"], "c")`` uses one of these: ``c`` runs once both ``a``
    and ``b`` have finished, whichever step each finished in.
    """

    __slots__ = ("names", "seen")

    def __init__(self, typ: Any, names: set[Value], key: str = "") -> None:
        super().__init__(typ, key)
        self.names = frozenset(names)
        self.seen: set[Value] = set()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedBarrierValue) and other.names == self.names

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Self:
        new = type(self)(self.typ, set(self.names), self.key)
        new.seen = set(self.seen)
        return new

    def checkpoint(self) -> Any:
        return sorted(self.seen, key=str) if self.seen else MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, set(self.names), self.key)
        if checkpoint is not MISSING:
            new.seen = set(checkpoint)
        return new

    def update(self, values: Sequence[Value]) -> bool:
        updated = False
        for value in values:
            if value not in self.names:
                raise InvalidUpdateError(
                    f"At key {self.key!r}: value {value!r} is not one of the barrier's "
                    f"sources {sorted(self.names, key=str)}"
                )
            if value not in self.seen:
                self.seen.add(value)
                updated = True
        return updated

    def get(self) -> Value:
        if self.seen != self.names:
            raise EmptyChannelError(self.key)
        return None  # type: ignore[return-value]

    def is_available(self) -> bool:
        return self.seen == self.names

    def consume(self) -> bool:
        if self.seen == self.names:
            self.seen = set()
            return True
        return False


class NamedBarrierValueAfterFinish(NamedBarrierValue[Value]):
    """A NamedBarrierValue that opens only once the run has nothing else to do (deferred joins)."""

    __slots__ = ("finished",)

    def __init__(self, typ: Any, names: set[Value], key: str = "") -> None:
        super().__init__(typ, names, key)
        self.finished = False

    def copy(self) -> Self:
        new = super().copy()
        new.finished = self.finished
        return new

    def checkpoint(self) -> Any:
        if not self.seen:
            return MISSING
        return (sorted(self.seen, key=str), self.finished)

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, set(self.names), self.key)
        if checkpoint is not MISSING:
            seen, new.finished = checkpoint
            new.seen = set(seen)
        return new

    def get(self) -> Value:
        if not self.finished or self.seen != self.names:
            raise EmptyChannelError(self.key)
        return None  # type: ignore[return-value]

    def is_available(self) -> bool:
        return self.finished and self.seen == self.names

    def consume(self) -> bool:
        if self.finished and self.seen == self.names:
            self.finished = False
            self.seen = set()
            return True
        return False

    def finish(self) -> bool:
        if not self.finished and self.seen == self.names:
            self.finished = True
            return True
        return False

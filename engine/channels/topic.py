"""Topic: a pub/sub channel collecting many values (used for Send packets)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel, Value
from engine.errors import EmptyChannelError

__all__ = ("Topic",)


def _flatten(values: Sequence[Value | list[Value]]) -> Iterator[Value]:
    for value in values:
        if isinstance(value, list):
            yield from value
        else:
            yield value


class Topic(
    Generic[Value], BaseChannel[Sequence[Value], Value | list[Value], list[Value]]
):
    """Collects every value written; lists are flattened.

    Without ``accumulate`` the values live for one step (cleared by the next);
    with it they are kept across steps.
    """

    __slots__ = ("accumulate", "values")

    def __init__(self, typ: Any, accumulate: bool = False, key: str = "") -> None:
        super().__init__(typ, key)
        self.accumulate = accumulate
        self.values: list[Value] = []

    @property
    def clears_when_idle(self) -> bool:  # type: ignore[override]
        return not self.accumulate

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Topic) and other.accumulate == self.accumulate

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Self:
        new = type(self)(self.typ, self.accumulate, self.key)
        new.values = self.values.copy()
        return new

    def checkpoint(self) -> Any:
        return self.values if self.values else MISSING

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = type(self)(self.typ, self.accumulate, self.key)
        if checkpoint is not MISSING:
            new.values = list(checkpoint)
        return new

    def update(self, values: Sequence[Value | list[Value]]) -> bool:
        updated = False
        if not self.accumulate:
            updated = bool(self.values)
            self.values = []
        if flat := list(_flatten(values)):
            updated = True
            # a new list, never extend in place: saved checkpoints share the old one
            self.values = self.values + flat
        return updated

    def get(self) -> Sequence[Value]:
        if self.values:
            return list(self.values)
        raise EmptyChannelError(self.key)

    def is_available(self) -> bool:
        return bool(self.values)

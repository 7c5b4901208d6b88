"""DeltaChannel: a reducer channel saved as the writes that built it, with periodic snapshots.

A ``BinaryOperatorAggregate`` hands its whole value to the saver whenever it
changes. A ``DeltaChannel`` hands over nothing: its writes are already saved as
the pending writes of the checkpoint before the step, so its value at a
checkpoint is rebuilt from the nearest saved snapshot plus the writes stored on
the checkpoints between (``BaseCheckpointSaver.get_delta_channel_history``).
The run saves a snapshot (the plain value) every ``snapshot_frequency`` steps
that wrote the channel, and whenever the writes on the path would not rebuild
the value: see ``engine.pregel._delta`` for when.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Sequence
from typing import Any, Generic, Self

from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel, Value
from engine.channels.binop import _overwrite_value, _strip_extras
from engine.errors import (
    EmptyChannelError,
    ErrorCode,
    InvalidUpdateError,
    error_message,
)

__all__ = ("DeltaChannel",)


class DeltaChannel(Generic[Value], BaseChannel[Any, Any, Any]):
    """Folds each step's writes in one reducer call; stored as deltas, not values.

    Args:
        reducer: ``reducer(state, [write, ...]) -> new_state``, called once per
            step with all the step's writes (in task path order). It must be
            deterministic and give the same state whether writes come in one
            batch or several: ``reducer(reducer(s, xs), ys) == reducer(s, xs + ys)``,
            because a value is rebuilt by replaying saved writes in larger batches.
        typ: the value's type; the channel starts from ``typ()`` (``[]`` for
            ``list``). In ``Annotated[list[str], DeltaChannel(r)]`` it is taken from
            the annotation. When ``typ()`` cannot be built, the reducer's first
            state is ``None``.
        snapshot_frequency: save the full value after this many steps that wrote
            the channel (a positive int; default 100). Lower means shorter replays
            on read, higher means fewer stored copies.

    An ``Overwrite(value)`` write replaces the state (``None`` resets it to
    ``typ()``); two in one step raise ``InvalidUpdateError``. The step that
    overwrites saves a snapshot, so reads never replay the discarded writes.
    """

    __slots__ = ("overwrote", "reducer", "snapshot_frequency", "value")

    def __init__(
        self,
        reducer: Callable[[Any, Sequence[Any]], Any],
        typ: type[Value] | None = None,
        *,
        snapshot_frequency: int = 100,
        key: str = "",
    ) -> None:
        if (
            isinstance(snapshot_frequency, bool)
            or not isinstance(snapshot_frequency, int)
            or snapshot_frequency <= 0
        ):
            raise ValueError(
                f"snapshot_frequency must be a positive int, got {snapshot_frequency!r}"
            )
        super().__init__(_strip_extras(list if typ is None else typ), key)
        self.reducer = reducer
        self.snapshot_frequency = snapshot_frequency
        self.value: Any = MISSING
        self.overwrote = False
        """The last update was an ``Overwrite`` (the run then saves a snapshot)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeltaChannel):
            return False
        if other.snapshot_frequency != self.snapshot_frequency:
            return False
        return other.reducer is self.reducer or (
            getattr(other.reducer, "__name__", None)
            == getattr(self.reducer, "__name__", "")
            and getattr(other.reducer, "__name__", None) != "<lambda>"
        )

    def __hash__(self) -> int:  # used in Annotated[...] metadata, which is hashed
        return hash((DeltaChannel, self.snapshot_frequency))

    def with_type(self, typ: Any, *, key: str = "") -> DeltaChannel[Any]:
        """The same channel for another value type and key (a state field's)."""
        return DeltaChannel(
            self.reducer,
            typ,
            snapshot_frequency=self.snapshot_frequency,
            key=key or self.key,
        )

    def _empty(self) -> Any:
        try:
            return self.typ()
        except Exception:
            return None

    def copy(self) -> Self:
        new = self.__class__.__new__(self.__class__)
        new.typ = self.typ
        new.key = self.key
        new.reducer = self.reducer
        new.snapshot_frequency = self.snapshot_frequency
        new.overwrote = False
        new.value = self.value if self.value is MISSING else _copy.copy(self.value)
        return new

    def from_checkpoint(self, checkpoint: Any) -> Self:
        """A channel holding ``checkpoint`` (a saved snapshot); empty when MISSING
        or None, ready for :meth:`replay_writes`."""
        new = self.copy()
        new.value = (
            self._empty() if checkpoint is MISSING or checkpoint is None else checkpoint
        )
        return new

    def replay_writes(self, writes: Sequence[tuple[str, str, Any]]) -> None:
        """Apply saved writes ``(task_id, channel, value)``, oldest first, as one batch.

        The last ``Overwrite`` among them is where the value restarts; only the
        writes after it go through the reducer.
        """
        values = [value for _, _, value in writes]
        if not values:
            return
        state = self._empty() if self.value is MISSING else self.value
        start = 0
        for index, value in enumerate(values):
            replacement = _overwrite_value(value)
            if replacement is not MISSING:
                state = self._replacement(replacement)
                start = index + 1
        rest = values[start:]
        self.value = self.reducer(state, rest) if rest else state

    def _replacement(self, value: Any) -> Any:
        return self._empty() if value is None else _copy.copy(value)

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        replacements = [r for r in map(_overwrite_value, values) if r is not MISSING]
        if len(replacements) > 1:
            raise InvalidUpdateError(
                error_message(
                    f"At key {self.key!r}: received more than one Overwrite in the "
                    "same step.",
                    ErrorCode.INVALID_CONCURRENT_GRAPH_UPDATE,
                )
            )
        self.overwrote = bool(replacements)
        if replacements:
            self.value = self._replacement(replacements[0])
            return True
        state = self._empty() if self.value is MISSING else self.value
        self.value = self.reducer(state, list(values))
        return True

    def get(self) -> Any:
        if self.value is MISSING:
            raise EmptyChannelError(self.key)
        return self.value

    def is_available(self) -> bool:
        return self.value is not MISSING

    def peek(self) -> Any:
        return self.value

    def checkpoint(self) -> Any:
        """Always MISSING: the value is saved as writes; the run stores snapshots."""
        return MISSING

"""Channel writes of a low-level node: what ``NodeBuilder.write_to`` declares.

A :class:`ChannelWriteEntry` names a channel and what to write to it: the node's
output (the default), a fixed value, or the output passed through a mapper.
:class:`ChannelWriter` turns a node's output into those writes at the end of a
task, the way every node's writers do (see ``PregelNode.writers``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from engine._internal._constants import TASKS
from engine.errors import InvalidUpdateError
from engine.types import Send

if TYPE_CHECKING:
    from engine.pregel._algo import PregelExecutableTask

__all__ = ("PASSTHROUGH", "SKIP_WRITE", "ChannelWriteEntry", "ChannelWriter")


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


PASSTHROUGH: Any = _Marker("PASSTHROUGH")
"""An entry's value meaning "the node's output"."""
SKIP_WRITE: Any = _Marker("SKIP_WRITE")
"""What a mapper returns to write nothing."""


class ChannelWriteEntry(NamedTuple):
    """One write of a node: to ``channel``, the output or ``value``.

    Args:
        channel: the channel written.
        value: what to write; ``PASSTHROUGH`` (the default) is the node's output.
        skip_none: write nothing when the value (after ``mapper``) is None;
            a node writing to a channel it reads stops a cycle this way.
        mapper: applied to the value before it is written; returning
            ``SKIP_WRITE`` writes nothing.
    """

    channel: str
    value: Any = PASSTHROUGH
    skip_none: bool = False
    mapper: Callable[[Any], Any] | None = None


class ChannelWriter:
    """A node writer (see ``PregelNode.writers``) for a list of entries and Sends.

    Raises:
        InvalidUpdateError: an entry writes to the reserved tasks channel (use a
            ``Send`` in the list instead).
    """

    __slots__ = ("entries",)

    def __init__(self, entries: Sequence[ChannelWriteEntry | Send]) -> None:
        for entry in entries:
            if isinstance(entry, ChannelWriteEntry) and entry.channel == TASKS:
                raise InvalidUpdateError("Cannot write to the reserved channel TASKS")
        self.entries = tuple(entries)

    def __call__(
        self,
        task: PregelExecutableTask,
        output: Any,
        read_fresh: Callable[[Sequence[str]], dict[str, Any]],
    ) -> None:
        task.writes.extend(self.writes_for(output))

    def writes_for(self, output: Any) -> list[tuple[str, Any]]:
        """The ``(channel, value)`` writes for a node that returned ``output``."""
        writes: list[tuple[str, Any]] = []
        for entry in self.entries:
            if isinstance(entry, Send):
                writes.append((TASKS, entry))
                continue
            value = output if entry.value is PASSTHROUGH else entry.value
            if entry.mapper is not None:
                value = entry.mapper(value)
            if value is SKIP_WRITE or (entry.skip_none and value is None):
                continue
            writes.append((entry.channel, value))
        return writes

    def __repr__(self) -> str:
        names = ",".join(
            e.channel if isinstance(e, ChannelWriteEntry) else e.node
            for e in self.entries
        )
        return f"ChannelWriter<{names}>"

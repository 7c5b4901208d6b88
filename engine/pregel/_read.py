"""PregelNode: a compiled actor, what triggers it, what it reads and how it writes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._constants import PULL
from engine._internal._ids import id_bytes
from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel
from engine.managed.base import ManagedScope, ManagedValueMapping
from engine.pregel._node_callable import NodeCallable
from engine.types import CachePolicy, RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from engine.pregel._algo import PregelExecutableTask

__all__ = ("NodeWriter", "PregelNode")

NodeWriter = Callable[
    ["PregelExecutableTask", Any, Callable[[Sequence[str]], dict[str, Any]]], None
]
"""Turns a node's return value into writes appended to ``task.writes``.

Receives the task, the node's output, and ``read_fresh(keys)``, which reads
state as it will be once this task's own writes are applied (for routing)."""


class PregelNode:
    """A node of the compiled graph.

    Args:
        name: node name (unique in the graph).
        triggers: channels whose update schedules the node.
        channels: state channels read into the node's input (a list gives a dict,
            a string gives that one channel's value).
        mapper: turns the input dict into the node's input type (pydantic model...).
        bound: the node's callable.
        writers: functions that turn the output into writes.
        managed: managed values (``RemainingSteps``...) added to the input dict.
    """

    __slots__ = (
        "bound",
        "cache_policy",
        "channels",
        "error_handler",
        "id_suffix_of",
        "last_resumed_seconds",
        "last_seconds",
        "managed",
        "mapper",
        "metadata",
        "name",
        "retry_policy",
        "sorted_triggers",
        "subgraphs",
        "tags",
        "timeout",
        "triggers",
        "writers",
    )

    def __init__(
        self,
        *,
        name: str,
        triggers: Sequence[str],
        channels: Sequence[str] | str,
        bound: NodeCallable,
        writers: Sequence[NodeWriter] = (),
        mapper: Callable[[Any], Any] | None = None,
        retry_policy: Sequence[RetryPolicy] = (),
        cache_policy: CachePolicy[Any] | None = None,
        timeout: TimeoutPolicy | None = None,
        error_handler: NodeCallable | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        subgraphs: Sequence[Any] = (),
        managed: ManagedValueMapping | None = None,
    ) -> None:
        self.name = name
        self.last_seconds: float | None = None
        """How long the node's last task took in this process (None: never ran);
        the run's saves overlap steps of nodes not known to be quick
        (``SyncPersistence.step_begins``)."""
        self.last_resumed_seconds: float | None = None
        """The same for its last task in the first step of a resumed run (a node
        that pauses quickly may do its slow work once resumed)."""
        self.triggers = list(triggers)
        self.sorted_triggers = tuple(sorted(self.triggers))
        self.id_suffix_of: tuple[str, tuple[str, ...], bytes] | None = None
        """``id_suffix``'s last answer, with the name and triggers it is for."""
        self.channels = channels
        self.bound = bound
        self.writers = list(writers)
        self.mapper = mapper
        self.retry_policy = tuple(retry_policy)
        self.cache_policy = cache_policy
        self.timeout = timeout
        self.error_handler = error_handler
        self.tags = tuple(tags)
        self.metadata = dict(metadata or {})
        self.subgraphs = list(subgraphs)
        self.managed = tuple((managed or {}).items())

    def refresh_triggers(self) -> None:
        self.sorted_triggers = tuple(sorted(self.triggers))

    def id_suffix(self, name: str) -> bytes:
        """The end of a pull task's ``id_bytes`` (after the checkpoint id,
        namespace and step), which is the same at every step: the node's name,
        ``PULL`` and its triggers, each after a NUL."""
        kept = self.id_suffix_of
        if kept is None or kept[0] is not name or kept[1] is not self.sorted_triggers:
            suffix = b"\x00" + id_bytes(name, PULL, *self.sorted_triggers)
            kept = self.id_suffix_of = (name, self.sorted_triggers, suffix)
        return kept[2]

    def read_input(
        self,
        channels: Mapping[str, BaseChannel[Any, Any, Any]],
        step: int = 0,
        stop: int | None = None,
    ) -> Any:
        """The node's input from the current channels, or MISSING when unreadable.

        With ``stop`` (where the run's recursion limit ends it), managed values
        are computed for a task running at ``step`` and added.
        """
        keys = self.channels
        if isinstance(keys, str):
            return channels[keys].peek()
        values: dict[str, Any] = {}
        for key in keys:
            value = channels[key].peek()
            if value is not MISSING:
                values[key] = value
        if self.managed and stop is not None:
            scope = ManagedScope(step, stop)
            for key, spec in self.managed:
                values[key] = spec.get(scope)
        mapper = self.mapper
        return mapper(values) if mapper is not None else values

    def map_send_input(self, arg: Any) -> Any:
        """A Send packet's argument as this node's input."""
        mapper = self.mapper
        if mapper is not None and isinstance(arg, dict):
            return mapper(arg)
        return arg

    def __repr__(self) -> str:
        return f"PregelNode(name={self.name!r}, triggers={self.triggers!r})"

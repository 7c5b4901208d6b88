"""NodeBuilder: a low-level node written against channels, built step by step.

    node = NodeBuilder().subscribe_only("a").do(lambda x: x + x).write_to("b")
    app = Pregel(nodes={"double": node}, channels={...},
                 input_channels=["a"], output_channels=["b"])

``Pregel`` builds each builder it is given (:meth:`NodeBuilder.build`) into the
:class:`~engine.pregel.PregelNode` the runtime runs, named by its key.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, Self

from engine._internal._scope import TaskScope
from engine.pregel._node_callable import NodeCallable
from engine.pregel._read import PregelNode
from engine.pregel._subgraph import find_subgraph
from engine.pregel._write import ChannelWriteEntry, ChannelWriter
from engine.types import CachePolicy, RetryPolicy, Send, TimeoutPolicy

__all__ = ("NodeBuilder",)


def _passthrough(value: Any) -> Any:
    return value


class NodeSequence(NodeCallable):
    """Several callables run one after the other, each on the previous one's output
    (what repeated :meth:`NodeBuilder.do` calls build). Each step gets what it
    asks for injected (``config``, ``runtime``, ``writer``...), as a node does."""

    __slots__ = ("steps",)

    def __init__(self, steps: list[NodeCallable], name: str | None = None) -> None:
        super().__init__(steps[0].func, name or steps[0].name)
        self.steps = tuple(steps)
        self.is_runnable = False
        self.is_graph = False
        self.is_async = any(
            step.is_async or (step.is_runnable and step.afunc is not None)
            for step in steps
        )

    def invoke(self, value: Any, scope: TaskScope) -> Any:
        for step in self.steps:
            value = step.invoke(value, scope)
        return value

    def ainvoke(self, value: Any, scope: TaskScope) -> Awaitable[Any] | None:
        if not self.is_async:
            return None  # the runner calls invoke() in a worker thread
        return self._arun(value, scope)

    async def _arun(self, value: Any, scope: TaskScope) -> Any:
        for step in self.steps:
            awaitable = step.ainvoke(value, scope)
            value = (
                await awaitable if awaitable is not None else step.invoke(value, scope)
            )
        return value


class NodeBuilder:
    """Declares a node: the channels that trigger it, what it reads, what it runs
    and the channels it writes. Every method returns the builder, for chaining.

    A node subscribed to one channel (:meth:`subscribe_only`) gets that
    channel's value; otherwise it gets a dict of the channels it reads that
    hold a value. Without :meth:`do` the node passes its input to its writes.
    """

    __slots__ = (
        "_bound",
        "_cache_policy",
        "_channels",
        "_metadata",
        "_retry_policy",
        "_tags",
        "_timeout",
        "_triggers",
        "_writes",
    )

    def __init__(self) -> None:
        self._channels: str | list[str] = []
        self._triggers: list[str] = []
        self._tags: list[str] = []
        self._metadata: dict[str, Any] = {}
        self._writes: list[ChannelWriteEntry | Send] = []
        self._bound: list[Any] = []
        self._retry_policy: list[RetryPolicy] = []
        self._cache_policy: CachePolicy[Any] | None = None
        self._timeout: TimeoutPolicy | None = None

    def subscribe_only(self, channel: str) -> Self:
        """Run when ``channel`` is updated, with its value as the input.

        Raises:
            ValueError: the node already subscribes to or reads other channels.
        """
        if self._channels:
            raise ValueError(
                "Cannot subscribe to single channels when other channels are "
                "already subscribed to"
            )
        self._channels = channel
        self._triggers.append(channel)
        return self

    def subscribe_to(self, *channels: str, read: bool = True) -> Self:
        """Run when any of ``channels`` is updated, with a dict of channel values
        as the input (``read=False``: they trigger the node but are not read).

        Raises:
            ValueError: the node subscribes to a single channel (:meth:`subscribe_only`).
        """
        if isinstance(self._channels, str):
            raise ValueError(
                "Cannot subscribe to channels when subscribed to a single channel"
            )
        if read:
            self._channels.extend(channels)
        self._triggers.extend(channels)
        return self

    def read_from(self, *channels: str) -> Self:
        """Also read ``channels`` into the input dict, without being triggered by them.

        Raises:
            ValueError: the node subscribes to a single channel (:meth:`subscribe_only`).
        """
        if isinstance(self._channels, str):
            raise ValueError(
                "Cannot read additional channels when subscribed to a single channel"
            )
        self._channels.extend(channels)
        return self

    def do(self, node: Any) -> Self:
        """Run ``node`` (a function, async function or runnable); called again,
        the next one runs on the previous one's output."""
        self._bound.append(node)
        return self

    def write_to(
        self, *channels: str | ChannelWriteEntry | Send, **kwargs: Any
    ) -> Self:
        """Write the output to ``channels``; ``name=value`` writes ``value`` to
        channel ``name``, or ``value(output)`` when it is callable.

        A :class:`~engine.pregel._write.ChannelWriteEntry` gives full control
        (``skip_none``, ``mapper``); a ``Send`` schedules a task.
        """
        self._writes.extend(
            ChannelWriteEntry(c) if isinstance(c, str) else c for c in channels
        )
        self._writes.extend(
            ChannelWriteEntry(k, mapper=v) if callable(v) else ChannelWriteEntry(k, v)
            for k, v in kwargs.items()
        )
        return self

    def meta(self, *tags: str, **metadata: Any) -> Self:
        """Add tags and metadata to the node."""
        self._tags.extend(tags)
        self._metadata.update(metadata)
        return self

    def add_retry_policies(self, *policies: RetryPolicy) -> Self:
        """Retry failed attempts by these policies (the first that matches)."""
        self._retry_policy.extend(policies)
        return self

    def add_cache_policy(self, policy: CachePolicy[Any]) -> Self:
        """Cache the node's writes by this policy (the graph needs a cache)."""
        self._cache_policy = policy
        return self

    def set_timeout(self, timeout: float | timedelta | TimeoutPolicy | None) -> Self:
        """Limit each attempt (seconds, a timedelta or a ``TimeoutPolicy``;
        the node must be async, which ``Pregel`` checks when it validates)."""
        self._timeout = TimeoutPolicy.coerce(timeout)
        return self

    def build(self, name: str = "") -> PregelNode:
        """The node the runtime runs (``Pregel`` names it by its key)."""
        bound: NodeCallable
        if not self._bound:
            bound = NodeCallable(_passthrough, name or None)
        elif len(self._bound) == 1:
            bound = NodeCallable(self._bound[0], name or None)
        else:
            bound = NodeSequence([NodeCallable(step) for step in self._bound], name)
        channels = (
            self._channels if isinstance(self._channels, str) else list(self._channels)
        )
        subgraph = find_subgraph(self._bound[0]) if len(self._bound) == 1 else None
        return PregelNode(
            name=name,
            triggers=self._triggers,
            channels=channels,
            bound=bound,
            writers=[ChannelWriter(self._writes)],
            retry_policy=self._retry_policy,
            cache_policy=self._cache_policy,
            timeout=self._timeout,
            tags=self._tags,
            metadata=self._metadata,
            subgraphs=[subgraph] if subgraph is not None else [],
        )

"""Pregel: the compiled graph's public surface (invoke, stream, state, history, update).

This module holds the constructor, the hooks ``CompiledStateGraph`` overrides,
configuration, the node cache and drawing. The rest of the surface comes from
its base classes, one module each: ``_run_methods`` (invoke, stream, batch,
stream_events; the runs are driven by ``_drive``), ``_state_methods`` (state,
history and updates for time travel, done by ``_state_read`` and
``_state_update``) and ``_schema_methods`` (input, output and context schemas).
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Self

from engine._internal._config import (
    addresses_own_thread,
    merge_configs,
    outside_config,
    resolve_parent_config,
)
from engine._internal._constants import (
    CACHE_NS_WRITES,
    CONF,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    END,
    INTERRUPT,
    NO_WRITES,
    TASKS,
)
from engine._internal._scope import TaskScope, current_scope
from engine._internal._typing import MISSING, RunnableConfig
from engine.channels.base import BaseChannel
from engine.channels.last_value import LastValue
from engine.channels.topic import Topic
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
)
from engine.pregel._algo import PregelExecutableTask
from engine.pregel._draw import draw_graph
from engine.pregel._io import (
    Mapper,
    keyed_update,
    map_input,
)
from engine.pregel._node_builder import NodeBuilder
from engine.pregel._read import PregelNode
from engine.pregel._run_methods import RunMethods
from engine.pregel._schema_methods import SchemaMethods
from engine.pregel._state_methods import StateMethods
from engine.pregel._validate import validate_graph
from engine.pregel.protocol import PregelProtocol
from engine.types import (
    All,
    Command,
    RetryPolicy,
    Send,
    StreamMode,
    ensure_valid_checkpointer,
)
from engine.warnings import LangGraphDeprecatedSinceV10

__all__ = ("NodeBuilder", "Pregel")


class Pregel(RunMethods, StateMethods, SchemaMethods):
    """A compiled graph: nodes subscribed to channels, run in super-steps.

    Usually built by ``StateGraph.compile()`` or ``@entrypoint``; the
    constructor is public for graphs written directly against channels::

        node = NodeBuilder().subscribe_only("a").do(lambda x: x + x).write_to("b")
        app = Pregel(
            nodes={"double": node},
            channels={"a": EphemeralValue(str), "b": EphemeralValue(str)},
            input_channels=["a"],
            output_channels=["b"],
        )
        app.invoke({"a": "foo"})  # {"b": "foofoo"}

    Args:
        nodes: node name -> :class:`PregelNode`, or a
            :class:`~engine.pregel.NodeBuilder` (built here, named by its key).
        channels: channel name -> channel. A ``Topic`` of ``Send`` packets is
            added under the reserved tasks channel when absent.
        input_channels: the channel the input is written to, or the channels
            an input dict's keys are written to.
        output_channels: what ``invoke`` returns: one channel's value, or a
            dict of those channels that hold a value.
        stream_channels: what ``stream_mode="values"`` and ``get_state``
            show; default every channel (:attr:`stream_channels_asis`).
        auto_validate: check the graph now (:meth:`validate`).
        stream_eager: yield stream chunks while a step's tasks still run
            (always so for the ``custom`` and ``messages`` modes).
        step_timeout: seconds a super-step may take; a step that takes longer
            raises ``TimeoutError``. Async runs cancel the step's unfinished
            tasks at the deadline; sync runs cannot stop a thread, so they raise
            once the step's tasks have finished (and keep their saved writes).
        debug: kept for LangGraph's signature; use ``stream_mode="debug"``.
        trigger_to_nodes: channel -> nodes it triggers. Used as given only with
            ``auto_validate=False`` (a caller that knows it saves the work);
            otherwise computed from the nodes.
        node_error_handler_map: node -> the node handling its errors, kept for
            LangGraph's signature: the engine runs a node's error handler from
            ``PregelNode.error_handler`` (``StateGraph.add_node(error_handler=)``),
            so a map naming a handler the node does not carry changes nothing
            (as in LangGraph, where the node must name its handler too).
        stream_transformers: scope-aware transformer factories added to every
            ``stream_events(version="v3")`` run of this graph.
        **deprecated_kwargs: ``config_type`` (deprecated in LangGraph 1.0; use
            ``context_schema``). Any other name raises ``TypeError``, where
            LangGraph ignores it silently.

    Raises:
        GraphValidationError: ``auto_validate`` found an unknown channel or node
            name, a reserved name, or a timeout on a synchronous node.
        ValueError: ``channels`` has a tasks channel that is not a ``Topic``.
    """

    output_mapper: Mapper | None = None
    """v2 stream parts: output values -> the output schema's class (StateGraph sets it
    for pydantic and dataclass schemas)."""
    state_mapper: Mapper | None = None
    """v2 stream parts: checkpoint values -> the state schema's class."""
    stream_eager: bool = False
    """Yield stream chunks while a step's tasks run (see the constructor)."""
    step_timeout: float | None = None
    """Seconds a super-step may take (see the constructor)."""

    def __init__(
        self,
        *,
        nodes: Mapping[str, PregelNode | NodeBuilder],
        channels: Mapping[str, BaseChannel[Any, Any, Any]] | None,
        auto_validate: bool = True,
        stream_mode: StreamMode = "values",
        stream_eager: bool = False,
        output_channels: str | Sequence[str],
        stream_channels: str | Sequence[str] | None = None,
        interrupt_after_nodes: All | Sequence[str] = (),
        interrupt_before_nodes: All | Sequence[str] = (),
        input_channels: str | Sequence[str],
        step_timeout: float | None = None,
        debug: bool | None = None,
        checkpointer: BaseCheckpointSaver | bool | None = None,
        store: Any = None,
        cache: Any = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] = (),
        cache_policy: Any = None,
        context_schema: type[Any] | None = None,
        config: RunnableConfig | None = None,
        trigger_to_nodes: Mapping[str, Sequence[str]] | None = None,
        node_error_handler_map: Mapping[str, str] | None = None,
        name: str = "LangGraph",
        stream_transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None = None,
        **deprecated_kwargs: Any,
    ) -> None:
        context_schema = _deprecated_config_type(context_schema, deprecated_kwargs)
        self.nodes = _built_nodes(nodes)
        self.channels = dict(channels or {})
        _add_tasks_channel(self.channels)
        for key, channel in self.channels.items():
            channel.key = key
        self.input_channels = input_channels
        self.output_channels = output_channels
        self.stream_channels = stream_channels
        self.stream_mode = stream_mode
        self.stream_eager = stream_eager
        self.interrupt_before_nodes = interrupt_before_nodes
        self.interrupt_after_nodes = interrupt_after_nodes
        self.step_timeout = step_timeout
        self.checkpointer = ensure_valid_checkpointer(checkpointer)
        self.store = store
        self.cache = cache
        self.retry_policy = (
            (retry_policy,)
            if isinstance(retry_policy, RetryPolicy)
            else tuple(retry_policy)
        )
        self.cache_policy = cache_policy
        """Cache policy of nodes and calls without their own (needs ``cache``)."""
        self.context_schema = context_schema
        self.name = name
        self.debug = bool(debug)
        self.config = config
        self.node_error_handler_map: dict[str, str] = dict(node_error_handler_map or {})
        self.stream_transformers: tuple[Callable[[tuple[str, ...]], Any], ...] = tuple(
            stream_transformers or ()
        )
        self.schema_version: int | None = None
        self.previous_channel: str | None = None
        if auto_validate:
            self.validate()
        else:
            self._index(trigger_to_nodes)

    def validate(self) -> Self:
        """Check the graph (see :func:`~engine.pregel._validate.validate_graph`)
        and recompute what runs look up; returns the graph.

        Raises:
            GraphValidationError: an unknown channel or node name, a reserved
                name, or a timeout on a synchronous node.
        """
        validate_graph(
            self.nodes,
            self.channels,
            self.input_channels,
            self.output_channels,
            self.stream_channels,
            self.interrupt_after_nodes,
            self.interrupt_before_nodes,
        )
        self._index()
        return self

    @property
    def stream_channels_asis(self) -> str | Sequence[str]:
        """The channels ``values`` streams and snapshots show: ``stream_channels``,
        or every channel when it is None."""
        return self.stream_channels or list(self.channels)

    @property
    def stream_channels_list(self) -> Sequence[str]:
        """:attr:`stream_channels_asis` as a list."""
        keys = self.stream_channels_asis
        return [keys] if isinstance(keys, str) else keys

    def _index(self, given: Mapping[str, Sequence[str]] | None = None) -> None:
        """Precompute what the hot path looks up: subscribers per channel, special
        channels (``given``: subscribers the caller already knows)."""
        trigger_to_nodes: dict[str, list[str]] = {}
        if given:
            trigger_to_nodes = {k: list(v) for k, v in given.items()}
        else:
            for name, node in self.nodes.items():
                for trigger in node.triggers:
                    trigger_to_nodes.setdefault(trigger, []).append(name)
        self.trigger_to_nodes: dict[str, tuple[str, ...]] = {
            k: tuple(sorted(v)) for k, v in trigger_to_nodes.items()
        }
        self.ephemeral_channels = tuple(
            k for k, ch in self.channels.items() if ch.clears_when_idle
        )
        self.finisher_channels = tuple(
            k
            for k, ch in self.channels.items()
            if type(ch).finish is not BaseChannel.finish
        )
        out = self.output_channels
        self.output_channel_set = frozenset((out,) if isinstance(out, str) else out)
        keys = self.stream_channels_asis
        self._update_keys: str | frozenset[str] = (
            keys if isinstance(keys, str) else frozenset(keys)
        )
        self._output_via_values = type(self) is Pregel or any(
            self.channels[k].clears_when_idle
            for k in self.output_channel_set
            if k in self.channels
        )
        """``invoke`` returns the output channels' last ``values`` chunk, as
        LangGraph's does: what a channel that clears when idle (EphemeralValue)
        held when last written, None when no output was written. StateGraph and
        entrypoint graphs, whose output channels keep their values, read them
        once at the end: the same result without a per-step read."""
        self.node_index = {name: index for index, name in enumerate(self.nodes)}

    # -- hooks overridden by CompiledStateGraph --------------------------------------

    def map_input(self, input: Any) -> list[tuple[str, Any]]:
        return map_input(self.input_channels, input)

    def map_command(self, command: Command[Any]) -> list[tuple[str, Any]]:
        writes: list[tuple[str, Any]] = []
        for target in command.goto_targets():
            if isinstance(target, Send):
                writes.append((TASKS, target))
            elif target != END:
                raise ValueError(
                    f"Command(goto={target!r}) is not supported by this graph"
                )
        writes.extend(command._update_as_tuples())
        return writes

    def map_output(self, values: Any) -> Any:
        return values

    def task_update(self, task: PregelExecutableTask) -> Any:
        """A task's ``updates`` chunk: its writes to the streamed channels (one
        channel: the value itself)."""
        return keyed_update(task.writes, self._update_keys)

    def input_metadata(self, input: Any) -> dict[str, Any]:
        """``metadata["writes"]`` of an input checkpoint: the keys given."""
        keys = list(input) if isinstance(input, dict) else []
        return {"__start__": keys}

    def read_fresh(
        self,
        channels: Mapping[str, BaseChannel[Any, Any, Any]],
        task: PregelExecutableTask,
        keys: Sequence[str],
    ) -> dict[str, Any]:
        """State as it will be once ``task``'s own writes are applied (for routing)."""
        written: dict[str, list[Any]] = {}
        for chan, value in task.writes:
            if chan in channels:
                written.setdefault(chan, []).append(value)
        values: dict[str, Any] = {}
        for key in keys:
            channel = channels[key]
            if key in written:
                pending = written[key]
                if type(channel) is LastValue and len(pending) == 1:
                    values[key] = pending[0]  # what its update would hold
                    continue
                channel = channel.copy()
                channel.update(pending)
            value = channel.peek()
            if value is not MISSING:
                values[key] = value
        return values

    def validate_update(self, as_node: str, values: Any) -> None:
        """Refuse an ``update_state`` the graph cannot apply (see StateGraph)."""

    def migrate_checkpoint(self, checkpoint: Checkpoint) -> bool:
        """Bring a checkpoint saved under an older schema up to date (see StateGraph).

        Returns True when values were migrated (they must be saved anew).
        """
        return False

    # -- configuration -------------------------------------------------------------

    def with_config(
        self, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Pregel:
        """A copy of this graph that merges ``config`` into every call's config."""
        clone = self.copy()
        clone.config = merge_configs(self.config, config, kwargs or None)
        return clone

    def copy(self, update: dict[str, Any] | None = None, **updates: Any) -> Self:
        """A shallow copy of this graph, with the attributes in ``update`` replaced."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.__dict__.update(update or {})
        clone.__dict__.update(updates)
        return clone

    def get_subgraphs(
        self, *, namespace: str | None = None, recurse: bool = False
    ) -> Iterator[tuple[str, Pregel]]:
        """Compiled graphs used as nodes (``(name, graph)`` pairs)."""
        for name, node in self.nodes.items():
            if namespace is not None and not namespace.startswith(name):
                continue
            for graph in node.subgraphs:
                yield name, graph
                if recurse:
                    for sub_name, sub in graph.get_subgraphs(recurse=True):
                        yield f"{name}|{sub_name}", sub

    async def aget_subgraphs(
        self, *, namespace: str | None = None, recurse: bool = False
    ) -> AsyncIterator[tuple[str, Pregel]]:
        """Async twin of :meth:`get_subgraphs`."""
        for item in self.get_subgraphs(namespace=namespace, recurse=recurse):
            yield item

    # -- cache ---------------------------------------------------------------------

    def clear_cache(self, nodes: Sequence[str] | None = None) -> None:
        """Forget the cached results of ``nodes`` (default: every node).

        Raises:
            ValueError: the graph was compiled without a cache.
        """
        if self.cache is None:
            raise ValueError("No cache is set for this graph. Cannot clear cache.")
        self.cache.clear(self._cache_namespaces(nodes))

    async def aclear_cache(self, nodes: Sequence[str] | None = None) -> None:
        """Async twin of :meth:`clear_cache`."""
        if self.cache is None:
            raise ValueError("No cache is set for this graph. Cannot clear cache.")
        await self.cache.aclear(self._cache_namespaces(nodes))

    def _cache_namespaces(self, nodes: Sequence[str] | None) -> list[tuple[str, ...]]:
        return [
            (CACHE_NS_WRITES, self.name, node)
            for node in (nodes or self.nodes)
            if node in self.nodes
        ]

    def _saver(self, config: RunnableConfig) -> BaseCheckpointSaver | None:
        checkpointer = self.checkpointer
        if isinstance(checkpointer, BaseCheckpointSaver):
            return checkpointer
        if checkpointer is False:
            return None
        inherited = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINTER)
        return inherited if isinstance(inherited, BaseCheckpointSaver) else None

    def _resolve(
        self, config: RunnableConfig | None, *, new_run: bool = False
    ) -> tuple[RunnableConfig, TaskScope | None]:
        parent = current_scope()
        base: RunnableConfig | None = None
        if parent is not None and addresses_own_thread(config):
            base, parent = outside_config(parent), None  # a root graph, own thread
        if parent is not None:
            base = resolve_parent_config(parent, self)
            if new_run:
                base[CONF][CONFIG_KEY_CHECKPOINT_NS] = _child_ns(
                    parent, self.checkpointer
                )
        merged = merge_configs(self.config, base, config)  # sets the default limit
        limit = merged["recursion_limit"]
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"recursion_limit must be a positive int, got {limit!r}")
        return merged, parent

    # -- drawing -------------------------------------------------------------------

    def get_graph(
        self, config: RunnableConfig | None = None, *, xray: int | bool = False
    ) -> Any:
        """Drawing data: nodes and edges (conditional ones marked)."""
        return draw_graph(self, xray=xray)

    async def aget_graph(
        self, config: RunnableConfig | None = None, *, xray: int | bool = False
    ) -> Any:
        """Async twin of :meth:`get_graph` (drawing does no I/O)."""
        return self.get_graph(config, xray=xray)

    def draw_mermaid(self, **kwargs: Any) -> str:
        return str(self.get_graph().draw_mermaid(**kwargs))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, nodes={list(self.nodes)!r})"


PregelProtocol.register(Pregel)


def _built_nodes(
    nodes: Mapping[str, PregelNode | NodeBuilder],
) -> dict[str, PregelNode]:
    """Nodes by name, builders built; a node built without a name takes its key."""
    built: dict[str, PregelNode] = {}
    for name, node in nodes.items():
        if isinstance(node, NodeBuilder):
            node = node.build(name)
        elif isinstance(node, PregelNode) and not node.name:
            node.name = name
        built[name] = node
    return built


def _add_tasks_channel(channels: dict[str, BaseChannel[Any, Any, Any]]) -> None:
    """The channel ``Send`` packets travel in; reserved, added when absent."""
    existing = channels.get(TASKS)
    if existing is None:
        channels[TASKS] = Topic(Send, accumulate=False)
    elif not isinstance(existing, Topic):
        raise ValueError(
            f"Channel {TASKS!r} is reserved and cannot be used in the graph."
        )


def _deprecated_config_type(
    context_schema: type[Any] | None, deprecated_kwargs: dict[str, Any]
) -> type[Any] | None:
    """``config_type=`` (deprecated in LangGraph 1.0) as ``context_schema``."""
    unknown = sorted(set(deprecated_kwargs) - {"config_type"})
    if unknown:
        raise TypeError(f"Pregel() got unexpected keyword arguments: {unknown}")
    if "config_type" not in deprecated_kwargs:
        return context_schema
    warnings.warn(
        LangGraphDeprecatedSinceV10(
            "`config_type` is deprecated and will be removed. "
            "Please use `context_schema` instead."
        ),
        stacklevel=3,
    )
    config_type: type[Any] | None = deprecated_kwargs["config_type"]
    return context_schema if context_schema is not None else config_type


def _child_ns(parent: TaskScope, checkpointer: Any) -> str:
    """Namespace of a graph run inside a task: the task's, numbered after the first.

    A subgraph compiled with ``checkpointer=True`` keeps one namespace per node
    path (no task ids), so its state carries over between calls on the thread.
    """
    index = parent.subgraph_counter
    parent.subgraph_counter += 1
    ns = parent.checkpoint_ns if index == 0 else f"{parent.checkpoint_ns}#{index}"
    if checkpointer is True:
        ns = "|".join(part.split(":", 1)[0] for part in ns.split("|"))
    return ns


_unused = (INTERRUPT, NO_WRITES)

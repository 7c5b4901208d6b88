"""Pregel: the compiled graph's public surface (invoke, stream, state, history, update).

It stays thin: runs are driven by ``_drive`` (around ``_loop.PregelLoop`` and
``_runner``), ``stream_events`` by ``_run_events``; state reads and writes for
time travel live in ``_state``.
"""

from __future__ import annotations

import asyncio
import queue
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, Self

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
from engine.channels.topic import Topic
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
)
from engine.pregel import _schemas, _state
from engine.pregel._algo import PregelExecutableTask
from engine.pregel._draw import draw_graph
from engine.pregel._drive import (
    adrive,
    async_sink,
    drive,
    forwarding,
    make_loop,
    parent_sink,
)
from engine.pregel._io import (
    Mapper,
    format_chunk,
    format_part,
    keyed_update,
    map_input,
    stream_modes,
)
from engine.pregel._lease import OnBusy, with_on_busy
from engine.pregel._loop import PregelLoop, StreamChunk
from engine.pregel._node_builder import NodeBuilder
from engine.pregel._read import PregelNode
from engine.pregel._run_events import (
    atyped_events,
    events_options,
    typed_events,
    v3_options,
)
from engine.pregel._subgraph import CompiledGraph, subgraph_for_config
from engine.pregel._validate import validate_graph
from engine.pregel.protocol import PregelProtocol
from engine.runtime import RunControl
from engine.stream._pregel import astart_run_stream, start_run_stream
from engine.types import (
    All,
    Command,
    Durability,
    GraphOutput,
    RetryPolicy,
    Send,
    StateSnapshot,
    StateUpdate,
    StreamMode,
    ensure_valid_checkpointer,
)
from engine.warnings import LangGraphDeprecatedSinceV10

__all__ = ("NodeBuilder", "Pregel")

_LIVE_MODES = frozenset({"custom", "messages", "tools"})
_SKIP = object()  # a stream chunk the caller did not ask for


class Pregel(CompiledGraph):
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
                channel = channel.copy()
                channel.update(written[key])
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

    # -- schemas (pydantic is imported only here) -----------------------------------

    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        """The graph's name, with ``suffix`` as LangChain adds it (``LangGraphInput``)."""
        return _schemas.graph_name(self, suffix, name)

    @property
    def InputType(self) -> Any:
        """What the input channel accepts (None when the input is several channels)."""
        return _schemas.input_type(self)

    @property
    def OutputType(self) -> Any:
        """What the output channel holds (None when the output is several channels)."""
        return _schemas.output_type(self)

    def get_input_schema(self, config: RunnableConfig | None = None) -> Any:
        """The input as a pydantic model class."""
        return _schemas.input_model(self)

    def get_output_schema(self, config: RunnableConfig | None = None) -> Any:
        """The output as a pydantic model class."""
        return _schemas.output_model(self)

    @property
    def input_schema(self) -> Any:
        """:meth:`get_input_schema` (LangChain's ``Runnable.input_schema``)."""
        return self.get_input_schema()

    @property
    def output_schema(self) -> Any:
        """:meth:`get_output_schema` (LangChain's ``Runnable.output_schema``)."""
        return self.get_output_schema()

    def get_input_jsonschema(
        self, config: RunnableConfig | None = None
    ) -> dict[str, Any]:
        """JSON Schema of the input."""
        schema: dict[str, Any] = self.get_input_schema(config).model_json_schema()
        return schema

    def get_output_jsonschema(
        self, config: RunnableConfig | None = None
    ) -> dict[str, Any]:
        """JSON Schema of the output."""
        schema: dict[str, Any] = self.get_output_schema(config).model_json_schema()
        return schema

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        """JSON Schema of the run's context (``context_schema``), None without one.

        Raises:
            ValueError: a context schema that is not a pydantic model, a
                TypedDict or a dataclass.
        """
        return _schemas.context_jsonschema(self.context_schema)

    def config_schema(self, *, include: Sequence[str] | None = None) -> Any:
        """Deprecated, as in LangGraph 1.0: use :meth:`get_context_jsonschema`.

        The run config as a pydantic model: ``configurable`` is the context
        schema, plus the config keys named in ``include``.
        """
        _deprecated("config_schema")
        return _schemas.config_model(self, include)

    def get_config_jsonschema(
        self, *, include: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """Deprecated, as in LangGraph 1.0: use :meth:`get_context_jsonschema`."""
        _deprecated("get_config_jsonschema")
        schema: dict[str, Any] = _schemas.config_model(
            self, include
        ).model_json_schema()
        return schema

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

    # -- running ---------------------------------------------------------------------

    def stream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        subgraphs: bool = False,
        debug: bool | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Run the graph and yield chunks as it goes (see ``stream_mode``).

        With one mode the chunks are that mode's payloads; with several they are
        ``(mode, payload)`` pairs; ``subgraphs=True`` prefixes the namespace.
        ``version="v2"`` yields typed parts instead, whatever the modes:
        ``{"type": mode, "ns": namespace, "data": payload}``
        (:data:`~engine.types.StreamPart`); ``values`` parts also carry
        ``interrupts``, and their data is the output schema's class when that is
        a pydantic model or a dataclass.

        ``on_busy`` ("raise" or "wait"): what to do when another run holds the
        thread, as for :meth:`invoke`.
        """
        chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        loop, shape, live = self._stream_setup(
            input,
            config,
            chunks.put,
            is_async=False,
            context=context,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            control=control,
            on_busy=on_busy,
            subgraphs=subgraphs,
            version=version,
        )
        for chunk in drive(self, loop, chunks, live):
            if (part := shape(chunk)) is not _SKIP:
                yield part

    def _stream_setup(
        self,
        input: Any,
        config: RunnableConfig | None,
        put: Callable[[StreamChunk], None],
        *,
        is_async: bool,
        context: Any,
        stream_mode: StreamMode | Sequence[StreamMode] | None,
        output_keys: str | Sequence[str] | None,
        interrupt_before: All | Sequence[str] | None,
        interrupt_after: All | Sequence[str] | None,
        durability: Durability | None,
        control: RunControl | None,
        on_busy: OnBusy | None,
        subgraphs: bool,
        version: str,
    ) -> tuple[PregelLoop, Callable[[StreamChunk], Any], bool]:
        """What :meth:`stream` and :meth:`astream` share: the run's loop (its
        chunks go to ``put``), how a chunk becomes what the caller gets (``_SKIP``
        for chunks not asked for), and whether chunks are yielded mid-step."""
        config = with_on_busy(config, on_busy)
        modes, single = stream_modes(
            stream_mode if stream_mode is not None else self.stream_mode
        )
        loop = make_loop(
            self,
            input,
            config,
            context=context,
            modes=modes,
            sink=forwarding(put, parent_sink(current_scope(), config)),
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=is_async,
            control=control,
        )
        if output_keys is not None:
            loop.stream_keys = output_keys  # values chunks of those keys
            loop.update_keys = _key_set(output_keys)  # and updates of those keys
        own = loop.ns
        if _is_v2(version):
            mappers = self._part_mappers(output_keys)

            def shape(chunk: StreamChunk) -> Any:
                ns, mode, payload = chunk
                if (ns != own and not subgraphs) or mode not in modes:
                    return _SKIP
                return format_part(ns, mode, payload, *(mappers if ns == own else ()))

        else:

            def shape(chunk: StreamChunk) -> Any:
                ns, mode, payload = chunk
                if (ns != own and not subgraphs) or mode not in modes:
                    return _SKIP
                return format_chunk(
                    ns, mode, payload, single_mode=single, subgraphs=subgraphs
                )

        return loop, shape, self.stream_eager or bool(modes & _LIVE_MODES)

    def _part_mappers(
        self, output_keys: str | Sequence[str] | None
    ) -> tuple[Mapper | None, Mapper | None]:
        """How v2 parts turn the graph's own values into its schema classes."""
        return (self.output_mapper if output_keys is None else None), self.state_mapper

    def invoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode = "values",
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Any:
        """Run the graph to completion (or to an interrupt) and return its output.

        When the run pauses, the output also holds ``"__interrupt__"``: the list of
        pending :class:`~engine.types.Interrupt` objects. With
        ``version="v2"`` it is a :class:`~engine.types.GraphOutput` instead
        (``.value``, ``.interrupts``), and another ``stream_mode`` gives the list
        of v2 parts.

        ``control`` (a :class:`~engine.runtime.RunControl`) lets another thread or
        a node stop the run cleanly: after ``control.request_drain()`` it saves
        the step in progress and raises :class:`~engine.errors.GraphDrained`;
        ``invoke(None, config)`` continues it later.

        With a checkpointer and a ``thread_id``, the run holds the thread while it
        runs (a lease, see ``engine.pregel._lease``): another run already on it
        makes this one raise :class:`~engine.errors.ThreadBusyError` before
        anything executes, or, with ``on_busy="wait"`` (also
        ``config["configurable"]["on_busy"]``), wait for it to end and then run
        on the head it left. Not in LangGraph, where both runs go on and fork the
        thread.
        """
        config = with_on_busy(config, on_busy)
        v2 = _is_v2(version)
        if stream_mode != "values":
            chunks = list(
                self.stream(
                    input,
                    config,
                    context=context,
                    stream_mode=stream_mode,
                    output_keys=output_keys,
                    interrupt_before=interrupt_before,
                    interrupt_after=interrupt_after,
                    durability=durability,
                    control=control,
                    version=version,
                )
            )
            return chunks
        parent = current_scope()
        forward = parent_sink(parent, config)
        by_values = self._output_via_values
        values: queue.SimpleQueue[Any] | None = (
            queue.SimpleQueue() if by_values else None
        )
        loop = make_loop(
            self,
            input,
            config,
            context=context,
            modes=_invoke_modes(forward, by_values),
            sink=forwarding(values.put, forward)
            if values is not None
            else (forward[0] if forward else _discard),
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=False,
            control=control,
        )
        if values is not None:
            loop.stream_keys = loop.output_keys
            last = _last_values(loop, drive(self, loop, values, False))
            return self._last_output(loop, last, output_keys, v2)
        for _ in drive(self, loop, None, False):
            pass
        return self._graph_output(loop, output_keys) if v2 else loop.output()

    def _last_output(
        self,
        loop: PregelLoop,
        last: Any,
        output_keys: str | Sequence[str] | None,
        v2: bool,
    ) -> Any:
        """``invoke``'s result from the last ``values`` chunk (see ``_output_via_values``):
        None when no output channel was ever written, as in LangGraph."""
        if isinstance(last, dict) and INTERRUPT in last:
            last = {k: v for k, v in last.items() if k != INTERRUPT}
        if v2:
            mapper = self._part_mappers(output_keys)[0]
            if mapper is not None and isinstance(last, dict):
                last = mapper(last)
            return GraphOutput(last, tuple(loop.interrupts))
        if not loop.interrupts:
            return last
        if isinstance(last, dict):
            return {**last, INTERRUPT: list(loop.interrupts)}
        return {INTERRUPT: list(loop.interrupts)}

    def _graph_output(
        self, loop: PregelLoop, output_keys: str | Sequence[str] | None
    ) -> GraphOutput[Any]:
        """``invoke(..., version="v2")``'s result: the output apart from the interrupts."""
        value = loop.output()
        interrupts: tuple[Any, ...] = ()
        if isinstance(value, dict):
            if INTERRUPT in value:
                value = dict(value)
                interrupts = tuple(value.pop(INTERRUPT))
            mapper = self._part_mappers(output_keys)[0]
            if mapper is not None:
                value = mapper(value)
        return GraphOutput(value, interrupts)

    async def ainvoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode = "values",
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Any:
        """Async twin of :meth:`invoke`."""
        config = with_on_busy(config, on_busy)
        v2 = _is_v2(version)
        if stream_mode != "values":
            return [
                chunk
                async for chunk in self.astream(
                    input,
                    config,
                    context=context,
                    stream_mode=stream_mode,
                    output_keys=output_keys,
                    interrupt_before=interrupt_before,
                    interrupt_after=interrupt_after,
                    durability=durability,
                    control=control,
                    version=version,
                )
            ]
        parent = current_scope()
        forward = parent_sink(parent, config)
        by_values = self._output_via_values
        queued: asyncio.Queue[Any] | None = asyncio.Queue() if by_values else None
        loop = make_loop(
            self,
            input,
            config,
            context=context,
            modes=_invoke_modes(forward, by_values),
            sink=forwarding(async_sink(queued), forward)
            if queued is not None
            else (forward[0] if forward else _discard),
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=True,
            control=control,
        )
        if queued is not None:
            loop.stream_keys = loop.output_keys
            last: Any = None
            async for ns, mode, payload in adrive(self, loop, queued):
                if mode == "values" and ns == loop.ns:
                    last = payload
            return self._last_output(loop, last, output_keys, v2)
        async for _ in adrive(self, loop, None):
            pass
        return self._graph_output(loop, output_keys) if v2 else loop.output()

    async def astream(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        print_mode: StreamMode | Sequence[StreamMode] = (),
        output_keys: str | Sequence[str] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        control: RunControl | None = None,
        on_busy: OnBusy | None = None,
        subgraphs: bool = False,
        debug: bool | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Async twin of :meth:`stream`."""
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        loop, shape, _ = self._stream_setup(
            input,
            config,
            async_sink(chunks),
            is_async=True,
            context=context,
            stream_mode=stream_mode,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            control=control,
            on_busy=on_busy,
            subgraphs=subgraphs,
            version=version,
        )
        async for chunk in adrive(self, loop, chunks):
            if (part := shape(chunk)) is not _SKIP:
                yield part

    def stream_events(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        subgraphs: bool = False,
        version: Literal["v1", "v2", "v3"] = "v2",
        transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run the graph and yield typed :mod:`engine.events` as it goes
        (``version="v3"``: return a :class:`~engine.stream.GraphRunStream`).

        Events cover the run, every task (with timings), each step's barrier and
        saved checkpoint, custom progress and interrupts, subgraphs included.
        The last event is :class:`~engine.events.RunFinished`; when the run fails
        it carries the error and the exception is raised after it.

        With ``stream_mode`` (one mode or several, as for :meth:`stream`), the
        chunks of those modes come too, as :class:`~engine.events.StreamPart`
        events, in :meth:`stream`'s order, each just before the typed event of the
        same moment; subgraph chunks only with ``subgraphs=True``. Without it the
        stream costs what it always did.

        ``version`` ("v2", the default, or "v1") selects these events: LangGraph's
        v1/v2 are LangChain callback events (``on_chain_start``...), which the
        engine does not produce; its typed events carry the same moments.
        ``control=`` is the run's :class:`~engine.runtime.RunControl`, as for
        :meth:`stream`.

        ``version="v3"`` is LangGraph's transformer protocol (experimental in
        LangGraph 1.2): it returns a :class:`~engine.stream.GraphRunStream` at
        once and runs the graph as the caller reads it (its event log, or
        projections such as ``run.values``, ``run.lifecycle``,
        ``run.subgraphs``). ``transformers`` (classes or ``scope -> transformer``
        factories) are added after the graph's compile-time ones; the other
        keyword arguments (``context``, ``durability``, ``control``,
        ``output_keys``...) go to :meth:`stream`, except ``stream_mode`` and
        ``subgraphs``, which v3 decides (``TypeError``). ``transformers`` is
        ignored by v1/v2, as in LangGraph.

        Example:
            >>> run = graph.stream_events({"x": 1}, version="v3")
            >>> for state in run.values:
            ...     print(state)
            >>> run.output
        """
        if version == "v3":
            options = v3_options(
                kwargs,
                context,
                interrupt_before,
                interrupt_after,
                durability,
                stream_mode,
                subgraphs,
            )
            return start_run_stream(self, input, config, transformers, options)
        control = events_options(version, kwargs)
        return typed_events(
            self,
            input,
            config,
            context=context,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            stream_mode=stream_mode,
            subgraphs=subgraphs,
            control=control,
        )

    def astream_events(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        durability: Durability | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        subgraphs: bool = False,
        version: Literal["v1", "v2", "v3"] = "v2",
        transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Async twin of :meth:`stream_events`: ``async for`` the typed events, or
        ``await`` it with ``version="v3"`` for an
        :class:`~engine.stream.AsyncGraphRunStream`."""
        if version == "v3":
            options = v3_options(
                kwargs,
                context,
                interrupt_before,
                interrupt_after,
                durability,
                stream_mode,
                subgraphs,
            )
            return astart_run_stream(self, input, config, transformers, options)
        control = events_options(version, kwargs)
        return atyped_events(
            self,
            input,
            config,
            context=context,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            stream_mode=stream_mode,
            subgraphs=subgraphs,
            control=control,
        )

    def batch(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Invoke the graph once per input (configs may be given per input)."""
        configs = _configs_for(inputs, config)
        results: list[Any] = []
        for item, cfg in zip(inputs, configs, strict=True):
            try:
                results.append(self.invoke(item, cfg, **kwargs))
            except Exception as exc:
                if not return_exceptions:
                    raise
                results.append(exc)
        return results

    async def abatch(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Async twin of :meth:`batch`; inputs run concurrently."""
        configs = _configs_for(inputs, config)
        return list(
            await asyncio.gather(
                *(
                    self.ainvoke(i, c, **kwargs)
                    for i, c in zip(inputs, configs, strict=True)
                ),
                return_exceptions=return_exceptions,
            )
        )

    # -- state (time travel) -------------------------------------------------------

    def get_state(
        self, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        """The thread's state at the addressed (or latest) checkpoint."""
        if (target := subgraph_for_config(self, config)) is not None:
            return target[0].get_state(target[1], subgraphs=subgraphs)
        return _state.get_state(self, config, subgraphs=subgraphs)

    async def aget_state(
        self, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        if (target := subgraph_for_config(self, config)) is not None:
            return await target[0].aget_state(target[1], subgraphs=subgraphs)
        return await _state.aget_state(self, config, subgraphs=subgraphs)

    def get_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """Snapshots of the thread's checkpoints, newest first."""
        if (target := subgraph_for_config(self, config)) is not None:
            return target[0].get_state_history(
                target[1], filter=filter, before=before, limit=limit
            )
        return _state.get_state_history(
            self, config, filter=filter, before=before, limit=limit
        )

    async def aget_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        if (target := subgraph_for_config(self, config)) is not None:
            async for snapshot in target[0].aget_state_history(
                target[1], filter=filter, before=before, limit=limit
            ):
                yield snapshot
            return
        async for snapshot in _state.aget_state_history(
            self, config, filter=filter, before=before, limit=limit
        ):
            yield snapshot

    def update_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> RunnableConfig:
        """Write ``values`` as if node ``as_node`` returned them; returns the new checkpoint's config.

        From a past checkpoint this creates a branch (a fork) of the thread.
        ``as_node`` defaults to the node that wrote last (when that is
        unambiguous); ``END`` (with ``values=None``) finishes the pending tasks;
        ``"__input__"`` writes as the run's input; ``"__copy__"`` copies the
        addressed checkpoint as the thread's newest (same parent, values and next
        tasks: a fork point), and ``values`` may then list ``(values, as_node)``
        updates to apply to the copy.
        """
        if (target := subgraph_for_config(self, config)) is not None:
            return target[0].update_state(target[1], values, as_node, task_id)
        return _state.update_state(
            self, config, values, as_node=as_node, task_id=task_id
        )

    async def aupdate_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> RunnableConfig:
        if (target := subgraph_for_config(self, config)) is not None:
            return await target[0].aupdate_state(target[1], values, as_node, task_id)
        return await _state.aupdate_state(
            self, config, values, as_node=as_node, task_id=task_id
        )

    def bulk_update_state(
        self,
        config: RunnableConfig,
        supersteps: Sequence[Sequence[StateUpdate]],
    ) -> RunnableConfig:
        """Apply updates in super-steps, one new checkpoint per super-step.

        Args:
            config: the thread (and optionally the checkpoint) to update.
            supersteps: each a list of ``StateUpdate(values, as_node, task_id)``
                applied together, as the tasks of one step are (``as_node`` is
                required when a super-step has several).

        Returns:
            The config of the last checkpoint written.

        Raises:
            ValueError: no super-steps, or an empty one.
            InvalidUpdateError: an update the graph cannot apply.
        """
        if (target := subgraph_for_config(self, config)) is not None:
            return target[0].bulk_update_state(target[1], supersteps)
        return _state.bulk_update_state(self, config, supersteps)

    async def abulk_update_state(
        self,
        config: RunnableConfig,
        supersteps: Sequence[Sequence[StateUpdate]],
    ) -> RunnableConfig:
        """Async twin of :meth:`bulk_update_state`."""
        if (target := subgraph_for_config(self, config)) is not None:
            return await target[0].abulk_update_state(target[1], supersteps)
        return await _state.abulk_update_state(self, config, supersteps)

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


def _key_set(keys: str | Sequence[str]) -> str | frozenset[str]:
    return keys if isinstance(keys, str) else frozenset(keys)


def _discard(_: StreamChunk) -> None:
    return None


_VALUES = frozenset({"values"})


def _invoke_modes(
    forward: tuple[Callable[[StreamChunk], None], frozenset[str]] | None,
    by_values: bool,
) -> frozenset[str]:
    """An ``invoke`` loop's modes: the parent run's (to forward), plus ``values``
    when the output is the last values chunk."""
    modes = forward[1] if forward else frozenset()
    return modes | _VALUES if by_values else modes


def _last_values(loop: PregelLoop, items: Iterator[StreamChunk]) -> Any:
    """The payload of the run's own last ``values`` chunk (None without one)."""
    last: Any = None
    own = loop.ns
    for ns, mode, payload in items:
        if mode == "values" and ns == own:
            last = payload
    return last


def _deprecated(method: str) -> None:
    warnings.warn(
        LangGraphDeprecatedSinceV10(
            f"`{method}` is deprecated. Use `get_context_jsonschema` instead."
        ),
        stacklevel=3,
    )


def _is_v2(version: str) -> bool:
    return version == "v2"  # anything else is v1, as in LangGraph


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


def _configs_for(
    inputs: Sequence[Any], config: RunnableConfig | Sequence[RunnableConfig] | None
) -> list[RunnableConfig | None]:
    if config is None or isinstance(config, Mapping):
        return [config] * len(inputs)
    configs = list(config)
    if len(configs) != len(inputs):
        raise ValueError("batch() got a different number of configs and inputs")
    return configs  # type: ignore[return-value]


_unused = (INTERRUPT, NO_WRITES)

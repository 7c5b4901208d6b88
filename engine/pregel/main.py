"""Pregel: the compiled graph's public surface (invoke, stream, state, history, update).

It stays thin: runs are driven by ``_loop.PregelLoop`` and ``_runner``; state
reads and writes for time travel live in ``_state``.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, Self

from engine import events as ev
from engine._internal._config import (
    addresses_own_thread,
    merge_configs,
    outside_config,
    resolve_parent_config,
)
from engine._internal._constants import (
    CACHE_NS_WRITES,
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_REPLAY,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_THREAD_ID,
    END,
    INTERRUPT,
    NO_WRITES,
    TASKS,
)
from engine._internal._scope import TaskScope, current_scope
from engine._internal._typing import MISSING, RunnableConfig
from engine.channels.base import BaseChannel
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointTuple,
    require_thread_id,
)
from engine.errors import (
    ErrorCode,
    GraphInterrupt,
    GraphRecursionError,
    error_message,
)
from engine.pregel import _schemas
from engine.pregel._algo import PregelExecutableTask
from engine.pregel._io import (
    Mapper,
    format_chunk,
    format_part,
    map_input,
    with_interrupts,
    writes_update,
)
from engine.pregel._loop import PregelLoop, StreamChunk
from engine.pregel._persist import AsyncPersistence, SyncPersistence
from engine.pregel._read import PregelNode
from engine.pregel._runner import arun_step, run_step
from engine.pregel._subgraph import ReplayBound, subgraph_for_config
from engine.runtime import Runtime
from engine.types import (
    All,
    Command,
    Durability,
    GraphOutput,
    Send,
    StateSnapshot,
    StateUpdate,
    StreamMode,
)

__all__ = ("Pregel",)

_LIVE_MODES = frozenset({"custom", "messages"})


class Pregel:
    """A compiled graph: nodes subscribed to channels, run in super-steps.

    Usually built by ``StateGraph.compile()``; the constructor is public for
    graphs written directly against channels.
    """

    output_mapper: Mapper | None = None
    """v2 stream parts: output values -> the output schema's class (StateGraph sets it
    for pydantic and dataclass schemas)."""
    state_mapper: Mapper | None = None
    """v2 stream parts: checkpoint values -> the state schema's class."""

    def __init__(
        self,
        *,
        nodes: Mapping[str, PregelNode],
        channels: Mapping[str, BaseChannel[Any, Any, Any]],
        input_channels: str | Sequence[str],
        output_channels: str | Sequence[str],
        stream_channels: str | Sequence[str] | None = None,
        stream_mode: StreamMode = "values",
        interrupt_before_nodes: All | Sequence[str] = (),
        interrupt_after_nodes: All | Sequence[str] = (),
        checkpointer: BaseCheckpointSaver | bool | None = None,
        store: Any = None,
        cache: Any = None,
        retry_policy: Sequence[Any] = (),
        cache_policy: Any = None,
        context_schema: type[Any] | None = None,
        name: str = "LangGraph",
        debug: bool = False,
        config: RunnableConfig | None = None,
    ) -> None:
        self.nodes = dict(nodes)
        self.channels = dict(channels)
        for key, channel in self.channels.items():
            channel.key = key
        self.input_channels = input_channels
        self.output_channels = output_channels
        self.stream_channels = (
            stream_channels if stream_channels is not None else output_channels
        )
        self.stream_mode = stream_mode
        self.interrupt_before_nodes = interrupt_before_nodes
        self.interrupt_after_nodes = interrupt_after_nodes
        self.checkpointer = checkpointer
        self.store = store
        self.cache = cache
        self.retry_policy = tuple(retry_policy)
        self.cache_policy = cache_policy
        """Cache policy of nodes and calls without their own (needs ``cache``)."""
        self.context_schema = context_schema
        self.name = name
        self.debug = debug
        self.config = config
        self.schema_version: int | None = None
        self.previous_channel: str | None = None
        self._index()

    def _index(self) -> None:
        """Precompute what the hot path looks up: subscribers per channel, special channels."""
        trigger_to_nodes: dict[str, list[str]] = {}
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
        return writes_update(task.writes, self.output_channel_set)

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

    def _make_loop(
        self,
        input: Any,
        config: RunnableConfig | None,
        *,
        context: Any,
        modes: frozenset[str],
        sink: Callable[[StreamChunk], None],
        output_keys: str | Sequence[str] | None,
        interrupt_before: All | Sequence[str] | None,
        interrupt_after: All | Sequence[str] | None,
        durability: Durability | None,
        is_async: bool,
    ) -> PregelLoop:
        merged, parent = self._resolve(config, new_run=True)
        if parent is None and self.checkpointer is True:
            raise RuntimeError("checkpointer=True cannot be used for root graphs.")
        saver = self._saver(merged)
        conf = merged.setdefault(CONF, {})
        if parent is None and conf.get(CONFIG_KEY_CHECKPOINT_NS):
            _address_root(conf)
        if saver is not None:
            require_thread_id(merged, "A graph compiled with a checkpointer")
            conf[CONFIG_KEY_CHECKPOINTER] = saver
        durability = durability or conf.get("__engine_durability") or "async"
        if durability not in ("sync", "async", "exit"):
            raise ValueError(
                f"durability must be 'sync', 'async' or 'exit', got {durability!r}"
            )
        conf["__engine_durability"] = durability
        persistence: SyncPersistence | AsyncPersistence | None = None
        if saver is not None:
            background = durability == "async"
            persistence = (
                AsyncPersistence(saver, background)
                if is_async
                else SyncPersistence(saver, background)
            )
        runtime = self._runtime(merged, context, sink, parent, modes)
        ns: tuple[str, ...] = ()
        checkpoint_ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
        if checkpoint_ns:
            ns = tuple(checkpoint_ns.split("|"))
        loop = PregelLoop(
            self,
            input=input,
            config=merged,
            checkpointer=saver,
            persistence=persistence,
            durability=durability,
            modes=modes,
            sink=sink,
            ns=ns,
            interrupt_before=interrupt_before
            if interrupt_before is not None
            else self.interrupt_before_nodes,
            interrupt_after=interrupt_after
            if interrupt_after is not None
            else self.interrupt_after_nodes,
            runtime=runtime,
            is_nested=parent is not None,
            output_keys=output_keys
            if output_keys is not None
            else self.output_channels,
            stream_keys=self.stream_channels,
        )
        loop.parent_scope = parent
        return loop

    def _runtime(
        self,
        config: RunnableConfig,
        context: Any,
        sink: Callable[[StreamChunk], None],
        parent: TaskScope | None,
        modes: frozenset[str] = frozenset(),
    ) -> Runtime[Any]:
        conf = config.get(CONF, {})
        ns_str = conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
        ns = tuple(ns_str.split("|")) if ns_str else ()
        inherited: Runtime[Any] | None = parent.runtime if parent is not None else None
        if context is None and inherited is not None:
            context = inherited.context
        if context is not None and self.context_schema is not None:
            context = _coerce_context(self.context_schema, context)
        store = (
            self.store
            if self.store is not None
            else (inherited.store if inherited else None)
        )

        if "custom" in modes:

            def writer(chunk: Any) -> None:
                sink((ns, "custom", chunk))

        else:

            def writer(chunk: Any) -> None:
                return None

        return Runtime(
            context=context,
            store=store,
            stream_writer=writer,
            previous=None,
            thread_id=conf.get(CONFIG_KEY_THREAD_ID),
            run_id=str(config["run_id"]) if config.get("run_id") is not None else None,
        )

    def _load(self, loop: PregelLoop) -> tuple[CheckpointTuple | None, str | None]:
        saver = loop.checkpointer
        if saver is None:
            return None, None
        config = loop.config
        if (replay := _replaying(config)) is not None:
            loop.branch_off()
            before = saver.list(config, before=replay.before(), limit=1)
            return next(iter(before), None), None
        saved = saver.get_tuple(config)
        head = _head_id(saver, config, saved)
        _check_found(config, saved)
        return saved, head

    async def _aload(
        self, loop: PregelLoop
    ) -> tuple[CheckpointTuple | None, str | None]:
        saver = loop.checkpointer
        if saver is None:
            return None, None
        config = loop.config
        if (replay := _replaying(config)) is not None:
            loop.branch_off()
            async for found in saver.alist(config, before=replay.before(), limit=1):
                return found, None
            return None, None
        saved = await saver.aget_tuple(config)
        head = None
        if config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID) and saved is not None:
            latest = await saver.aget_tuple(_without_checkpoint_id(config))
            head = latest.checkpoint["id"] if latest is not None else None
        _check_found(config, saved)
        return saved, head

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
        """
        v2 = _is_v2(version)
        modes, single = _modes(
            stream_mode if stream_mode is not None else self.stream_mode
        )
        chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        sink = _forwarding(chunks.put, _parent_sink(current_scope(), config))
        loop = self._make_loop(
            input,
            config,
            context=context,
            modes=modes,
            sink=sink,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=False,
        )
        live = bool(modes & _LIVE_MODES)
        own = loop.ns
        if v2:
            mappers = self._part_mappers(output_keys)
            for ns, mode, payload in self._drive(loop, chunks, live):
                if (ns != own and not subgraphs) or mode not in modes:
                    continue
                yield format_part(ns, mode, payload, *(mappers if ns == own else ()))
            return
        for ns, mode, payload in self._drive(loop, chunks, live):
            if (ns != own and not subgraphs) or mode not in modes:
                continue
            yield format_chunk(
                ns, mode, payload, single_mode=single, subgraphs=subgraphs
            )

    def _part_mappers(
        self, output_keys: str | Sequence[str] | None
    ) -> tuple[Mapper | None, Mapper | None]:
        """How v2 parts turn the graph's own values into its schema classes."""
        return (self.output_mapper if output_keys is None else None), self.state_mapper

    def _drive(
        self, loop: PregelLoop, chunks: queue.SimpleQueue[Any] | None, live: bool
    ) -> Iterator[StreamChunk]:
        saved, head = self._load(loop)
        try:
            loop.start(saved, head)
            if chunks is not None:
                yield from _drain(chunks)
            sync_saves = loop.durability == "sync" and loop.persistence is not None
            while loop.tick():
                if keys := loop.cache_probe():
                    loop.apply_cache_hits(loop.cache.get(keys))
                yield from run_step(loop, chunks, live)
                if loop.status == "interrupted":
                    break
                if loop.cache is not None and (updates := loop.cache_updates()):
                    loop.cache.set(updates)
                loop.after_tick()
                if chunks is not None:
                    yield from _drain(chunks)
                if loop.status == "interrupt_after":
                    break
                if sync_saves:
                    loop.persistence.flush()  # type: ignore[union-attr]
            loop.finish()
        except BaseException:
            _flush_quietly(loop)
            raise
        if chunks is not None:
            yield from _drain(chunks)
        yield from self._closing_chunks(loop)

    def _closing_chunks(self, loop: PregelLoop) -> Iterator[StreamChunk]:
        if loop.status == "out_of_steps":
            raise GraphRecursionError(
                error_message(
                    f"Recursion limit of {loop.recursion_limit} reached without hitting a stop "
                    "condition. You can increase the limit by setting the `recursion_limit` "
                    "config key.",
                    ErrorCode.GRAPH_RECURSION_LIMIT,
                )
            )
        if loop.interrupts and "values" in loop.modes:
            yield (
                loop.ns,
                "values",
                with_interrupts(
                    loop.output_values(loop.stream_keys, with_pending=True),
                    loop.interrupts,
                ),
            )
        if loop.is_nested and loop.status in (
            "interrupted",
            "interrupt_before",
            "interrupt_after",
        ):
            raise GraphInterrupt(loop.interrupts)

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
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Any:
        """Run the graph to completion (or to an interrupt) and return its output.

        When the run pauses, the output also holds ``"__interrupt__"``: the list of
        pending :class:`~engine.types.Interrupt` objects. With
        ``version="v2"`` it is a :class:`~engine.types.GraphOutput` instead
        (``.value``, ``.interrupts``), and another ``stream_mode`` gives the list
        of v2 parts.
        """
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
                    version=version,
                )
            )
            return chunks
        parent = current_scope()
        forward = _parent_sink(parent, config)
        loop = self._make_loop(
            input,
            config,
            context=context,
            modes=forward[1] if forward else frozenset(),
            sink=forward[0] if forward else _discard,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=False,
        )
        for _ in self._drive(loop, None, False):
            pass
        return self._graph_output(loop, output_keys) if v2 else loop.output()

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
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Any:
        """Async twin of :meth:`invoke`."""
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
                    version=version,
                )
            ]
        parent = current_scope()
        forward = _parent_sink(parent, config)
        loop = self._make_loop(
            input,
            config,
            context=context,
            modes=forward[1] if forward else frozenset(),
            sink=forward[0] if forward else _discard,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=True,
        )
        async for _ in self._adrive(loop, None):
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
        subgraphs: bool = False,
        debug: bool | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Async twin of :meth:`stream`."""
        v2 = _is_v2(version)
        modes, single = _modes(
            stream_mode if stream_mode is not None else self.stream_mode
        )
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        sink = _forwarding(_async_sink(chunks), _parent_sink(current_scope(), config))

        loop = self._make_loop(
            input,
            config,
            context=context,
            modes=modes,
            sink=sink,
            output_keys=output_keys,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=True,
        )
        own = loop.ns
        mappers = self._part_mappers(output_keys) if v2 else (None, None)
        async for ns, mode, payload in self._adrive(loop, chunks):
            if (ns != own and not subgraphs) or mode not in modes:
                continue
            if v2:
                yield format_part(ns, mode, payload, *(mappers if ns == own else ()))
            else:
                yield format_chunk(
                    ns, mode, payload, single_mode=single, subgraphs=subgraphs
                )

    async def _adrive(
        self, loop: PregelLoop, chunks: asyncio.Queue[Any] | None
    ) -> AsyncIterator[StreamChunk]:
        saved, head = await self._aload(loop)
        persistence = loop.persistence
        try:
            loop.start(saved, head)
            if chunks is not None:
                for item in _adrain(chunks):
                    yield item
            while loop.tick():
                if keys := loop.cache_probe():
                    loop.apply_cache_hits(await loop.cache.aget(keys))
                async for item in arun_step(loop, chunks):
                    yield item
                if loop.status == "interrupted":
                    break
                if loop.cache is not None and (updates := loop.cache_updates()):
                    await loop.cache.aset(updates)
                loop.after_tick()
                if chunks is not None:
                    for item in _adrain(chunks):
                        yield item
                if loop.status == "interrupt_after":
                    break
                if isinstance(persistence, AsyncPersistence) and (
                    loop.durability == "sync" or persistence.needs_backpressure
                ):
                    await persistence.aflush()
            loop.finish()
            if isinstance(persistence, AsyncPersistence):
                await persistence.aflush()
        except BaseException:
            if isinstance(persistence, AsyncPersistence):
                with contextlib.suppress(BaseException):
                    await persistence.aflush()
            raise
        if chunks is not None:
            for item in _adrain(chunks):
                yield item
        for item in self._closing_chunks(loop):
            yield item

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
    ) -> Iterator[ev.RunEvent]:
        """Run the graph and yield typed :mod:`engine.events` as it goes.

        Events cover the run, every task (with timings), each step's barrier and
        saved checkpoint, custom progress and interrupts, subgraphs included.
        The last event is :class:`~engine.events.RunFinished`; when the run fails
        it carries the error and the exception is raised after it.

        With ``stream_mode`` (one mode or several, as for :meth:`stream`), the
        chunks of those modes come too, as :class:`~engine.events.StreamPart`
        events, in :meth:`stream`'s order, each just before the typed event of the
        same moment; subgraph chunks only with ``subgraphs=True``. Without it the
        stream costs what it always did.
        """
        modes, parts = _event_modes(stream_mode)
        chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        loop = self._make_loop(
            input,
            config,
            context=context,
            modes=modes,
            sink=_forwarding(chunks.put, _parent_sink(current_scope(), config)),
            output_keys=None,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=False,
        )
        try:
            if not parts:
                for ns, mode, payload in self._drive(loop, chunks, True):
                    event = _as_event(ns, mode, payload)
                    if event is not None:
                        yield event
            else:
                for ns, mode, payload in self._drive(loop, chunks, True):
                    if mode in parts and (subgraphs or not ns):
                        yield ev.StreamPart(ns, mode, payload)
                    event = _as_event(ns, mode, payload)
                    if event is not None:
                        yield event
        except GeneratorExit:
            raise  # the consumer stopped listening: nothing more to say
        except BaseException as exc:
            yield ev.RunFinished(
                loop.ns, "error", f"{type(exc).__name__}: {exc}", time.time()
            )
            raise
        yield ev.RunFinished(loop.ns, _final_status(loop), None, time.time())

    async def astream_events(
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
    ) -> AsyncIterator[ev.RunEvent]:
        """Async twin of :meth:`stream_events`."""
        modes, parts = _event_modes(stream_mode)
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        sink = _async_sink(chunks)
        loop = self._make_loop(
            input,
            config,
            context=context,
            modes=modes,
            sink=_forwarding(sink, _parent_sink(current_scope(), config)),
            output_keys=None,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            durability=durability,
            is_async=True,
        )
        try:
            async for ns, mode, payload in self._adrive(loop, chunks):
                if parts and mode in parts and (subgraphs or not ns):
                    yield ev.StreamPart(ns, mode, payload)
                event = _as_event(ns, mode, payload)
                if event is not None:
                    yield event
        except GeneratorExit:
            raise  # the consumer stopped listening: nothing more to say
        except BaseException as exc:
            yield ev.RunFinished(
                loop.ns, "error", f"{type(exc).__name__}: {exc}", time.time()
            )
            raise
        yield ev.RunFinished(loop.ns, _final_status(loop), None, time.time())

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
        from engine.pregel import _state  # noqa: PLC0415 - keeps import graph small

        if (target := subgraph_for_config(self, config)) is not None:
            return target[0].get_state(target[1], subgraphs=subgraphs)
        return _state.get_state(self, config, subgraphs=subgraphs)

    async def aget_state(
        self, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        from engine.pregel import _state  # noqa: PLC0415

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
        from engine.pregel import _state  # noqa: PLC0415

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
        from engine.pregel import _state  # noqa: PLC0415

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
        from engine.pregel import _state  # noqa: PLC0415

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
        from engine.pregel import _state  # noqa: PLC0415

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
        from engine.pregel import _state  # noqa: PLC0415

        if (target := subgraph_for_config(self, config)) is not None:
            return target[0].bulk_update_state(target[1], supersteps)
        return _state.bulk_update_state(self, config, supersteps)

    async def abulk_update_state(
        self,
        config: RunnableConfig,
        supersteps: Sequence[Sequence[StateUpdate]],
    ) -> RunnableConfig:
        """Async twin of :meth:`bulk_update_state`."""
        from engine.pregel import _state  # noqa: PLC0415

        if (target := subgraph_for_config(self, config)) is not None:
            return await target[0].abulk_update_state(target[1], supersteps)
        return await _state.abulk_update_state(self, config, supersteps)

    # -- drawing -------------------------------------------------------------------

    def get_graph(
        self, config: RunnableConfig | None = None, *, xray: int | bool = False
    ) -> Any:
        """Drawing data: nodes and edges (conditional ones marked)."""
        from engine.pregel._draw import draw_graph  # noqa: PLC0415

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


def _modes(
    stream_mode: StreamMode | Sequence[StreamMode],
) -> tuple[frozenset[str], bool]:
    if isinstance(stream_mode, str):
        modes = frozenset((stream_mode,))
        single = True
    else:
        modes = frozenset(stream_mode)
        single = False
    unknown = modes - {
        "values",
        "updates",
        "checkpoints",
        "tasks",
        "debug",
        "messages",
        "custom",
    }
    if unknown:
        raise ValueError(f"Unknown stream_mode {sorted(unknown)}")
    return modes, single


def _discard(_: StreamChunk) -> None:
    return None


def _deprecated(method: str) -> None:
    from engine.warnings import LangGraphDeprecatedSinceV10  # noqa: PLC0415

    warnings.warn(
        LangGraphDeprecatedSinceV10(
            f"`{method}` is deprecated. Use `get_context_jsonschema` instead."
        ),
        stacklevel=3,
    )


def _is_v2(version: str) -> bool:
    return version == "v2"  # anything else is v1, as in LangGraph


_EVENT_MODES = frozenset({"events", "custom"})
_NO_PARTS: frozenset[str] = frozenset()


def _event_modes(
    stream_mode: StreamMode | Sequence[StreamMode] | None,
) -> tuple[frozenset[str], frozenset[str]]:
    """The loop's modes for ``stream_events`` and the modes yielded as StreamParts."""
    if stream_mode is None:
        return _EVENT_MODES, _NO_PARTS
    parts, _ = _modes(stream_mode)
    return _EVENT_MODES | parts, parts


def _as_event(ns: tuple[str, ...], mode: str, payload: Any) -> Any:
    if mode == "events":
        return payload
    if mode == "custom":
        return ev.Custom(ns, payload)
    return None


def _final_status(loop: PregelLoop) -> Literal["done", "interrupted"]:
    if loop.status in ("interrupted", "interrupt_before", "interrupt_after"):
        return "interrupted"
    return "done"


def _async_sink(chunks: asyncio.Queue[Any]) -> Callable[[StreamChunk], None]:
    """A sink usable from the event loop's thread and from worker threads."""
    event_loop = asyncio.get_running_loop()
    owner = threading.get_ident()

    def sink(item: StreamChunk) -> None:
        if threading.get_ident() == owner:
            chunks.put_nowait(item)
        else:
            event_loop.call_soon_threadsafe(chunks.put_nowait, item)

    return sink


def _forwarding(
    own: Callable[[StreamChunk], None],
    parent: tuple[Callable[[StreamChunk], None], frozenset[str]] | None,
) -> Callable[[StreamChunk], None]:
    """A nested stream's sink: its own queue, and the parent run's stream too."""
    if parent is None:
        return own
    parent_sink, parent_modes = parent

    def both(chunk: StreamChunk) -> None:
        own(chunk)
        if chunk[1] in parent_modes:
            parent_sink(chunk)

    return both


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


def _drain(chunks: queue.SimpleQueue[Any]) -> Iterator[StreamChunk]:
    while True:
        try:
            yield chunks.get_nowait()
        except queue.Empty:
            return


def _adrain(chunks: asyncio.Queue[Any]) -> Iterator[StreamChunk]:
    while not chunks.empty():
        yield chunks.get_nowait()


def _flush_quietly(loop: PregelLoop) -> None:
    persistence = loop.persistence
    if isinstance(persistence, SyncPersistence):
        with contextlib.suppress(BaseException):
            persistence.flush()


def _address_root(conf: dict[str, Any]) -> None:
    """A root run given a subgraph's checkpoint config (from its snapshot) runs the
    graph from the root checkpoint that subgraph checkpoint was taken under
    (``checkpoint_map[""]``), or from the latest one, as in LangGraph."""
    conf[CONFIG_KEY_CHECKPOINT_NS] = ""
    root = (conf.get(CONFIG_KEY_CHECKPOINT_MAP) or {}).get("")
    if root:
        conf[CONFIG_KEY_CHECKPOINT_ID] = root
    else:
        conf.pop(CONFIG_KEY_CHECKPOINT_ID, None)


def _replaying(config: RunnableConfig) -> ReplayBound | None:
    """The parent's replay, when this subgraph run is its first in the replay:
    it then starts from its checkpoint before the replayed one, as a new run."""
    conf = config.get(CONF, {})
    replay = conf.get(CONFIG_KEY_REPLAY)
    if replay is None or conf.get(CONFIG_KEY_CHECKPOINT_ID):
        return None
    if not replay.first_visit(conf.get(CONFIG_KEY_CHECKPOINT_NS, "")):
        return None
    conf.pop(CONFIG_KEY_RESUMING, None)  # the input starts it, it does not resume
    return replay  # type: ignore[no-any-return]


def _parent_sink(
    parent: TaskScope | None, config: RunnableConfig | None = None
) -> tuple[Callable[[StreamChunk], None], frozenset[str]] | None:
    """A nested run forwards its chunks to the parent run's stream (namespaced);
    a graph run on its own thread from inside a task does not nest."""
    if parent is None or addresses_own_thread(config):
        return None
    return parent.stream_sink


def _configs_for(
    inputs: Sequence[Any], config: RunnableConfig | Sequence[RunnableConfig] | None
) -> list[RunnableConfig | None]:
    if config is None or isinstance(config, Mapping):
        return [config] * len(inputs)
    configs = list(config)
    if len(configs) != len(inputs):
        raise ValueError("batch() got a different number of configs and inputs")
    return configs  # type: ignore[return-value]


def _coerce_context(schema: type[Any], context: Any) -> Any:
    if isinstance(context, schema):
        return context
    if isinstance(context, Mapping) and hasattr(schema, "model_validate"):
        return schema.model_validate(context)
    if isinstance(context, Mapping):
        try:
            return schema(**context)
        except TypeError:
            return context
    return context


def _without_checkpoint_id(config: RunnableConfig) -> RunnableConfig:
    conf = {
        k: v for k, v in config.get(CONF, {}).items() if k != CONFIG_KEY_CHECKPOINT_ID
    }
    return {**config, CONF: conf}


def _head_id(
    saver: BaseCheckpointSaver, config: RunnableConfig, saved: CheckpointTuple | None
) -> str | None:
    if saved is None:
        return None
    if not config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID):
        return saved.checkpoint["id"]
    latest = saver.get_tuple(_without_checkpoint_id(config))
    return latest.checkpoint["id"] if latest is not None else None


def _check_found(config: RunnableConfig, saved: CheckpointTuple | None) -> None:
    checkpoint_id = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    if checkpoint_id and saved is None:
        from engine.errors import CheckpointNotFoundError  # noqa: PLC0415

        raise CheckpointNotFoundError(
            error_message(
                f"Checkpoint {checkpoint_id!r} does not exist on thread "
                f"{config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)!r}",
                ErrorCode.CHECKPOINT_NOT_FOUND,
            )
        )


_unused = (INTERRUPT, NO_WRITES)

"""CompiledStateGraph: a StateGraph compiled into a Pregel graph.

``CompiledStateGraph.build`` turns a validated builder's nodes, edges and
branches into Pregel nodes and channels; the class overrides Pregel's hooks for
state: input coercion, ``Command`` routing, update validation and schema
migrations of old checkpoints. Re-exported from ``engine.graph.state``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._constants import (
    END,
    START,
    TASKS,
)
from engine.channels.base import BaseChannel
from engine.channels.ephemeral_value import EphemeralValue
from engine.channels.last_value import LastValueAfterFinish
from engine.channels.named_barrier_value import (
    NamedBarrierValue,
    NamedBarrierValueAfterFinish,
)
from engine.channels.topic import Topic
from engine.checkpoint.base import Checkpoint
from engine.constants import TAG_HIDDEN
from engine.errors import (
    ErrorCode,
    InvalidUpdateError,
    SchemaMigrationError,
    error_message,
)
from engine.graph._branch import branch_channel
from engine.graph._node_writer import NodeWriter
from engine.graph._schema import SchemaInfo, coerce_input, make_mapper
from engine.pregel._algo import PregelExecutableTask
from engine.pregel._io import writes_update
from engine.pregel._node_callable import NodeCallable
from engine.pregel._read import PregelNode
from engine.pregel._subgraph import find_subgraph
from engine.pregel.main import Pregel
from engine.types import (
    All,
    Command,
    Send,
)

if TYPE_CHECKING:
    from engine.graph.state import StateGraph

__all__ = ("CompiledStateGraph", "Migration")

Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""A schema migration: a checkpoint's values at one schema version -> the next version's."""


class CompiledStateGraph(Pregel):
    """A compiled :class:`StateGraph`: run it with ``invoke``/``stream`` and their async twins."""

    builder: StateGraph[Any, Any, Any, Any]

    @classmethod
    def build(
        cls,
        builder: StateGraph[Any, Any, Any, Any],
        *,
        checkpointer: Any,
        cache: Any,
        store: Any,
        interrupt_before: All | Sequence[str],
        interrupt_after: All | Sequence[str],
        debug: bool,
        name: str,
        strict_input: bool = False,
    ) -> CompiledStateGraph:
        graph_name = name
        channels: dict[str, BaseChannel[Any, Any, Any]] = {
            key: channel.copy() for key, channel in builder.channels.items()
        }
        state_info = builder.schemas[builder.state_schema]
        input_info = builder.schemas[builder.input_schema]
        output_info = builder.schemas[builder.output_schema]
        state_keys = tuple(k for k in builder.channels)
        output_keys = frozenset(builder.channels)
        channels[START] = EphemeralValue(builder.input_schema, key=START)
        channels[TASKS] = Topic(Send, accumulate=False, key=TASKS)
        for name, spec in builder.nodes.items():
            channels[branch_channel(name)] = (
                LastValueAfterFinish(Any, key=branch_channel(name))
                if spec.defer
                else EphemeralValue(Any, guard=False, key=branch_channel(name))
            )
        edges_from: defaultdict[str, list[tuple[str, Any]]] = defaultdict(list)
        triggers: defaultdict[str, list[str]] = defaultdict(list)
        for name in builder.nodes:
            triggers[name].append(branch_channel(name))
        for src, dst in sorted(builder.edges):
            if dst != END:
                edges_from[src].append((branch_channel(dst), None))
        for starts, dst in sorted(builder.waiting_edges):
            if dst == END:
                continue
            channel_name = f"join:{'+'.join(starts)}:{dst}"
            channels[channel_name] = (
                NamedBarrierValueAfterFinish(str, set(starts), key=channel_name)
                if builder.nodes[dst].defer
                else NamedBarrierValue(str, set(starts), key=channel_name)
            )
            triggers[dst].append(channel_name)
            for src in starts:
                edges_from[src].append((channel_name, src))
        state_mapper = make_mapper(state_info)
        writers: dict[str, NodeWriter] = {}
        nodes: dict[str, PregelNode] = {}
        start_writer = NodeWriter(
            START,
            frozenset(input_info.keys) if input_info.keys else output_keys,
            edges_from.get(START, []),
            list(builder.branches.get(START, {}).values()),
            state_keys,
            state_mapper,
        )
        writers[START] = start_writer
        nodes[START] = PregelNode(
            name=START,
            triggers=[START],
            channels=START,
            bound=NodeCallable(_identity, START),
            writers=[start_writer],
            tags=[TAG_HIDDEN],
        )
        for name, spec in builder.nodes.items():
            info = builder.schemas[spec.input_schema]
            runnable = spec.runnable
            subgraph = find_subgraph(runnable)
            writer = NodeWriter(
                name,
                output_keys,
                edges_from.get(name, []),
                list(builder.branches.get(name, {}).values()),
                state_keys,
                state_mapper,
                whole_state=subgraph is not None and subgraph is runnable,
            )
            writers[name] = writer
            subgraphs = [subgraph] if subgraph is not None else []
            policies = builder.node_policies(name)
            nodes[name] = PregelNode(
                name=name,
                triggers=triggers[name],
                channels=list(info.keys) if info.keys else list(state_keys),
                mapper=make_mapper(info),
                bound=NodeCallable(runnable, name),
                writers=[writer],
                retry_policy=policies.retry_policy,
                cache_policy=policies.cache_policy,
                timeout=policies.timeout,
                error_handler=NodeCallable(
                    policies.error_handler, f"{name}:error_handler"
                )
                if policies.error_handler is not None
                else None,
                metadata=spec.metadata,
                subgraphs=subgraphs,
                managed=info.managed,
            )
        graph = cls(
            nodes=nodes,
            channels=channels,
            input_channels=START,
            output_channels=list(output_info.keys)
            if output_info.keys
            else list(state_keys),
            stream_channels=list(state_keys),
            stream_mode="updates",
            interrupt_before_nodes=interrupt_before,
            interrupt_after_nodes=interrupt_after,
            checkpointer=checkpointer,
            store=store,
            cache=cache,
            context_schema=builder.context_schema,
            name=graph_name,
            debug=debug,
        )
        graph.builder = builder
        graph.state_info = state_info
        graph.input_info = input_info
        graph.output_info = output_info
        graph.node_names = frozenset(builder.nodes)
        graph.schema_version = builder.schema_version
        graph.migrations = dict(builder.migrations)
        graph.state_channel_set = output_keys
        graph.input_keys = (
            frozenset(input_info.keys) if input_info.keys else output_keys
        )
        graph.strict_input = strict_input
        if output_info.kind in _OBJECT_KINDS:
            graph.output_mapper = _keys_mapper(output_info)
        if state_info.kind in _OBJECT_KINDS:
            graph.state_mapper = state_mapper
        managed_keys = frozenset(
            key for info in builder.schemas.values() for key in info.managed
        )
        for writer in writers.values():
            writer.graph = graph
            writer.managed_keys = managed_keys
            writer.managed = tuple(state_info.managed) if writer.branches else ()
        return graph

    # -- hooks -----------------------------------------------------------------------

    state_info: SchemaInfo
    input_info: SchemaInfo
    output_info: SchemaInfo
    node_names: frozenset[str]
    migrations: dict[int, Migration]
    state_channel_set: frozenset[str]
    input_keys: frozenset[str]
    strict_input: bool

    def goto_write(self, target: Any, where: str) -> tuple[str, Any]:
        if isinstance(target, Send):
            if target.node not in self.node_names:
                raise InvalidUpdateError(
                    error_message(
                        f"{where.capitalize()} sent to unknown node {target.node!r}",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
            return (TASKS, target)
        if target == END:
            return ("__no_writes__", None)
        if target not in self.node_names:
            raise InvalidUpdateError(
                error_message(
                    f"{where.capitalize()} tried to go to unknown node {target!r} "
                    f"(nodes: {sorted(self.node_names)})",
                    ErrorCode.INVALID_GRAPH,
                )
            )
        return (branch_channel(target), None)

    def map_input(self, input: Any) -> list[tuple[str, Any]]:
        if input is None:
            return []
        allowed = self.input_keys
        if (
            not self.strict_input
            and isinstance(input, dict)
            and any(key not in allowed for key in input)
        ):
            input = {k: v for k, v in input.items() if k in allowed}
        pairs = coerce_input(self.input_info, input, "the input")
        for key, _ in pairs:
            if key not in allowed:
                if not self.strict_input:  # fields of an input object
                    pairs = [pair for pair in pairs if pair[0] in allowed]
                    break
                raise InvalidUpdateError(
                    error_message(
                        f"The input has key {key!r}, which is not in the input schema "
                        f"{self.input_info.schema.__name__} (keys: {sorted(allowed)}). "
                        "This graph was compiled with strict_input=True.",
                        ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
                    )
                )
        return [(START, dict(pairs))]

    def map_command(self, command: Command[Any]) -> list[tuple[str, Any]]:
        writes: list[tuple[str, Any]] = []
        if command.graph == Command.PARENT:
            raise InvalidUpdateError(
                "Command(graph=Command.PARENT) cannot be used as input"
            )
        if command.update is not None:
            update = command.update
            if isinstance(update, (list, tuple)):
                pairs = list(update)
            else:
                pairs = coerce_input(self.state_info, update, "Command(update=...)")
            for key, value in pairs:
                if key not in self.state_channel_set:
                    raise InvalidUpdateError(
                        error_message(
                            f"Command(update=...) has key {key!r}, which is not in the state "
                            f"schema (keys: {sorted(self.state_channel_set)})",
                            ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
                        )
                    )
                writes.append((key, value))
        for target in command.goto_targets():
            chan, value = self.goto_write(target, "Command(goto=...)")
            if chan != "__no_writes__":
                writes.append((chan, value if chan == TASKS else START))
        return writes

    def task_update(self, task: PregelExecutableTask) -> Any:
        return writes_update(task.writes, self.state_channel_set)

    def input_metadata(self, input: Any) -> dict[str, Any]:
        keys = list(input) if isinstance(input, dict) else []
        return {START: keys}

    def validate_update(self, as_node: str, values: Any) -> None:
        if isinstance(values, dict):
            for key in values:
                if key not in self.state_channel_set:
                    raise InvalidUpdateError(
                        error_message(
                            f"update_state() got key {key!r}, which is not in the state schema "
                            f"(keys: {sorted(self.state_channel_set)})",
                            ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
                        )
                    )

    def migrate_checkpoint(self, checkpoint: Checkpoint) -> bool:
        """Upgrade values saved under an older ``schema_version``, or refuse them."""
        saved_version = checkpoint.get("schema_version")
        current = self.schema_version
        if saved_version is None or current is None or saved_version == current:
            unknown = sorted(
                k for k in checkpoint["channel_values"] if k not in self.channels
            )
            if unknown:
                raise SchemaMigrationError(
                    error_message(
                        f"Checkpoint {checkpoint.get('id')} holds state field {unknown[0]!r}, "
                        f"which state schema version {current} does not declare. If the field "
                        "was removed or renamed, raise StateGraph(schema_version=...) and "
                        "register a migration with add_migration().",
                        ErrorCode.SCHEMA_VERSION,
                    )
                )
            return False
        if saved_version > current:
            raise SchemaMigrationError(
                error_message(
                    f"Checkpoint {checkpoint.get('id')} was saved under state schema version "
                    f"{saved_version}, newer than this graph's version {current}; run the "
                    "newer code to read it.",
                    ErrorCode.SCHEMA_VERSION,
                )
            )
        values = dict(checkpoint["channel_values"])
        version = saved_version
        while version < current:
            migrate = self.migrations.get(version)
            if migrate is None:
                raise SchemaMigrationError(
                    error_message(
                        f"Checkpoint {checkpoint.get('id')} was saved under state schema "
                        f"version {version} and no migration to version {version + 1} is "
                        "registered (StateGraph.add_migration).",
                        ErrorCode.SCHEMA_VERSION,
                    )
                )
            # the migration sees the saved state fields (old names included), not the
            # graph's internal channels (edge triggers, join barriers)
            internal = {k for k in self.channels if k not in self.state_channel_set}
            state = {k: v for k, v in values.items() if k not in internal}
            other = {k: v for k, v in values.items() if k in internal}
            migrated = migrate(dict(state))
            if not isinstance(migrated, dict):
                raise SchemaMigrationError(
                    f"Migration from schema version {version} returned {type(migrated).__name__}, not a dict"
                )
            unknown = [k for k in migrated if k not in self.state_channel_set]
            if unknown:
                raise SchemaMigrationError(
                    error_message(
                        f"Migration from schema version {version} produced key {unknown[0]!r}, "
                        "which is not in the current state schema",
                        ErrorCode.SCHEMA_VERSION,
                    )
                )
            values = {**other, **migrated}
            version += 1
        checkpoint["channel_values"] = values
        checkpoint["schema_version"] = current
        return True

    def get_graph(self, config: Any = None, *, xray: int | bool = False) -> Any:
        from engine.graph._draw import draw_state_graph  # noqa: PLC0415

        return draw_state_graph(self, xray=xray)

    def get_output_schema(self, config: Any = None) -> Any:
        """The output as a pydantic model class (one optional field per output key)."""
        from engine.pregel._schemas import output_model  # noqa: PLC0415

        types: dict[str, Any] = {}
        for info in self.builder.schemas.values():  # the state schema's come first
            for key, declared in info.types.items():
                types.setdefault(key, declared)
        return output_model(self, types)

    def get_input_jsonschema(self, config: Any = None) -> dict[str, Any]:
        """JSON Schema of the input schema (the state schema by default)."""
        from engine.pregel._schemas import graph_name, state_jsonschema  # noqa: PLC0415

        return state_jsonschema(
            self.input_info, self.builder.channels, graph_name(self, "Input")
        )

    def get_output_jsonschema(self, config: Any = None) -> dict[str, Any]:
        """JSON Schema of the output schema (the state schema by default)."""
        from engine.pregel._schemas import graph_name, state_jsonschema  # noqa: PLC0415

        return state_jsonschema(
            self.output_info, self.builder.channels, graph_name(self, "Output")
        )


def _identity(value: Any) -> Any:
    return value


_OBJECT_KINDS = frozenset({"pydantic", "dataclass"})
"""Schemas whose values v2 stream parts give as instances (as LangGraph does)."""


def _keys_mapper(info: SchemaInfo) -> Callable[[dict[str, Any]], Any] | None:
    """Values -> an instance of ``info``'s schema, from its own keys only (a
    ``values`` chunk holds every state key, the output schema may hold fewer)."""
    mapper = make_mapper(info)
    if mapper is None:
        return None
    keys = info.keys
    build = mapper

    def to_instance(values: dict[str, Any]) -> Any:
        return build({key: values[key] for key in keys if key in values})

    return to_instance

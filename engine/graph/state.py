"""StateGraph: build a graph of nodes over a shared state; compile it to a Pregel.

Example::

    class State(TypedDict):
        topic: str
        notes: Annotated[list[str], operator.add]

    builder = StateGraph(State)
    builder.add_node("research", research)
    builder.add_edge(START, "research")
    graph = builder.compile(checkpointer=InMemorySaver())
"""

from __future__ import annotations

import contextlib
import inspect
import types
import typing
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, NamedTuple, Self, TypeVar

from engine._internal._constants import (
    END,
    NS_END,
    NS_SEP,
    RESERVED_NAMES,
    START,
    TASKS,
)
from engine._internal._fields import is_pydantic_model
from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel
from engine.channels.ephemeral_value import EphemeralValue
from engine.channels.last_value import LastValueAfterFinish
from engine.channels.named_barrier_value import (
    NamedBarrierValue,
    NamedBarrierValueAfterFinish,
)
from engine.channels.topic import Topic
from engine.checkpoint.base import Checkpoint
from engine.checkpoint.serde.jsonplus import register_type
from engine.constants import TAG_HIDDEN
from engine.errors import (
    ErrorCode,
    GraphValidationError,
    InvalidUpdateError,
    ParentCommand,
    SchemaMigrationError,
    error_message,
)
from engine.graph._branch import BranchSpec, branch_channel
from engine.graph._schema import SchemaInfo, coerce_input, make_mapper, schema_info
from engine.pregel._algo import PregelExecutableTask
from engine.pregel._io import writes_update
from engine.pregel._node_callable import NodeCallable, is_async_callable
from engine.pregel._read import PregelNode
from engine.pregel._subgraph import find_subgraph
from engine.pregel.main import Pregel
from engine.types import (
    All,
    CachePolicy,
    Command,
    RetryPolicy,
    Send,
    TimeoutPolicy,
    TracePolicy,
    ensure_valid_checkpointer,
)

__all__ = ("CompiledStateGraph", "NodePolicies", "StateGraph", "StateNodeSpec")

StateT = TypeVar("StateT")
ContextT = TypeVar("ContextT")
InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")

Migration = Callable[[dict[str, Any]], dict[str, Any]]


class StateNodeSpec:
    """A node as declared on the builder."""

    __slots__ = (
        "cache_policy",
        "defer",
        "ends",
        "error_handler",
        "input_schema",
        "metadata",
        "retry_policy",
        "runnable",
        "timeout",
        "trace_policy",
    )

    def __init__(
        self,
        runnable: Any,
        *,
        metadata: dict[str, Any] | None,
        input_schema: type[Any],
        retry_policy: tuple[RetryPolicy, ...],
        cache_policy: CachePolicy[Any] | None,
        error_handler: Any,
        ends: tuple[str, ...] | dict[str, str] | None,
        defer: bool,
        timeout: TimeoutPolicy | None,
        trace_policy: TracePolicy | None = None,
    ) -> None:
        self.runnable = runnable
        self.metadata = metadata
        self.input_schema = input_schema
        self.retry_policy = retry_policy
        self.cache_policy = cache_policy
        self.error_handler = error_handler
        self.ends = ends
        self.defer = defer
        self.timeout = timeout
        self.trace_policy = trace_policy


def _node_name(node: Any) -> str:
    name = getattr(node, "name", None)
    if isinstance(name, str) and name and not inspect.isfunction(node):
        return name
    name = getattr(node, "__name__", None)
    if isinstance(name, str):
        return name
    return type(node).__name__


def _check_name(name: str, what: str = "node") -> None:
    if not isinstance(name, str) or not name:
        raise GraphValidationError(
            f"A {what} name must be a non-empty string, got {name!r}"
        )
    if name in RESERVED_NAMES:
        raise GraphValidationError(
            error_message(
                f"{what.capitalize()} name {name!r} is reserved.",
                ErrorCode.INVALID_GRAPH,
            )
        )
    for char in (NS_SEP, NS_END):
        if char in name:
            raise GraphValidationError(
                error_message(
                    f"{what.capitalize()} name {name!r} must not contain {char!r} "
                    "(it separates namespaces).",
                    ErrorCode.INVALID_GRAPH,
                )
            )


def _inferred_input_schema(action: Any, state_schema: type[Any]) -> type[Any] | None:
    func = action if inspect.isfunction(action) or inspect.ismethod(action) else None
    if func is None:
        return None
    try:
        hints = typing.get_type_hints(func)
        first = next(iter(inspect.signature(func).parameters.values()), None)
    except Exception:
        return None
    if first is None:
        return None
    hint = hints.get(first.name)
    if hint is None or hint is state_schema or not isinstance(hint, type):
        return None
    if typing.is_typeddict(hint) or is_pydantic_model(hint):
        return hint
    return None


def _command_destinations(action: Any) -> tuple[str, ...]:
    """Where a node may go, from a ``-> Command[Literal["a", "b"]]`` annotation.

    A union (``Command[...] | dict``, ``Optional[Command[...]]``) counts too; a
    callable object's ``__call__`` is read. Drawing only: ``get_graph()`` shows
    these as conditional edges; the node can still go anywhere.
    """
    func = action
    if not (inspect.isfunction(action) or inspect.ismethod(action)):
        func = getattr(action, "__call__", None)  # noqa: B004 - a callable object's
        if not inspect.ismethod(func):
            return ()
    try:
        returned = typing.get_type_hints(func).get("return")
    except Exception:
        return ()
    if typing.get_origin(returned) in (typing.Union, types.UnionType):
        returned = next(
            (a for a in typing.get_args(returned) if typing.get_origin(a) is Command),
            None,
        )
    if typing.get_origin(returned) is not Command:
        return ()
    args = typing.get_args(returned)
    if args and typing.get_origin(args[0]) is typing.Literal:
        return tuple(str(value) for value in typing.get_args(args[0]))
    return ()


def _retry_policies(
    value: RetryPolicy | Sequence[RetryPolicy] | None,
) -> tuple[RetryPolicy, ...]:
    if value is None:
        return ()
    if isinstance(value, RetryPolicy):
        return (value,)
    return tuple(value)


@dataclass(slots=True)
class _NodeDefaults:
    """What ``set_node_defaults`` set: used by nodes that did not set their own."""

    retry_policy: tuple[RetryPolicy, ...] = ()
    cache_policy: CachePolicy[Any] | None = None
    error_handler: Any = None
    timeout: TimeoutPolicy | None = None


class NodePolicies(NamedTuple):
    """A node's retry, cache, error handler and timeout, defaults applied."""

    retry_policy: tuple[RetryPolicy, ...]
    cache_policy: CachePolicy[Any] | None
    error_handler: Any
    timeout: TimeoutPolicy | None


class StateGraph(Generic[StateT, ContextT, InputT, OutputT]):
    """A graph whose nodes read and write one shared state.

    Args:
        state_schema: the state (TypedDict, pydantic model or dataclass); keys
            annotated with a reducer (``Annotated[list, operator.add]``) merge
            concurrent writes, other keys accept one write per step.
        context_schema: type of the run's static context (``invoke(context=...)``).
        input_schema: keys accepted as input (default: the state schema).
        output_schema: keys returned as output (default: the state schema).
        schema_version: version of the state schema; checkpoints remember it.
    """

    def __init__(
        self,
        state_schema: type[StateT] | None = None,
        context_schema: type[ContextT] | None = None,
        *,
        input_schema: type[InputT] | None = None,
        output_schema: type[OutputT] | None = None,
        schema_version: int = 1,
        **kwargs: Any,
    ) -> None:
        if "input" in kwargs and input_schema is None:
            input_schema = kwargs.pop("input")
        if "output" in kwargs and output_schema is None:
            output_schema = kwargs.pop("output")
        if "config_schema" in kwargs and context_schema is None:
            context_schema = kwargs.pop("config_schema")
        if kwargs:
            raise TypeError(f"StateGraph() got unexpected arguments {sorted(kwargs)}")
        if state_schema is None:
            if input_schema is None or output_schema is None:
                raise GraphValidationError(
                    "StateGraph needs a state_schema (or both input and output schemas)"
                )
            state_schema = input_schema  # type: ignore[assignment]
        self.state_schema: type[Any] = state_schema  # type: ignore[assignment]
        self.input_schema: type[Any] = input_schema or state_schema  # type: ignore[assignment]
        self.output_schema: type[Any] = output_schema or state_schema  # type: ignore[assignment]
        self.context_schema = context_schema
        self.schema_version = schema_version
        self.migrations: dict[int, Migration] = {}
        self.nodes: dict[str, StateNodeSpec] = {}
        self.edges: set[tuple[str, str]] = set()
        self.waiting_edges: set[tuple[tuple[str, ...], str]] = set()
        self.branches: defaultdict[str, dict[str, BranchSpec]] = defaultdict(dict)
        self.schemas: dict[type[Any], SchemaInfo] = {}
        self.channels: dict[str, BaseChannel[Any, Any, Any]] = {}
        self.compiled = False
        self.node_defaults = _NodeDefaults()
        for schema in (self.state_schema, self.input_schema, self.output_schema):
            self._add_schema(schema)

    def _add_schema(self, schema: type[Any]) -> SchemaInfo:
        if schema in self.schemas:
            return self.schemas[schema]
        info = schema_info(schema)
        self.schemas[schema] = info
        for key, channel in info.channels.items():
            existing = self.channels.get(key)
            if existing is None:
                _check_name(key, "state key")
                self.channels[key] = channel
            elif (
                type(existing) is not type(channel) and schema is not self.state_schema
            ):
                # a sub-schema repeating a key keeps the state schema's channel
                continue
            elif type(existing) is not type(channel):
                raise GraphValidationError(
                    error_message(
                        f"State key {key!r} is declared with two different channels "
                        f"({type(existing).__name__} and {type(channel).__name__}).",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
        _register_types(schema)
        return info

    # -- building ------------------------------------------------------------------

    def add_node(
        self,
        node: str | Any,
        action: Any = None,
        *,
        defer: bool = False,
        metadata: dict[str, Any] | None = None,
        input_schema: type[Any] | None = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy[Any] | None = None,
        error_handler: Any = None,
        destinations: dict[str, str] | tuple[str, ...] | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        trace_policy: TracePolicy | None = None,
        **kwargs: Any,
    ) -> Self:
        """Add a node: a function (sync or async) or runnable taking the state.

        The name defaults to the function's name. A node returns a dict of state
        updates, a ``Command``, or ``None``. ``destinations`` (or a
        ``-> Command[Literal["a", "b"]]`` return annotation) names where a node
        returning ``Command(goto=...)`` may go, for drawing: ``get_graph()``
        shows them as conditional edges. Policies not given here come from
        :meth:`set_node_defaults`. ``trace_policy`` is accepted for LangGraph
        code; the engine records no traces, so it changes nothing.
        """
        if "input" in kwargs and input_schema is None:
            input_schema = kwargs.pop("input")
        if "retry" in kwargs and retry_policy is None:
            retry_policy = kwargs.pop("retry")
        if kwargs:
            raise TypeError(f"add_node() got unexpected arguments {sorted(kwargs)}")
        if self.compiled:
            raise GraphValidationError(
                "Cannot add a node to a graph that was already compiled"
            )
        if not isinstance(node, str):
            action = node
            name = _node_name(node)
        else:
            name = node
            if action is None:
                raise GraphValidationError(
                    f"add_node({name!r}) needs an action (a function or runnable)"
                )
        _check_name(name)
        if name in self.nodes:
            raise GraphValidationError(
                error_message(f"Node {name!r} already exists.", ErrorCode.INVALID_GRAPH)
            )
        if not callable(action) and not callable(getattr(action, "invoke", None)):
            raise GraphValidationError(
                f"Node {name!r}: expected a function or runnable, got {action!r}"
            )
        if input_schema is None:
            input_schema = _inferred_input_schema(action, self.state_schema)
        if input_schema is not None:
            self._add_schema(input_schema)
        timeout_policy = TimeoutPolicy.coerce(timeout)
        self.nodes[name] = StateNodeSpec(
            action,
            metadata=metadata,
            input_schema=input_schema or self.state_schema,
            retry_policy=_retry_policies(retry_policy),
            cache_policy=cache_policy,
            error_handler=error_handler,
            ends=destinations
            if destinations is not None
            else _command_destinations(action) or None,
            defer=defer,
            timeout=timeout_policy,
            trace_policy=trace_policy,
        )
        return self

    def set_node_defaults(
        self,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy[Any] | None = None,
        error_handler: Any = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
    ) -> Self:
        """Policies for every node that does not set its own in ``add_node``.

        Applied when the graph compiles, so nodes added before or after this call
        get them; a later call replaces only what it gives. Subgraphs do not
        inherit them. A timeout needs async nodes: with a synchronous node,
        ``compile()`` refuses it, as for a node's own timeout.

        Args:
            retry_policy: retry policy (or policies) of nodes without their own.
            cache_policy: cache policy of nodes without their own.
            error_handler: called when a node without its own handler fails
                (after its retries); may return an update or a ``Command``.
            timeout: seconds, a ``timedelta`` or a ``TimeoutPolicy``.

        Returns:
            The builder, for chaining.

        Example:
            >>> builder.set_node_defaults(retry_policy=RetryPolicy(max_attempts=3))
        """
        defaults = self.node_defaults
        if retry_policy is not None:
            defaults.retry_policy = _retry_policies(retry_policy)
        if cache_policy is not None:
            defaults.cache_policy = cache_policy
        if error_handler is not None:
            defaults.error_handler = error_handler
        if timeout is not None:
            defaults.timeout = TimeoutPolicy.coerce(timeout)
        return self

    def node_policies(self, name: str) -> NodePolicies:
        """Node ``name``'s policies: its own, else :meth:`set_node_defaults`'."""
        spec = self.nodes[name]
        defaults = self.node_defaults
        return NodePolicies(
            spec.retry_policy or defaults.retry_policy,
            spec.cache_policy
            if spec.cache_policy is not None
            else defaults.cache_policy,
            spec.error_handler
            if spec.error_handler is not None
            else defaults.error_handler,
            spec.timeout if spec.timeout is not None else defaults.timeout,
        )

    def add_edge(self, start_key: str | Sequence[str], end_key: str) -> Self:
        """Run ``end_key`` after ``start_key``; with a list of starts, after all of them."""
        if self.compiled:
            raise GraphValidationError(
                "Cannot add an edge to a graph that was already compiled"
            )
        if isinstance(start_key, str):
            if start_key == END:
                raise GraphValidationError("END cannot be the start of an edge")
            if end_key == START:
                raise GraphValidationError("START cannot be the end of an edge")
            self.edges.add((start_key, end_key))
            return self
        starts = tuple(start_key)
        if not starts:
            raise GraphValidationError("add_edge() needs at least one start node")
        for start in starts:
            if start == END:
                raise GraphValidationError("END cannot be the start of an edge")
        if end_key == START:
            raise GraphValidationError("START cannot be the end of an edge")
        self.waiting_edges.add((starts, end_key))
        return self

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[..., Any],
        path_map: dict[Hashable, str] | Sequence[str] | None = None,
    ) -> Self:
        """Route after ``source`` by calling ``path(state)``.

        ``path`` returns a node name, ``END``, a ``Send``, or a list of them;
        ``path_map`` maps its answers to node names (and limits them).
        """
        if self.compiled:
            raise GraphValidationError(
                "Cannot add an edge to a graph that was already compiled"
            )
        name = _node_name(path)
        if name == "<lambda>":
            name = "condition"
        if name in self.branches[source]:
            suffix = 1
            while f"{name}_{suffix}" in self.branches[source]:
                suffix += 1
            name = f"{name}_{suffix}"
        self.branches[source][name] = BranchSpec(source, name, path, path_map)
        return self

    def add_sequence(self, nodes: Sequence[Any | tuple[str, Any]]) -> Self:
        """Add nodes that run one after the other, in order."""
        if not nodes:
            raise GraphValidationError("add_sequence() needs at least one node")
        previous: str | None = None
        for item in nodes:
            if isinstance(item, tuple):
                name, action = item
                self.add_node(name, action)
            else:
                name = _node_name(item)
                self.add_node(item)
            if previous is not None:
                self.add_edge(previous, name)
            previous = name
        return self

    def set_entry_point(self, key: str) -> Self:
        return self.add_edge(START, key)

    def set_conditional_entry_point(
        self,
        path: Callable[..., Any],
        path_map: dict[Hashable, str] | Sequence[str] | None = None,
    ) -> Self:
        return self.add_conditional_edges(START, path, path_map)

    def set_finish_point(self, key: str) -> Self:
        return self.add_edge(key, END)

    def add_migration(self, from_version: int, migrate: Migration) -> Self:
        """Register how to bring state saved under ``from_version`` to ``from_version + 1``.

        ``migrate`` receives the saved values (a dict) and returns the new values.
        A checkpoint from an older version with no migration path is refused with
        :class:`~engine.errors.SchemaMigrationError`.
        """
        if from_version >= self.schema_version:
            raise GraphValidationError(
                f"Migration from version {from_version} is pointless: the schema is version "
                f"{self.schema_version}"
            )
        self.migrations[from_version] = migrate
        return self

    # -- validation ------------------------------------------------------------------

    def validate(self, interrupt: Sequence[str] | None = None) -> Self:
        """Check every edge, branch and interrupt names a node; raise naming the culprit."""
        known = set(self.nodes)
        has_entry = any(src == START for src, _ in self.edges) or START in self.branches
        if not has_entry:
            raise GraphValidationError(
                error_message(
                    "Graph must have an entrypoint: add at least one edge from START to "
                    "another node.",
                    ErrorCode.INVALID_GRAPH,
                )
            )
        for src, dst in sorted(self.edges):
            if src != START and src not in known:
                raise GraphValidationError(
                    error_message(
                        f"Found edge starting at unknown node {src!r} (edge {src!r} -> {dst!r})",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
            if dst != END and dst not in known:
                raise GraphValidationError(
                    error_message(
                        f"Found edge ending at unknown node {dst!r} (edge {src!r} -> {dst!r})",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
        for starts, dst in sorted(self.waiting_edges):
            for src in starts:
                if src != START and src not in known:
                    raise GraphValidationError(
                        error_message(
                            f"Found edge starting at unknown node {src!r} (edge {list(starts)!r} -> {dst!r})",
                            ErrorCode.INVALID_GRAPH,
                        )
                    )
            if dst != END and dst not in known:
                raise GraphValidationError(
                    error_message(
                        f"Found edge ending at unknown node {dst!r} (edge {list(starts)!r} -> {dst!r})",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
        for src, branches in self.branches.items():
            if src != START and src not in known:
                raise GraphValidationError(
                    error_message(
                        f"Found conditional edge starting at unknown node {src!r}",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
            for branch in branches.values():
                for target in (branch.ends or {}).values():
                    if target != END and target not in known:
                        raise GraphValidationError(
                            error_message(
                                f"Conditional edge {branch.name!r} from {src!r} maps to unknown "
                                f"node {target!r}",
                                ErrorCode.INVALID_GRAPH,
                            )
                        )
        for name, spec in self.nodes.items():
            if self.node_policies(name).timeout is not None and not _is_async_node(
                spec.runnable
            ):
                raise GraphValidationError(  # a ValueError, as LangGraph raises here
                    error_message(
                        f"Node {name!r} has a timeout but is synchronous: timeouts need "
                        "an async node (Python cannot stop a running thread). Make the "
                        "node `async def`.",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
            ends = spec.ends
            targets = ends.keys() if isinstance(ends, dict) else (ends or ())
            for target in targets:
                if target != END and target not in known:
                    raise GraphValidationError(
                        error_message(
                            f"Node {name!r} declares destination {target!r}, which is not a node",
                            ErrorCode.INVALID_GRAPH,
                        )
                    )
        for node in interrupt or ():
            if node not in known:
                raise GraphValidationError(
                    error_message(
                        f"Interrupt node {node!r} is not a node",
                        ErrorCode.INVALID_GRAPH,
                    )
                )
        return self

    # -- compiling -----------------------------------------------------------------

    def compile(
        self,
        checkpointer: Any = None,
        *,
        cache: Any = None,
        store: Any = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        debug: bool = False,
        name: str | None = None,
        transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None = None,
        strict_input: bool = False,
    ) -> CompiledStateGraph:
        """Validate the graph and turn it into a runnable :class:`CompiledStateGraph`.

        Args:
            checkpointer: a saver (durable threads), ``True`` (a subgraph keeping its
                state across calls), ``False`` (never checkpoint) or ``None``.
            interrupt_before / interrupt_after: nodes to pause before/after (or "*").
            strict_input: refuse input keys that are not in the input schema with
                ``InvalidUpdateError`` naming the key. By default they are ignored,
                as LangGraph does (so a node can call a subgraph with its whole
                state); turn this on where a stray key is a mistake or an attack,
                e.g. a client sending a field the server must set.
            transformers: stream transformer classes (or ``scope -> transformer``
                factories) that every ``stream_events(version="v3")`` run of the
                compiled graph registers after the built-in ones (see
                :mod:`engine.stream`).

        Raises:
            GraphValidationError: an edge, branch, destination or interrupt names
                an unknown node, or a synchronous node has a timeout (a
                ``ValueError``, as in LangGraph).
            TypeError: ``checkpointer`` is none of the above.

        Example:
            >>> graph = builder.compile(checkpointer=saver, strict_input=True)
        """
        checkpointer = ensure_valid_checkpointer(checkpointer)
        before = interrupt_before or ()
        after = interrupt_after or ()
        self.validate(
            [
                *(() if before == "*" else before),
                *(() if after == "*" else after),
            ]
        )
        compiled = CompiledStateGraph.build(
            self,
            checkpointer=checkpointer,
            cache=cache,
            store=store,
            interrupt_before=before,
            interrupt_after=after,
            debug=debug,
            name=name or "LangGraph",
            strict_input=strict_input,
        )
        if transformers:
            compiled.stream_transformers = tuple(transformers)
        self.compiled = True
        return compiled


def _is_async_node(action: Any) -> bool:
    return is_async_callable(action) or callable(getattr(action, "ainvoke", None))


def _register_types(schema: type[Any]) -> None:
    """Let the serializer load the classes a state schema mentions."""
    seen: set[Any] = set()
    todo: list[Any] = [schema]
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        try:
            seen.add(item)
        except TypeError:
            continue
        if isinstance(item, type) and (
            is_pydantic_model(item)
            or hasattr(item, "__dataclass_fields__")
            or hasattr(item, "_fields")
            or issubclass(item, __import__("enum").Enum)
        ):
            register_type(item)
            try:
                hints = typing.get_type_hints(item, include_extras=True)
            except Exception:
                hints = {}
            todo.extend(hints.values())
        elif isinstance(item, type) and typing.is_typeddict(item):
            with contextlib.suppress(Exception):
                todo.extend(typing.get_type_hints(item, include_extras=True).values())
        else:
            todo.extend(typing.get_args(item))


class _NodeWriter:
    """Turns one node's output into writes: state updates, edges, branches, Commands."""

    __slots__ = (
        "branches",
        "edge_writes",
        "graph",
        "is_start",
        "managed",
        "managed_keys",
        "name",
        "output_keys",
        "state_mapper",
        "state_keys",
        "where",
    )

    def __init__(
        self,
        name: str,
        output_keys: frozenset[str],
        edge_writes: list[tuple[str, Any]],
        branches: list[BranchSpec],
        state_keys: tuple[str, ...],
        state_mapper: Callable[[dict[str, Any]], Any] | None,
    ) -> None:
        self.name = name
        self.output_keys = output_keys
        self.edge_writes = edge_writes
        self.branches = branches
        self.state_keys = state_keys
        self.state_mapper = state_mapper
        self.is_start = name == START
        self.where = "the input" if name == START else f"node {name!r}"
        self.graph: CompiledStateGraph | None = None
        self.managed_keys: frozenset[str] = frozenset()
        """Managed value keys of any schema: writes to them are ignored."""
        self.managed: tuple[str, ...] = ()
        """The state schema's managed value keys, which path functions read."""

    def _update(self, writes: list[tuple[str, Any]], update: Any) -> None:
        if update is None:
            return
        if type(update) is dict:
            keys = self.output_keys
            for key, value in update.items():
                if key not in keys:
                    self._unknown_key(key)
                    continue
                writes.append((key, value))
            return
        assert self.graph is not None
        for key, value in coerce_input(self.graph.state_info, update, self.where):
            if key not in self.output_keys:
                self._unknown_key(key)
                continue
            writes.append((key, value))

    def _unknown_key(self, key: Any) -> None:
        """Refuse a write to an undeclared key; a managed value's is ignored."""
        if key in self.managed_keys:
            return  # computed per task (RemainingSteps...): nothing to store
        raise InvalidUpdateError(
            error_message(
                f"{self.where.capitalize()} wrote key {key!r}, which is not in the state "
                f"schema (known keys: {sorted(self.output_keys)})",
                ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
            )
        )

    def _command(self, writes: list[tuple[str, Any]], command: Command[Any]) -> None:
        if command.graph == Command.PARENT:
            raise ParentCommand(
                Command(update=command.update, goto=command.goto, resume=command.resume)
            )
        if command.graph is not None:
            raise InvalidUpdateError(
                f"{self.where.capitalize()} returned Command(graph={command.graph!r}); only None or Command.PARENT are supported"
            )
        update = command.update
        if update is not None:
            if isinstance(update, (list, tuple)):
                for key, value in update:
                    if key not in self.output_keys:
                        self._unknown_key(key)
                        continue
                    writes.append((key, value))
            else:
                self._update(writes, update)
        assert self.graph is not None
        for target in command.goto_targets():
            writes.append(self.graph.goto_write(target, self.where))

    def _apply_output(self, writes: list[tuple[str, Any]], output: Any) -> None:
        if output is None:
            pass
        elif type(output) is dict:
            self._update(writes, output)
        elif isinstance(output, Command):
            self._command(writes, output)
        elif (
            isinstance(output, (list, tuple))
            and output
            and any(isinstance(o, Command) for o in output)
        ):
            for item in output:
                if isinstance(item, Command):
                    self._command(writes, item)
                else:
                    self._update(writes, item)
        elif isinstance(output, (str, int, float, bool, bytes, list, tuple, set)):
            raise InvalidUpdateError(
                error_message(
                    f"Expected dict, got {output!r} (returned by {self.where})",
                    ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
                )
            )
        else:
            self._update(writes, output)
        if self.edge_writes:
            writes.extend(self.edge_writes)

    def _routing_state(
        self,
        task: PregelExecutableTask,
        read_fresh: Callable[[Sequence[str]], dict[str, Any]],
    ) -> Any:
        state = read_fresh(self.state_keys)
        if self.managed:  # path functions see the managed values their node saw
            source = task.input
            for key in self.managed:
                value = (
                    source.get(key, MISSING)
                    if isinstance(source, dict)
                    else getattr(source, key, MISSING)
                )
                if value is not MISSING:
                    state[key] = value
        if self.state_mapper is not None:
            state = self.state_mapper(state)
        return state

    def __call__(
        self,
        task: PregelExecutableTask,
        output: Any,
        read_fresh: Callable[[Sequence[str]], dict[str, Any]],
    ) -> None:
        self._apply_output(task.writes, output)
        if self.branches:
            assert self.graph is not None
            state = self._routing_state(task, read_fresh)
            known = self.graph.node_names
            for branch in self.branches:
                task.writes.extend(branch.writes(branch.route(state), known))

    async def awrite(
        self,
        task: PregelExecutableTask,
        output: Any,
        read_fresh: Callable[[Sequence[str]], dict[str, Any]],
    ) -> None:
        """Async twin of ``__call__``: async path functions are awaited."""
        self._apply_output(task.writes, output)
        if self.branches:
            assert self.graph is not None
            state = self._routing_state(task, read_fresh)
            known = self.graph.node_names
            for branch in self.branches:
                task.writes.extend(branch.writes(await branch.aroute(state), known))


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
        writers: dict[str, _NodeWriter] = {}
        nodes: dict[str, PregelNode] = {}
        start_writer = _NodeWriter(
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
            writer = _NodeWriter(
                name,
                output_keys,
                edges_from.get(name, []),
                list(builder.branches.get(name, {}).values()),
                state_keys,
                state_mapper,
            )
            writers[name] = writer
            runnable = spec.runnable
            subgraph = find_subgraph(runnable)
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

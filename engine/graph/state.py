"""StateGraph: build a graph of nodes over a shared state; compile it to a Pregel.

Example::

    class State(TypedDict):
        topic: str
        notes: Annotated[list[str], operator.add]

    builder = StateGraph(State)
    builder.add_node("research", research)
    builder.add_edge(START, "research")
    graph = builder.compile(checkpointer=InMemorySaver())

This module holds the builder; what it compiles to, ``CompiledStateGraph``,
lives in ``_compiled_state`` (re-exported here) and the per-node output writer
in ``_node_writer``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import logging
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
)
from engine._internal._fields import is_pydantic_model
from engine.channels.base import BaseChannel
from engine.checkpoint.serde.jsonplus import register_type
from engine.errors import (
    ErrorCode,
    GraphValidationError,
    error_message,
)
from engine.graph._branch import BranchSpec
from engine.graph._compiled_state import CompiledStateGraph, Migration
from engine.graph._schema import SchemaInfo, schema_info
from engine.pregel._node_callable import is_async_callable
from engine.types import (
    All,
    CachePolicy,
    Command,
    RetryPolicy,
    TimeoutPolicy,
    TracePolicy,
    ensure_valid_checkpointer,
)

__all__ = ("CompiledStateGraph", "NodePolicies", "StateGraph", "StateNodeSpec")

logger = logging.getLogger(__name__)

StateT = TypeVar("StateT")
ContextT = TypeVar("ContextT")
InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")


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
            _warn_compiled("a node")
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
            _warn_compiled("an edge")
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
            _warn_compiled("an edge")
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

    def _snapshot(self) -> Self:
        """A copy of this builder that later ``add_*`` calls do not change: what
        a compiled graph keeps as its ``builder`` (drawing reads it)."""
        kept = copy.copy(self)
        kept.migrations = dict(self.migrations)
        kept.nodes = dict(self.nodes)
        kept.edges = set(self.edges)
        kept.waiting_edges = set(self.waiting_edges)
        kept.branches = defaultdict(
            dict, {name: dict(specs) for name, specs in self.branches.items()}
        )
        kept.schemas = dict(self.schemas)
        kept.channels = dict(self.channels)
        kept.node_defaults = dataclasses.replace(self.node_defaults)
        kept.compiled = True
        return kept

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
            self._snapshot(),
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


def _warn_compiled(what: str) -> None:
    """Adding to a builder that was compiled: allowed, as in LangGraph, with a
    warning; graphs compiled before keep what they had (``_snapshot``)."""
    logger.warning(
        "Adding %s to a graph that was already compiled: the graphs compiled "
        "before do not change; compile again to use it.",
        what,
    )


def _is_async_node(action: Any) -> bool:
    return is_async_callable(action) or callable(getattr(action, "ainvoke", None))


def _register_types(schema: type[Any]) -> None:
    """Let the serializer load the classes a state schema mentions."""
    seen: dict[int, Any] = {}  # by id: an ``Annotated`` holding a channel is unhashable
    todo: list[Any] = [schema]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen[id(item)] = item  # kept, so that its id is not reused meanwhile
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

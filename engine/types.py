"""Public value types of the runtime: Send, Command, Interrupt, policies, snapshots.

Mirrors ``langgraph.types``. ``interrupt()`` lives here too, as in LangGraph. The
node policies (retry, cache, timeout, trace) are defined in
``engine._internal._policies`` and re-exported here.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    NamedTuple,
    NotRequired,
    TypedDict,
    TypeVar,
    overload,
)

import typing_extensions

from engine._internal._fields import object_update_items
from engine._internal._policies import (
    CachePolicy,
    RetryPolicy,
    TimeoutPolicy,
    TracePolicy,
    default_retry_on,
    omit_payload,
)
from engine._internal._resume_schema import ResumeSchema, resume_schema
from engine._internal._scope import TaskScope, require_scope
from engine._internal._typing import MISSING, RunnableConfig
from engine.errors import GraphInterrupt, SerializationError

# Defined in engine._internal._policies; their public home is here (as in LangGraph),
# so that is the module they name: reprs, docs and the serializer's allowed classes.
for _policy in (CachePolicy, RetryPolicy, TimeoutPolicy, TracePolicy):
    _policy.__module__ = __name__
del _policy

__all__ = (
    "All",
    "CachePolicy",
    "CheckpointPayload",
    "CheckpointStreamPart",
    "CheckpointTask",
    "Checkpointer",
    "Command",
    "CustomStreamPart",
    "DebugPayload",
    "DebugStreamPart",
    "Durability",
    "GraphOutput",
    "Interrupt",
    "MessagesStreamPart",
    "Overwrite",
    "PregelTask",
    "RetryPolicy",
    "Send",
    "StateSnapshot",
    "StateUpdate",
    "StreamMode",
    "StreamPart",
    "StreamWriter",
    "TaskPayload",
    "TaskResultPayload",
    "TasksStreamPart",
    "TimeoutPolicy",
    "TracePolicy",
    "UpdatesStreamPart",
    "ValuesStreamPart",
    "default_retry_on",
    "ensure_valid_checkpointer",
    "interrupt",
    "interrupt_id",
    "omit_payload",
)

N = TypeVar("N")
ResponseT = typing_extensions.TypeVar("ResponseT", default=Any)
"""The answer type an ``interrupt(response_schema=...)`` asks for (``Any`` if unsaid)."""

All = Literal["*"]
"""Special value for ``interrupt_before`` / ``interrupt_after``: every node."""

Durability = Literal["sync", "async", "exit"]
"""When checkpoints are saved: before the next step (``sync``), while the next
step runs (``async``, the default), or only when the run returns (``exit``)."""

StreamMode = Literal[
    "values", "updates", "checkpoints", "tasks", "debug", "messages", "custom"
]
"""What ``stream()`` yields; several may be asked for at once."""

StreamWriter = Callable[[Any], None]
"""Writes a chunk to the ``custom`` stream."""

Checkpointer = Any
"""A checkpoint saver, ``True`` (keep state across calls), ``False`` (none) or ``None`` (inherit)."""


def ensure_valid_checkpointer(checkpointer: Checkpointer) -> Checkpointer:
    """Return ``checkpointer`` if it is a saver, ``True``, ``False`` or ``None``.

    Anything else raises ``TypeError`` naming what was given, so a typo such as
    ``compile(checkpointer=InMemorySaver)`` (the class, not an instance) fails at
    once instead of running without persistence.
    """
    from engine.checkpoint.base import BaseCheckpointSaver  # noqa: PLC0415 - storage imports this module

    if checkpointer is None or checkpointer is True or checkpointer is False:
        return checkpointer
    if isinstance(checkpointer, BaseCheckpointSaver):
        return checkpointer
    what = (
        f"the class {checkpointer.__name__} (not an instance)"
        if isinstance(checkpointer, type)
        else f"a {type(checkpointer).__name__}"
    )
    raise TypeError(
        f"Invalid checkpointer: expected a BaseCheckpointSaver instance (such as "
        f"InMemorySaver()), True, False or None; got {what}."
    )


class Send:
    """Run ``node`` in the next super-step with ``arg`` as its input (map-reduce fan-out).

    ``timeout`` limits each attempt of this one task, in place of the node's own
    timeout (a number of seconds or a ``timedelta`` is a ``run_timeout``; give a
    :class:`TimeoutPolicy` for an idle timeout). The rules are the node's: it
    needs an async node, except that an async run also times out a sync node
    (the wait is abandoned; its thread finishes in the background and its writes
    are dropped), while a sync run refuses it with ``ValueError``.

    Example::

        def fan_out(state):
            return [Send("research", {"topic": t}, timeout=30) for t in state["topics"]]
    """

    __slots__ = ("arg", "node", "timeout")

    def __init__(
        self,
        /,
        node: str,
        arg: Any,
        *,
        timeout: float | timedelta | TimeoutPolicy | None = None,
    ) -> None:
        self.node = node
        self.arg = arg
        self.timeout = TimeoutPolicy.coerce(timeout)

    def __hash__(self) -> int:
        return hash((self.node, repr(self.arg), self.timeout))

    def __repr__(self) -> str:
        if self.timeout is None:
            return f"Send(node={self.node!r}, arg={self.arg!r})"
        return f"Send(node={self.node!r}, arg={self.arg!r}, timeout={self.timeout!r})"

    def __eq__(self, value: object) -> bool:
        return (
            isinstance(value, Send)
            and self.node == value.node
            and self.arg == value.arg
            and self.timeout == value.timeout
        )


_PLACEHOLDER_INTERRUPT_ID = "placeholder-id"
_LEGACY_INTERRUPT_KWARGS = frozenset({"ns", "when", "resumable", "interrupt_id"})


@dataclass(init=False, frozen=True, slots=True, eq=False)
class Interrupt(Generic[ResponseT]):
    """A pause raised by ``interrupt(value)``; resume it with ``Command(resume=...)``.

    ``Interrupt[Decision]`` types the answer a ``response_schema`` asks for.
    """

    value: Any
    """What the node asked (shown to the person who answers)."""

    id: str
    """Stable id; ``Command(resume={id: answer})`` answers this interrupt only."""

    response_schema: type[ResponseT] | dict[str, Any] | None
    """The JSON Schema the answer must follow, when the node gave one
    (``interrupt(..., response_schema=...)``); clients render a form from it."""

    def __init__(
        self,
        value: Any,
        id: str = _PLACEHOLDER_INTERRUPT_ID,
        *,
        response_schema: type[ResponseT] | dict[str, Any] | None = None,
        **deprecated_kwargs: Any,
    ) -> None:
        unknown = deprecated_kwargs.keys() - _LEGACY_INTERRUPT_KWARGS
        if unknown:
            raise TypeError(f"Interrupt() got unexpected arguments {sorted(unknown)}")
        ns = deprecated_kwargs.get("ns")
        if id == _PLACEHOLDER_INTERRUPT_ID and isinstance(ns, Sequence):
            # LangGraph < 0.6 interrupts carried their namespace instead of an id
            id = interrupt_id("|".join(ns), 0)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "response_schema", response_schema)

    @classmethod
    def from_ns(
        cls,
        value: Any,
        ns: str,
        index: int = 0,
        *,
        response_schema: type[ResponseT] | dict[str, Any] | None = None,
    ) -> Interrupt[ResponseT]:
        """An interrupt whose id is derived from the task namespace and the number
        of answers the task already has (``index``)."""
        return cls(value, interrupt_id(ns, index), response_schema=response_schema)

    @property
    def interrupt_id(self) -> str:
        """Deprecated spelling of :attr:`id`."""
        from engine.warnings import LangGraphDeprecatedSinceV10  # noqa: PLC0415

        warnings.warn(
            LangGraphDeprecatedSinceV10(
                "`Interrupt.interrupt_id` is deprecated: use `id`"
            ),
            stacklevel=2,
        )
        return self.id

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Interrupt)
            and self.id == other.id
            and self.value == other.value
            and self.response_schema == other.response_schema
        )

    def __hash__(self) -> int:
        return hash(self.id)


def interrupt_id(ns: str, index: int) -> str:
    """Deterministic id of the ``index``-th ``interrupt()`` call in a task namespace."""
    key = ns if index == 0 else f"{ns}#{index}"
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Overwrite:
    """Write ``value`` to a reducer channel, replacing its value instead of reducing.

    Two overwrites of one channel in the same step raise ``InvalidUpdateError``.
    A JSON client that cannot send this class sends its fields instead,
    ``{"value": ..., "type": "__overwrite__"}``, and the channel treats that
    dict the same way (as it does ``{"__overwrite__": value}``).
    """

    value: Any
    """What the channel holds afterwards."""

    type: Literal["__overwrite__"] = "__overwrite__"
    """Tells an overwrite apart once it was turned into a plain dict."""


if TYPE_CHECKING:
    _ToolOutput = object
else:
    try:  # what LangChain tools may return as it is (LangGraph's Command is one)
        from langchain_core.messages.tool import ToolOutputMixin as _ToolOutput
    except ImportError:  # langchain-core is optional

        class _ToolOutput:
            __slots__ = ()


@dataclass(slots=True)
class Command(Generic[N], _ToolOutput):
    """Update state and choose where to go next, from a node; or resume a paused run.

    With langchain-core installed, a ``Command`` is a LangChain
    ``ToolOutputMixin``, as LangGraph's is: a LangChain tool that returns one
    (to update the state, or to hand off to another agent) has it passed
    through whole to the ``ToolNode``, where any other value is turned into
    the text of a ``ToolMessage``.

    Args:
        graph: ``None`` for the current graph, ``Command.PARENT`` for the parent graph.
        update: state update (dict, list of pairs, or a state object).
        resume: answer for ``interrupt()``; a single value, or ``{interrupt_id: value}``.
        goto: node name(s) or ``Send``(s) to run next.
    """

    graph: str | None = None
    update: Any | None = None
    resume: dict[str, Any] | Any | None = None
    goto: Send | Sequence[Send | N] | N = ()

    PARENT: ClassVar[Literal["__parent__"]] = "__parent__"

    def __repr__(self) -> str:
        parts = [
            f"{name}={value!r}"
            for name, value in (
                ("graph", self.graph),
                ("update", self.update),
                ("resume", self.resume),
                ("goto", self.goto),
            )
            if value
        ]
        return f"Command({', '.join(parts)})"

    def _update_as_tuples(self) -> Sequence[tuple[str, Any]]:
        update = self.update
        if update is None:
            return ()
        if isinstance(update, dict):
            return list(update.items())
        if isinstance(update, (list, tuple)) and all(
            isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str)
            for t in update
        ):
            return list(update)
        items = object_update_items(update)
        if items is None:
            return [("__root__", update)]
        return items

    def goto_targets(self) -> list[Send | str]:
        """``goto`` as a list of node names and Sends."""
        goto = self.goto
        if not goto and goto != 0:
            return []
        if isinstance(goto, (Send, str)):
            return [goto]
        return list(goto)  # type: ignore[arg-type]


class PregelTask(NamedTuple):
    """A task of a step, as shown in a :class:`StateSnapshot`."""

    id: str
    name: str
    path: tuple[str | int | tuple[Any, ...], ...]
    error: Exception | None = None
    interrupts: tuple[Interrupt, ...] = ()
    state: RunnableConfig | StateSnapshot | None = None
    result: Any | None = None


class StateSnapshot(NamedTuple):
    """The state of a thread at one checkpoint."""

    values: dict[str, Any] | Any
    """Channel values at this checkpoint."""
    next: tuple[str, ...]
    """Nodes that run in the next step."""
    config: RunnableConfig
    """Config that addresses this checkpoint."""
    metadata: dict[str, Any] | None
    """Checkpoint metadata (source, step, parents...)."""
    created_at: str | None
    """ISO timestamp of the checkpoint."""
    parent_config: RunnableConfig | None
    """Config of the parent checkpoint, if any."""
    tasks: tuple[PregelTask, ...]
    """Tasks of the next step, with their results when they already ran."""
    interrupts: tuple[Interrupt, ...] = ()
    """Interrupts pending at this checkpoint."""


class StateUpdate(NamedTuple):
    """One update for ``bulk_update_state``."""

    values: dict[str, Any] | None
    as_node: str | None = None
    task_id: str | None = None


# -- typed stream parts (``stream(..., version="v2")``) ------------------------------

StateT = TypeVar("StateT")
OutputT = TypeVar("OutputT")


class TaskPayload(TypedDict):
    """A task starting (``tasks`` mode; ``debug`` mode's ``"task"`` events)."""

    id: str
    """The task's id."""
    name: str
    """The node it runs."""
    input: Any
    """What the node receives."""
    triggers: Sequence[str]
    """The channels whose writes made it run."""
    metadata: NotRequired[dict[str, Any]]
    """Extra information about the task, when there is any."""


class TaskResultPayload(TypedDict):
    """A task finishing (``tasks`` mode; ``debug`` mode's ``"task_result"`` events)."""

    id: str
    """The task's id."""
    name: str
    """The node it ran."""
    error: str | None
    """The error it raised, as text, or None."""
    interrupts: list[dict[str, Any]]
    """The interrupts it raised (``{"id", "value"}`` each)."""
    result: Any
    """The state keys it wrote and their values."""


class CheckpointTask(TypedDict):
    """A task of the next step, in a :class:`CheckpointPayload`."""

    id: str
    """The task's id."""
    name: str
    """The node it runs."""
    error: NotRequired[str]
    """Its error, when it failed."""
    result: NotRequired[Any]
    """What it wrote, when it finished."""
    interrupts: NotRequired[list[dict[str, Any]]]
    """Its interrupts, when it raised any."""
    state: StateSnapshot | RunnableConfig | None
    """A subgraph's state (or the config to read it), None for other nodes."""


class CheckpointPayload(TypedDict, Generic[StateT]):
    """A checkpoint saved (``checkpoints`` mode), shaped as ``get_state()`` shows it."""

    config: RunnableConfig | None
    """The config that addresses it."""
    metadata: dict[str, Any]
    """Its metadata (``source``, ``step``, ``writes``...)."""
    values: StateT
    """The state at that checkpoint."""
    next: list[str]
    """The nodes of the next step."""
    parent_config: RunnableConfig | None
    """The previous checkpoint's config, None for the first."""
    tasks: list[CheckpointTask]
    """The tasks of the next step."""


type DebugPayload = dict[str, Any]
"""A ``debug`` event: ``{"step", "timestamp", "type", "payload"}``, where ``type`` is
``"checkpoint"`` (a :class:`CheckpointPayload`), ``"task"`` (a :class:`TaskPayload`)
or ``"task_result"`` (a :class:`TaskResultPayload`)."""


class ValuesStreamPart(TypedDict, Generic[OutputT]):
    """``values`` mode: the state after a step, and the interrupts of a pause."""

    type: Literal["values"]
    ns: tuple[str, ...]
    """Where the chunk comes from: ``()`` for the graph, a path for a subgraph."""
    data: OutputT
    """The output values (an instance of a pydantic or dataclass output schema)."""
    interrupts: tuple[Interrupt, ...]
    """Interrupts raised when the run paused here, else ``()``."""


class UpdatesStreamPart(TypedDict):
    """``updates`` mode: ``{node: update}`` of one task (or ``__interrupt__``)."""

    type: Literal["updates"]
    ns: tuple[str, ...]
    data: dict[str, Any]


class MessagesStreamPart(TypedDict):
    """``messages`` mode: ``(message or token chunk, metadata)``."""

    type: Literal["messages"]
    ns: tuple[str, ...]
    data: tuple[Any, dict[str, Any]]


class CustomStreamPart(TypedDict):
    """``custom`` mode: what a node wrote with its stream writer."""

    type: Literal["custom"]
    ns: tuple[str, ...]
    data: Any


class CheckpointStreamPart(TypedDict, Generic[StateT]):
    """``checkpoints`` mode: a saved checkpoint."""

    type: Literal["checkpoints"]
    ns: tuple[str, ...]
    data: CheckpointPayload[StateT]


class TasksStreamPart(TypedDict):
    """``tasks`` mode: a task starting or finishing."""

    type: Literal["tasks"]
    ns: tuple[str, ...]
    data: TaskPayload | TaskResultPayload


class DebugStreamPart(TypedDict, Generic[StateT]):
    """``debug`` mode: checkpoints and tasks, with step numbers and timestamps."""

    type: Literal["debug"]
    ns: tuple[str, ...]
    data: DebugPayload


type StreamPart[S, O] = (
    ValuesStreamPart[O]
    | UpdatesStreamPart
    | MessagesStreamPart
    | CustomStreamPart
    | CheckpointStreamPart[S]
    | TasksStreamPart
    | DebugStreamPart[S]
)
"""What ``stream(..., version="v2")`` yields: a dict with ``type`` (the mode),
``ns`` and ``data``, whatever modes were asked for; tell them apart by ``type``.

Example::

    for part in graph.stream(inputs, stream_mode=["updates", "custom"], version="v2"):
        if part["type"] == "custom":
            show_progress(part["data"])
"""


@dataclass(frozen=True)
class GraphOutput(Generic[OutputT]):
    """What ``invoke(..., version="v2")`` returns: the output and the interrupts.

    Example::

        result = graph.invoke(inputs, config, version="v2")
        if result.interrupts:
            ask(result.interrupts[0].value)
        else:
            use(result.value)
    """

    value: OutputT
    """The output values (an instance of a pydantic or dataclass output schema)."""
    interrupts: tuple[Interrupt, ...] = ()
    """The interrupts the run paused on, else ``()``."""

    def __getitem__(self, key: str) -> Any:
        """Deprecated, as in LangGraph: read ``.value`` or ``.interrupts``."""
        _warn_item_access()
        if key == _INTERRUPT_KEY:
            return self.interrupts
        if isinstance(self.value, dict):
            return self.value[key]
        try:
            return getattr(self.value, key)
        except AttributeError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        """Deprecated, as in LangGraph: read ``.value`` or ``.interrupts``."""
        _warn_item_access()
        if key == _INTERRUPT_KEY:
            return bool(self.interrupts)
        if isinstance(self.value, dict):
            return key in self.value
        return isinstance(key, str) and hasattr(self.value, key)


_INTERRUPT_KEY = "__interrupt__"


def _warn_item_access() -> None:
    from engine.warnings import LangGraphDeprecatedSinceV11  # noqa: PLC0415

    warnings.warn(
        LangGraphDeprecatedSinceV11(
            "Reading a GraphOutput as a dict (`result[key]`, `key in result`) is "
            "deprecated: use `result.value` and `result.interrupts`"
        ),
        stacklevel=3,
    )


@overload
def interrupt(value: Any, *, response_schema: type[ResponseT]) -> ResponseT: ...


@overload
def interrupt(value: Any, *, response_schema: dict[str, Any] | None = None) -> Any: ...


def interrupt(
    value: Any, *, response_schema: type[Any] | dict[str, Any] | None = None
) -> Any:
    """Pause the run and ask for input; returns the answer once the run resumes.

    The first time a node reaches this call, the run stops and ``value`` is saved
    and shown (``get_state().interrupts``). Resuming with ``Command(resume=answer)``
    runs the node again from its start, and this call returns ``answer``. The n-th
    ``interrupt()`` of a node returns the n-th answer. Code before the call runs
    again on resume, so keep its side effects idempotent.

    ``response_schema`` describes the expected answer, for clients that render a
    form: a JSON Schema ``dict`` is shown as given (answers are not checked); a
    pydantic model, dataclass or ``TypedDict`` is shown as its JSON Schema, and
    the answer is validated and returned as that type. An answer that does not
    fit raises pydantic's ``ValidationError`` from the resuming call
    (``engine.errors.is_invalid_resume`` is true for it) and is not kept: the
    interrupt stays pending and can be answered again.

    Requires a checkpointer. The signal is a ``BaseException``: ``except Exception``
    does not catch it, and a caught signal is re-raised when the node returns.
    """
    schema = resume_schema(response_schema)
    scope = require_scope("interrupt()")
    index = scope.interrupt_counter
    scope.interrupt_counter += 1
    if index < len(scope.resume):
        answer = scope.resume[index]
        return answer if schema is None else _checked(schema, answer, scope, index)
    this_id = interrupt_id(scope.checkpoint_ns, index)
    if scope.resume_map and this_id in scope.resume_map:
        answer = scope.resume_map[this_id]
    else:
        answer = scope.take_null_resume()
    if answer is not MISSING:
        result = answer if schema is None else _checked(schema, answer, scope, index)
        scope.resume.append(answer)
        if scope.on_resume is not None:
            scope.on_resume(list(scope.resume))
        return result
    if scope.serde_check is not None:
        try:
            scope.serde_check(value)
        except SerializationError as exc:
            raise SerializationError(
                f"interrupt() payload in node {scope.name!r} cannot be stored: {exc}"
            ) from exc
    shown = schema.json_schema if schema is not None else response_schema
    pause: Interrupt[Any] = Interrupt(value, this_id, response_schema=shown)
    signal = GraphInterrupt([pause])
    scope.interrupted = signal
    raise signal


def _checked(schema: ResumeSchema, answer: Any, scope: TaskScope, index: int) -> Any:
    """The validated answer; a refused one is forgotten (with any saved after it),
    so that the interrupt stays open for a new answer."""
    try:
        return schema.validate(answer)
    except Exception:
        if index < len(scope.resume):
            del scope.resume[index:]
            if scope.on_resume is not None:
                scope.on_resume(list(scope.resume))
        raise

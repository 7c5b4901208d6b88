"""Run-scoped dependencies a node can ask for: context, store, stream writer, keys.

Mirrors ``langgraph.runtime``. A node receives a :class:`Runtime` by declaring a
``runtime`` parameter, or calls :func:`get_runtime` from anywhere inside a task.
Besides the run's dependencies it carries what the node may want to know about
its own execution (:class:`ExecutionInfo`), about the server that started the
run (:class:`ServerInfo`), and the run's :class:`RunControl`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from engine._internal._scope import current_scope, require_scope

__all__ = (
    "BaseUser",
    "ExecutionInfo",
    "RunControl",
    "Runtime",
    "ServerInfo",
    "get_runtime",
)

ContextT = TypeVar("ContextT")


@runtime_checkable
class BaseUser(Protocol):
    """An authenticated user, as an Agent Server hands it to a run.

    Readable both as attributes (``user.identity``) and as a mapping
    (``user["identity"]``).
    """

    @property
    def is_authenticated(self) -> bool:
        """Whether the user signed in."""
        ...

    @property
    def display_name(self) -> str:
        """A name to show for the user."""
        ...

    @property
    def identity(self) -> str:
        """The user's stable, unique id."""
        ...

    @property
    def permissions(self) -> Sequence[str]:
        """What the user may do."""
        ...

    def __getitem__(self, key: str) -> Any: ...

    def __contains__(self, key: object) -> bool: ...

    def __iter__(self) -> Iterator[str]: ...


@dataclass(frozen=True, slots=True)
class ExecutionInfo:
    """Where and how the current node attempt runs (read-only).

    Example::

        def call_api(state, runtime: Runtime) -> dict:
            info = runtime.execution_info
            if info.node_attempt > 1:
                log.warning("retry %s of task %s", info.node_attempt, info.task_id)
    """

    checkpoint_id: str
    """The checkpoint the task's step started from."""
    checkpoint_ns: str
    """The task's checkpoint namespace (``node:task_id``, ``|``-joined in subgraphs)."""
    task_id: str
    """The task's id, stable across retries and resumes of the same step."""
    thread_id: str | None = None
    """The thread, or ``None`` when the run has none."""
    run_id: str | None = None
    """The run id from the config, or ``None`` when the caller gave none."""
    node_attempt: int = 1
    """Which attempt this is: 1 for the first, 2 for the first retry, and so on."""
    node_first_attempt_time: float | None = None
    """Unix time at which the task's first attempt started."""

    def patch(self, **overrides: Any) -> ExecutionInfo:
        """A copy with the given fields replaced."""
        return replace(self, **overrides)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """Who started the run through an Agent Server; ``None`` for a plain call.

    Filled from the run's ``configurable``: ``assistant_id``, ``graph_id`` and
    ``langgraph_auth_user`` (an object with an ``identity``).
    """

    assistant_id: str
    """The assistant the run belongs to (``""`` when only a graph id was given)."""
    graph_id: str
    """The graph the assistant runs (``""`` when unknown)."""
    user: BaseUser | None = None
    """The authenticated user, if any."""


class RunControl:
    """Asks a running graph to stop cleanly: a graceful shutdown switch for one run.

    Pass one to ``invoke``/``stream`` (``control=``); after
    :meth:`request_drain`, the run finishes the step in progress, saves it, and
    raises :class:`~engine.errors.GraphDrained` instead of starting the next
    step. A later ``invoke(None, config)`` on the thread carries on. A run whose
    last step is in progress simply finishes.

    Safe to call from any thread or from a node. A control stays drained: use a
    new one per run.

    Example::

        control = RunControl()
        signal.signal(signal.SIGTERM, lambda *_: control.request_drain("sigterm"))
        try:
            graph.invoke(inputs, config, control=control)
        except GraphDrained:
            pass  # saved; the next worker resumes the thread
    """

    __slots__ = ("_drain_reason",)

    def __init__(self) -> None:
        self._drain_reason: str | None = None

    def request_drain(self, reason: str = "shutdown") -> None:
        """Stop the run at the next step boundary; ``reason`` ends up in the error."""
        self._drain_reason = reason  # one attribute write: atomic, no lock needed

    @property
    def drain_requested(self) -> bool:
        """Whether :meth:`request_drain` was called."""
        return self._drain_reason is not None

    @property
    def drain_reason(self) -> str | None:
        """The reason given to :meth:`request_drain`, or ``None``."""
        return self._drain_reason

    def __repr__(self) -> str:
        return f"RunControl(drain_reason={self._drain_reason!r})"


def _no_op_writer(_: Any) -> None:
    return None


def _scope_heartbeat() -> None:
    """Refresh the running attempt's idle timeout; nothing outside a timed attempt."""
    scope = current_scope()
    if scope is not None and scope.stream_writer is not None:
        beat = getattr(scope.stream_writer, "heartbeat", None)
        if beat is not None:
            beat()


@dataclass(frozen=True, slots=True, kw_only=True)
class Runtime(Generic[ContextT]):
    """What a node can use besides its state.

    Example::

        def node(state: State, runtime: Runtime[Ctx]) -> dict:
            runtime.stream_writer({"progress": 0.5})
            return {"user": runtime.context.user_id}
    """

    context: ContextT = field(default=None)  # type: ignore[assignment]
    """The run's static context (``invoke(..., context=...)``)."""
    store: Any = None
    """The long-term memory store given to ``compile(store=...)``, if any."""
    stream_writer: Callable[[Any], None] = _no_op_writer
    """Writes to the ``custom`` stream."""
    heartbeat: Callable[[], None] = _scope_heartbeat
    """Reports progress: refreshes the attempt's ``TimeoutPolicy.idle_timeout``.

    Call it from long work that writes nothing, so the attempt does not count as
    idle. It is the only progress signal under ``refresh_on="heartbeat"``; outside
    an attempt with an idle timeout it does nothing."""
    previous: Any = None
    """Functional API: the entrypoint's previous return value on this thread."""
    execution_info: ExecutionInfo | None = None
    """The running attempt's :class:`ExecutionInfo` (set for every node and task)."""
    server_info: ServerInfo | None = None
    """Set when an Agent Server started the run; ``None`` otherwise."""
    control: RunControl | None = None
    """The run's :class:`RunControl` (one is made when the caller gives none)."""
    thread_id: str | None = None
    """The thread this run belongs to, when it has one."""
    run_id: str | None = None
    """The id of this run, when the caller gave one."""

    def merge(self, other: Runtime[ContextT]) -> Runtime[ContextT]:
        """A runtime with ``other``'s non-empty fields layered over this one's."""
        return replace(
            self,
            context=other.context if other.context is not None else self.context,
            store=other.store or self.store,
            stream_writer=(
                other.stream_writer
                if other.stream_writer is not _no_op_writer
                else self.stream_writer
            ),
            heartbeat=(
                other.heartbeat
                if other.heartbeat is not _scope_heartbeat
                else self.heartbeat
            ),
            previous=other.previous if other.previous is not None else self.previous,
            execution_info=other.execution_info or self.execution_info,
            server_info=other.server_info or self.server_info,
            control=other.control or self.control,
            thread_id=other.thread_id or self.thread_id,
            run_id=other.run_id or self.run_id,
        )

    def override(self, **changes: Any) -> Runtime[ContextT]:
        """A copy with the given fields replaced."""
        return replace(self, **changes)

    def patch_execution_info(self, **overrides: Any) -> Runtime[ContextT]:
        """A copy whose :attr:`execution_info` has the given fields replaced.

        Raises ``RuntimeError`` when there is no execution info to patch (a runtime
        built outside a run).
        """
        if self.execution_info is None:
            raise RuntimeError(
                "Runtime.patch_execution_info(): this runtime has no execution_info "
                "(it was not built for a running task)"
            )
        return replace(self, execution_info=self.execution_info.patch(**overrides))

    @property
    def drain_requested(self) -> bool:
        """Whether the run was asked to drain (``False`` without a control)."""
        return self.control is not None and self.control.drain_requested

    @property
    def drain_reason(self) -> str | None:
        """Why the run was asked to drain, or ``None``."""
        return self.control.drain_reason if self.control is not None else None

    def idempotency_key(self, label: str = "") -> str:
        """A key for an external side effect, stable across retries, resumes and crashes.

        Built from the thread id, the task's namespace and task id, and a per-task
        call index (or ``label``), so the n-th external call of a task gets the
        same key every time the task runs again for the same step. Pass it to the
        service you call (payments, email) so it can deduplicate::

            def pay(state, runtime: Runtime):
                payments.charge(state["amount"], idempotency_key=runtime.idempotency_key())
        """
        scope = require_scope("Runtime.idempotency_key()")
        if label:
            suffix = f"label:{label}"
        else:
            suffix = f"call:{scope.call_counter}"
            scope.call_counter += 1
        ns = scope.checkpoint_ns or scope.name
        return f"{self.thread_id or '-'}/{ns}/{scope.task_id}/{suffix}"


DEFAULT_RUNTIME: Runtime[Any] = Runtime()


def get_runtime(context_schema: type[ContextT] | None = None) -> Runtime[ContextT]:
    """The running task's :class:`Runtime` (call from inside a node or task)."""
    scope = require_scope("get_runtime()")
    runtime: Runtime[ContextT] = scope.runtime
    return runtime

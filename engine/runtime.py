"""Run-scoped dependencies a node can ask for: context, store, stream writer, keys.

Mirrors ``langgraph.runtime``. A node receives a :class:`Runtime` by declaring a
``runtime`` parameter, or calls :func:`get_runtime` from anywhere inside a task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from engine._internal._scope import current_scope, require_scope

__all__ = ("Runtime", "get_runtime")

ContextT = TypeVar("ContextT")


def _no_op_writer(_: Any) -> None:
    return None


@dataclass(frozen=True, slots=True)
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
    previous: Any = None
    """Functional API: the entrypoint's previous return value on this thread."""
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
            previous=other.previous if other.previous is not None else self.previous,
        )

    def override(self, **changes: Any) -> Runtime[ContextT]:
        return replace(self, **changes)

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

    def heartbeat(self) -> None:
        """Report progress: refreshes a node's ``TimeoutPolicy.idle_timeout``."""
        scope = current_scope()
        if scope is not None and scope.stream_writer is not None:
            beat = getattr(scope.stream_writer, "heartbeat", None)
            if beat is not None:
                beat()


DEFAULT_RUNTIME: Runtime[Any] = Runtime()


def get_runtime(context_schema: type[ContextT] | None = None) -> Runtime[ContextT]:
    """The running task's :class:`Runtime` (call from inside a node or task)."""
    scope = require_scope("get_runtime()")
    runtime: Runtime[ContextT] = scope.runtime
    return runtime

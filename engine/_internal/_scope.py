"""The running task's scope: what ``interrupt()``, ``get_config()`` and friends read.

A :class:`TaskScope` is set in a context variable for the duration of one task
attempt. It lives here, below the runtime, so that ``engine.types`` and
``engine.config`` can read it without importing ``engine.pregel``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from engine._internal._typing import MISSING

__all__ = ("TaskScope", "current_scope", "require_scope")


class TaskScope:
    """Per-task mutable state; created by the loop, one per task attempt."""

    __slots__ = (
        "attempt",
        "base_runtime",
        "call_counter",
        "checkpoint_ns",
        "config_factory",
        "error",
        "interrupt_counter",
        "interrupted",
        "name",
        "message_writer",
        "null_resume",
        "on_resume",
        "resume_map",
        "path",
        "resume",
        "runtime_factory",
        "serde_check",
        "stream_sink",
        "stream_writer",
        "subgraph_counter",
        "task_calls",
        "task_id",
        "task_writes",
        "call_submit",
        "_config",
        "_runtime",
    )

    def __init__(
        self,
        *,
        task_id: str,
        name: str,
        path: tuple[Any, ...],
        checkpoint_ns: str,
        config_factory: Callable[[], dict[str, Any]],
        runtime: Any,
        stream_writer: Callable[[Any], None],
        resume: list[Any] | None = None,
        null_resume: Callable[[], Any] | None = None,
        on_resume: Callable[[list[Any]], None] | None = None,
        serde_check: Callable[[Any], None] | None = None,
        call_submit: Callable[..., Any] | None = None,
        stream_sink: tuple[Callable[[Any], None], frozenset[str]] | None = None,
        resume_map: dict[str, Any] | None = None,
        message_writer: Callable[[Any], None] | None = None,
        task_writes: list[tuple[str, Any]] | None = None,
        runtime_factory: Callable[[TaskScope], Any] | None = None,
    ) -> None:
        self.task_id = task_id
        self.name = name
        self.path = path
        self.checkpoint_ns = checkpoint_ns
        self.config_factory = config_factory
        self.base_runtime = runtime  # the run's; ``runtime`` adds this attempt's info
        self.runtime_factory = runtime_factory
        self.attempt = 1
        self._runtime: Any = None
        self.stream_writer = stream_writer
        self.resume: list[Any] = resume if resume is not None else []
        self.null_resume = null_resume
        self.on_resume = on_resume
        self.serde_check = serde_check
        self.call_submit = call_submit
        self.stream_sink = stream_sink
        self.resume_map = resume_map
        self.message_writer = message_writer
        self.task_writes = task_writes  # push_message() adds to them
        self.interrupt_counter = 0
        self.call_counter = 0
        self.subgraph_counter = 0
        self.task_calls = 0
        self.interrupted: Any = None
        self.error: Any = None
        self._config: dict[str, Any] | None = None

    @property
    def config(self) -> dict[str, Any]:
        """The task's RunnableConfig, built on first use (most nodes never ask)."""
        if self._config is None:
            self._config = self.config_factory()
        return self._config

    @property
    def runtime(self) -> Any:
        """The attempt's Runtime (with its execution info), built on first use."""
        runtime = self._runtime
        if runtime is None:
            factory = self.runtime_factory
            runtime = factory(self) if factory is not None else self.base_runtime
            self._runtime = runtime
        return runtime

    def take_null_resume(self) -> Any:
        """Consume the run-wide resume value, if one is waiting; else MISSING."""
        if self.null_resume is None:
            return MISSING
        return self.null_resume()


_SCOPE: ContextVar[TaskScope | None] = ContextVar("engine_task_scope", default=None)

current_scope = _SCOPE.get


def require_scope(what: str) -> TaskScope:
    """The running task's scope, or a clear error naming the function that needs one."""
    scope = _SCOPE.get()
    if scope is None:
        raise RuntimeError(
            f"{what} can only be called from inside a running graph node or task"
        )
    return scope


def set_scope(scope: TaskScope | None) -> Any:
    return _SCOPE.set(scope)


def reset_scope(token: Any) -> None:
    _SCOPE.reset(token)

"""Graph lifecycle callbacks of one run: when it resumes and when it pauses.

The drivers (``_drive.drive`` / ``adrive``) call :func:`report_resume` once the
loop has started and :func:`report_pause` once it has stopped. Both do nothing
unless ``config["callbacks"]`` holds a :class:`~engine.callbacks.GraphCallbackHandler`
(:func:`lifecycle_manager` returns None otherwise), so a run without graph
handlers pays one dict lookup at its start and nothing per step.

What is reported, as in LangGraph 1.2:

- a resume, for the root graph and for every subgraph that continues from a
  saved checkpoint (input ``None`` or a ``Command`` on a thread with state), with
  status ``"pending"``, the checkpoint continued from and the graph's namespace;
- a pause, for the root graph only, when the run stops on ``interrupt()`` calls
  (status ``"pending"``, with the interrupts) or at a static breakpoint (status
  ``"interrupt_before"``/``"interrupt_after"``, no interrupts). A drained,
  failed or finished run reports nothing.

The event's ``run_id`` is the root run's ``config["run_id"]`` when one was given,
otherwise a fresh id per graph run (a subgraph's run is its own run, as in
LangChain's tracing).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from engine.callbacks import (
    GraphInterruptEvent,
    GraphResumeEvent,
    get_async_graph_callback_manager_for_config,
    get_sync_graph_callback_manager_for_config,
    is_graph_handler,
)

if TYPE_CHECKING:
    from engine._internal._scope import TaskScope
    from engine._internal._typing import RunnableConfig
    from engine.pregel._loop import PregelLoop

__all__ = (
    "lifecycle_manager",
    "areport_pause",
    "areport_resume",
    "report_pause",
    "report_resume",
)

_PAUSED = {
    "interrupted": "pending",
    "interrupt_before": "interrupt_before",
    "interrupt_after": "interrupt_after",
}


def lifecycle_manager(
    config: RunnableConfig, parent: TaskScope | None, *, is_async: bool
) -> Any:
    """The run's graph callback manager, or None when no graph handler is configured.

    A subgraph has its parent task's callbacks (the task's config carries them);
    a config of its own replaces them.
    """
    callbacks = config.get("callbacks")
    if callbacks is None and parent is not None:
        callbacks = parent.config.get("callbacks")
    if not _has_graph_handler(callbacks):
        return None
    run_id = config.get("run_id") if parent is None else None
    if isinstance(run_id, str):
        run_id = uuid.UUID(run_id)
    if not isinstance(run_id, uuid.UUID):
        run_id = uuid.uuid4()
    source: RunnableConfig = {"callbacks": callbacks}
    if is_async:
        return get_async_graph_callback_manager_for_config(source, run_id=run_id)
    return get_sync_graph_callback_manager_for_config(source, run_id=run_id)


def _has_graph_handler(callbacks: Any) -> bool:
    if callbacks is None:
        return False
    if is_graph_handler(callbacks):
        return True
    handlers = getattr(callbacks, "handlers", None)
    if handlers is not None:  # a callback manager (ours or LangChain's)
        return any(map(is_graph_handler, handlers))
    if isinstance(callbacks, (list, tuple)):
        return any(map(is_graph_handler, callbacks))
    return True  # let the manager refuse what it cannot read


def _resume_event(loop: PregelLoop) -> GraphResumeEvent | None:
    if not loop.resumed:
        return None
    return GraphResumeEvent(
        run_id=loop.lifecycle.run_id,
        status="pending",
        checkpoint_id=loop.checkpoint["id"],
        checkpoint_ns=loop.ns,
    )


def _pause_event(loop: PregelLoop) -> GraphInterruptEvent | None:
    status = _PAUSED.get(loop.status)
    if status is None or loop.is_nested:
        return None
    return GraphInterruptEvent(
        run_id=loop.lifecycle.run_id,
        status=status,  # type: ignore[arg-type]
        checkpoint_id=loop.checkpoint["id"],
        checkpoint_ns=loop.ns,
        interrupts=tuple(loop.interrupts) if status == "pending" else (),
    )


def report_resume(loop: PregelLoop) -> None:
    """Tell the handlers the run resumed (call after ``loop.start``)."""
    if (event := _resume_event(loop)) is not None:
        loop.lifecycle.on_resume(event)


def report_pause(loop: PregelLoop) -> None:
    """Tell the handlers the root run paused (call once the loop stopped)."""
    if (event := _pause_event(loop)) is not None:
        loop.lifecycle.on_interrupt(event)


async def areport_resume(loop: PregelLoop) -> None:
    """Async twin of :func:`report_resume`."""
    if (event := _resume_event(loop)) is not None:
        await loop.lifecycle.on_resume(event)


async def areport_pause(loop: PregelLoop) -> None:
    """Async twin of :func:`report_pause`."""
    if (event := _pause_event(loop)) is not None:
        await loop.lifecycle.on_interrupt(event)

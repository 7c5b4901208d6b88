"""What a run tells operators as it goes: log lines with its ids, metrics, a trace.

The web side calls :func:`queued` when a run is queued. The worker wraps each
attempt in a :class:`RunObserver` and shows it every engine event; the observer
logs (text or JSON, :mod:`.logs`), counts (:mod:`.metrics`) and continues the
trace of the request that queued the run (:mod:`.tracing`). Nothing here
changes what the run does.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Any

from engine import events as ev
from studio.models import Run
from studio.observability import metrics, tracing
from studio.observability.logs import run_context

__all__ = ("RunObserver", "leases_taken_over", "queued")

log = logging.getLogger("studio.runs")


def queued(run: Run) -> None:
    """A run was queued (called after its row is written)."""
    metrics.RUNS_QUEUED.labels(run.graph).inc()
    log.info(
        "run queued",
        extra={"graph": run.graph, "thread_id": run.thread_id, "run_id": run.run_id},
    )


def leases_taken_over(count: int) -> None:
    """``count`` runs whose worker died went back to the queue."""
    if count:
        metrics.LEASES_TAKEN_OVER.inc(count)
        log.warning("%d run(s) queued again: their worker stopped heartbeating", count)


class RunObserver:
    """Observes one attempt of a run, from the claim to its end (a context manager)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.graph = run.graph
        self._context = run_context(
            graph=run.graph,
            thread_id=run.thread_id,
            run_id=run.run_id,
            attempt=run.attempt,
        )
        self._trace = tracing.continue_trace(run.trace_context)
        self._started = time.monotonic()

    def __enter__(self) -> RunObserver:
        self._context.__enter__()
        self._trace.__enter__()
        self._started = time.monotonic()
        metrics.RUNS_STARTED.labels(self.graph).inc()
        waited = None
        if self.run.attempt <= 1 and self.run.started_at is not None:
            due = max(self.run.created_at, self.run.not_before)
            waited = max(0.0, (self.run.started_at - due).total_seconds())
            metrics.QUEUE_WAIT.labels(self.graph).observe(waited)
        log.info(
            "run started (attempt %d%s)",
            self.run.attempt,
            "" if waited is None else f", waited {waited:.3f} s in the queue",
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._trace.__exit__(exc_type, exc, tb)
        finally:
            self._context.__exit__(exc_type, exc, tb)

    def configure(self, config: dict[str, Any]) -> None:
        """Add what the engine needs to trace the run (a tracer, when tracing is on)."""
        tracer = tracing.engine_tracer()
        if tracer is not None:
            config["tracer"] = tracer

    def see(self, event: Any) -> None:
        """One engine event of the run."""
        if isinstance(event, ev.TaskFinished):
            self._task(event)
        elif isinstance(event, ev.StepFinished):
            metrics.STEP_DURATION.labels(self.graph).observe(
                max(0.0, event.finished - event.started)
            )
            log.debug(
                "step %d done",
                event.step,
                extra={"step": event.step, "checkpoint_id": event.checkpoint_id},
            )
        elif isinstance(event, ev.CheckpointSaved):
            metrics.CHECKPOINT_SAVE.labels(self.graph).observe(event.seconds)
            log.debug(
                "checkpoint saved in %.3f s",
                event.seconds,
                extra={"step": event.step, "checkpoint_id": event.checkpoint_id},
            )
        elif isinstance(event, ev.Interrupted):
            log.info("run paused on %d interrupt(s)", len(event.interrupts))

    def _task(self, event: ev.TaskFinished) -> None:
        if event.cached:
            outcome = "cached"
        elif event.error is not None:
            outcome = "error"
        elif event.interrupts:
            outcome = "interrupt"
        else:
            outcome = "ok"
        node = event.node
        metrics.TASKS_FINISHED.labels(self.graph, node, outcome).inc()
        if not event.cached:
            metrics.TASK_DURATION.labels(self.graph, node).observe(event.duration)
        extra = {"node": node, "task_id": event.task_id, "step": event.step}
        if outcome == "error":
            log.warning("task %s failed: %s", node, event.error, extra=extra)
        else:
            log.info(
                "task %s %s in %.3f s",
                node,
                {"ok": "finished", "interrupt": "interrupted", "cached": "cached"}[
                    outcome
                ],
                event.duration,
                extra=extra,
            )

    def finished(self, status: str) -> None:
        """The attempt ended with ``status`` (a :class:`~studio.models.Run.Status`)."""
        seconds = time.monotonic() - self._started
        metrics.RUNS_FINISHED.labels(self.graph, status).inc()
        metrics.RUN_DURATION.labels(self.graph, status).observe(seconds)
        log.info("run finished: %s in %.3f s", status, seconds)

"""OpenTelemetry spans for a run: run > super-step > task, each checkpoint save under its step.

Tracing is optional and off by default. A run is traced when its config carries
an OpenTelemetry tracer under ``"tracer"`` (an ``opentelemetry.trace.Tracer``)::

    from opentelemetry import trace

    graph.invoke(inputs, {"configurable": {"thread_id": "1"},
                          "tracer": trace.get_tracer("my-app")})

The config travels to subgraphs, so their runs are traced too, each run span a
child of the task that called it. The engine depends on ``opentelemetry-api``
only, imported here the first time a tracer is given; without a tracer nothing
of it is imported and a run pays one dictionary lookup.

Spans (all attributes under ``engine.``):

- ``run <graph>`` (the compiled graph's name; for a root run,
  ``config["metadata"]["graph_id"]`` when given, as servers set it): ``graph``, ``thread_id``, ``run_id``, ``ns``, ``resumed``;
  at the end ``status`` (``done``, ``interrupted``, ``error``, ``cancelled``) and
  ``interrupts``. Its parent is the context current when the run starts (an
  HTTP request's span, or the calling task's span in a subgraph).
- ``step <n>``: ``step``, ``checkpoint_id``; from its first task's start to the
  barrier.
- ``task <node>``: ``node``, ``task_id``, ``step``, ``attempts``, ``retries``,
  ``cache_hit``, ``interrupt``; a failed attempt that is retried is a span event
  ``retry`` carrying the error; a failure sets the span's status to error and
  records the exception. The span is current while the node runs, so spans the
  node's own code makes (an HTTP client's, say) are its children.
- ``checkpoint save``: ``checkpoint_id``, ``step``; timed by the saver's answer
  (with ``durability="async"`` it may end after the next step began).

Spans are built from the loop's typed events (:mod:`engine.events`), which the
loop produces only while a run is traced or streamed with ``stream_events``.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from engine import events as ev
from engine._internal._constants import CONF, CONFIG_KEY_CHECKPOINT_NS, NS_SEP
from engine.constants import TAG_HIDDEN
from engine.errors import GraphBubbleUp, GraphInterrupt

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from engine.pregel._algo import PregelExecutableTask

__all__ = ("RunTracing", "start_tracing", "tracing_of")

TRACER_KEY = "tracer"
"""The config key that carries the tracer."""

_EVENTS = "events"
_by_loop: weakref.WeakKeyDictionary[Any, RunTracing] = weakref.WeakKeyDictionary()


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def start_tracing(
    config: dict[str, Any],
    graph: str,
    sink: Callable[[Any], None],
    modes: frozenset[str],
) -> tuple[RunTracing | None, Callable[[Any], None], frozenset[str]]:
    """Tracing for a run about to start, if its config has a tracer.

    Returns the tracing (or None) and the sink and modes the loop should use:
    the loop then produces typed events, which feed the spans and reach the
    caller only if it asked for them.
    """
    tracer = config.get(TRACER_KEY)
    if tracer is None:
        return None, sink, modes
    checkpoint_ns = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS, "")
    ns = tuple(checkpoint_ns.split(NS_SEP)) if checkpoint_ns else ()
    graph_id = (config.get("metadata") or {}).get("graph_id")
    if not ns and graph_id:
        graph = str(graph_id)  # a server's name for the graph (Agent Server metadata)
    tracing = RunTracing(tracer, graph, ns, forward_events=_EVENTS in modes)
    tracing.downstream = sink
    return tracing, tracing.sink, modes | {_EVENTS}


def attach(loop: Any, tracing: RunTracing | None) -> None:
    """Remember ``tracing`` as ``loop``'s (for the task runner)."""
    if tracing is not None:
        _by_loop[loop] = tracing


def tracing_of(loop: Any) -> RunTracing | None:
    """The tracing of ``loop``, None when the run is not traced."""
    if not _by_loop:
        return None
    return _by_loop.get(loop)


class RunTracing:
    """The spans of one run (one graph; a subgraph's run has its own)."""

    def __init__(
        self, tracer: Tracer, graph: str, ns: tuple[str, ...], *, forward_events: bool
    ) -> None:
        from opentelemetry import trace  # noqa: PLC0415 - optional dependency

        self._otel = trace
        self.tracer = tracer
        self.graph = graph
        self.ns = ns
        self.forward_events = forward_events
        self.downstream: Callable[[Any], None] = lambda chunk: None
        self.run_span: Span | None = None
        self._steps: dict[int, Span] = {}
        self._tasks: dict[str, Span] = {}
        self._attempts: dict[str, int] = {}
        self._interrupts = 0
        self._lock = threading.Lock()

    # -- the loop's events ----------------------------------------------------------

    def sink(self, chunk: Any) -> None:
        """The loop's sink: spans from this run's events, the rest passed on."""
        ns, mode, payload = chunk
        if mode == _EVENTS:
            if ns == self.ns:
                self._event(payload)
            if not self.forward_events:
                return
        self.downstream(chunk)

    def _event(self, event: Any) -> None:
        if isinstance(event, ev.RunStarted):
            self._start_run(event)
        elif isinstance(event, ev.TaskFinished) and event.cached:
            self._cached_task(event)
        elif isinstance(event, ev.StepFinished):
            self._end_step(event)
        elif isinstance(event, ev.CheckpointSaved):
            self._checkpoint(event)
        elif isinstance(event, ev.Interrupted):
            self._interrupts += len(event.interrupts)

    def _start_run(self, event: ev.RunStarted) -> None:
        attributes: dict[str, Any] = {
            "engine.graph": self.graph,
            "engine.ns": "|".join(self.ns),
            "engine.resumed": event.resumed,
        }
        if event.thread_id is not None:
            attributes["engine.thread_id"] = str(event.thread_id)
        if event.run_id is not None:
            attributes["engine.run_id"] = str(event.run_id)
        self.run_span = self.tracer.start_span(
            f"run {self.graph}", attributes=attributes, start_time=_ns(event.ts)
        )

    def _parent(self, step: int | None = None) -> Any:
        """The context of ``step``'s span, else of the run span, else the current one."""
        span = self._steps.get(step) if step is not None else None
        span = span or self.run_span
        return None if span is None else self._otel.set_span_in_context(span)

    def step_span(self, step: int, started: float) -> Span:
        """The span of ``step``, started at ``started`` if it is the first task's."""
        with self._lock:
            span = self._steps.get(step)
            if span is None:
                for old in [s for s in self._steps if s < step - 2]:
                    del self._steps[old]  # ended; only late checkpoint saves need them
                span = self.tracer.start_span(
                    f"step {step}",
                    context=self._parent(),
                    attributes={"engine.graph": self.graph, "engine.step": step},
                    start_time=_ns(started),
                )
                self._steps[step] = span
            return span

    def _end_step(self, event: ev.StepFinished) -> None:
        span = self.step_span(event.step, event.started)
        if event.checkpoint_id is not None:
            span.set_attribute("engine.checkpoint_id", event.checkpoint_id)
        span.end(end_time=_ns(event.finished))

    def _checkpoint(self, event: ev.CheckpointSaved) -> None:
        span = self.tracer.start_span(
            "checkpoint save",
            context=self._parent(event.step),
            attributes={
                "engine.checkpoint_id": event.checkpoint_id,
                "engine.step": event.step,
            },
            start_time=_ns(event.ts - event.seconds),
        )
        span.end(end_time=_ns(event.ts))

    def _cached_task(self, event: ev.TaskFinished) -> None:
        step = self.step_span(event.step, event.started)
        span = self.tracer.start_span(
            f"task {event.node}",
            context=self._otel.set_span_in_context(step),
            attributes=self._task_attributes(event.node, event.task_id, event.step)
            | {"engine.cache_hit": True},
            start_time=_ns(event.started),
        )
        span.end(end_time=_ns(event.finished))

    # -- tasks --------------------------------------------------------------------

    def _task_attributes(self, node: str, task_id: str, step: int) -> dict[str, Any]:
        return {
            "engine.graph": self.graph,
            "engine.node": node,
            "engine.task_id": task_id,
            "engine.step": step,
        }

    def _open_task(self, task: PregelExecutableTask, step: int) -> Span:
        parent = self.step_span(step, time.time())
        attributes = self._task_attributes(task.name, task.id, step)
        attributes["engine.cache_hit"] = False
        return self.tracer.start_span(
            f"task {task.name}",
            context=self._otel.set_span_in_context(parent),
            attributes=attributes,
        )

    def _close_task(
        self, task: PregelExecutableTask, span: Span, outcome: BaseException | None
    ) -> None:
        self._tasks.pop(task.id, None)
        attempts = self._attempts.pop(task.id, 1)
        span.set_attribute("engine.attempts", attempts)
        span.set_attribute("engine.retries", attempts - 1)
        span.set_attribute("engine.interrupt", isinstance(outcome, GraphInterrupt))
        if outcome is not None and not isinstance(outcome, GraphBubbleUp):
            span.record_exception(outcome)
            span.set_status(
                self._otel.Status(self._otel.StatusCode.ERROR, str(outcome))
            )
        span.end()

    def run_task(
        self,
        task: PregelExecutableTask,
        step: int,
        run: Callable[[], BaseException | None],
    ) -> BaseException | None:
        """Run a task (``run`` returns its failure) inside its span."""
        if TAG_HIDDEN in task.node.tags:  # the input step's bookkeeping task
            return run()
        span = self._open_task(task, step)
        self._tasks[task.id] = span
        outcome: BaseException | None = None
        try:
            with self._otel.use_span(span, end_on_exit=False):
                outcome = run()
        except BaseException as exc:
            outcome = exc
            raise
        finally:
            self._close_task(task, span, outcome)
        return outcome

    async def arun_task(
        self,
        task: PregelExecutableTask,
        step: int,
        run: Callable[[], Awaitable[BaseException | None]],
    ) -> BaseException | None:
        """Async twin of :meth:`run_task`."""
        if TAG_HIDDEN in task.node.tags:
            return await run()
        span = self._open_task(task, step)
        self._tasks[task.id] = span
        outcome: BaseException | None = None
        try:
            with self._otel.use_span(span, end_on_exit=False):
                outcome = await run()
        except BaseException as exc:
            outcome = exc
            raise
        finally:
            self._close_task(task, span, outcome)
        return outcome

    def retry(
        self, task: PregelExecutableTask, attempt: int, error: BaseException
    ) -> None:
        """Attempt ``attempt`` of ``task`` failed with ``error`` and will be retried."""
        span = self._tasks.get(task.id)
        if span is None:
            return
        self._attempts[task.id] = attempt + 1
        span.add_event(
            "retry",
            {
                "engine.attempt": attempt,
                "exception.type": type(error).__name__,
                "exception.message": str(error),
            },
        )

    # -- the run's end ----------------------------------------------------------------

    def end(self, error: BaseException | None, *, cancelled: bool = False) -> None:
        span = self.run_span
        if span is None:
            return
        self.run_span = None
        for step in list(self._steps.values()):
            if step.is_recording():  # a step cut short by a failure
                step.end()
        if cancelled:
            status = "cancelled"
        elif isinstance(error, GraphInterrupt) or (error is None and self._interrupts):
            status = "interrupted"
        elif error is not None and not isinstance(error, GraphBubbleUp):
            status = "error"
            span.record_exception(error)
            span.set_status(self._otel.Status(self._otel.StatusCode.ERROR, str(error)))
        else:
            status = "done"
        span.set_attribute("engine.status", status)
        span.set_attribute("engine.interrupts", self._interrupts)
        span.end()

    def traced(self, chunks: Iterator[Any]) -> Iterator[Any]:
        """Pass a run's chunks through; end the run span however the run ends."""
        try:
            yield from chunks
        except GeneratorExit:
            self.end(None, cancelled=True)
            raise
        except BaseException as exc:
            self.end(exc)
            raise
        self.end(None)

    async def atraced(self, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Async twin of :meth:`traced`."""
        try:
            async for chunk in chunks:
                yield chunk
        except GeneratorExit:
            self.end(None, cancelled=True)
            raise
        except BaseException as exc:
            self.end(exc)
            raise
        self.end(None)

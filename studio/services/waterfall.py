"""Step waterfalls from the run event log: where a run spends its time, step by step.

Per step of the root graph: each task's duration (``task.end``), how long a
finished task waited at the barrier for its slowest sibling (the ``step``
event's ``waits``), and how long saving the checkpoint took (``checkpoint``).
Read from :class:`~studio.models.RunEvent` rows only; no engine calls.
Positions are computed here (SVG units 0..1000 of the step's span), because
the page's CSP allows no inline styles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from studio.errors import NotFound
from studio.models import Run, RunEvent
from studio.presenters import WaterfallBar, WaterfallStep, WaterfallView
from studio.services.access import visible_thread

__all__ = ("MAX_STEPS", "build_step", "for_checkpoint", "for_run")

MAX_STEPS = 200
"""A run's waterfall shows at most this many of its last steps."""
SCALE = 1000.0
_MIN_WIDTH = 2.0
_KINDS = ("task.end", "step", "checkpoint")


def build_step(
    step: int,
    checkpoint_id: str,
    tasks: Iterable[Mapping[str, Any]],
    barrier: Mapping[str, Any] | None,
    save: float | None,
) -> WaterfallStep:
    """One step's bars from its ``task.end`` payloads, ``step`` payload and save time."""
    tasks = sorted(
        tasks, key=lambda t: (float(t.get("started") or 0), str(t.get("node")))
    )
    starts = [float(t.get("started") or 0) for t in tasks]
    ends = [float(t.get("finished") or 0) for t in tasks]
    start = float(barrier["started"]) if barrier else min(starts, default=0.0)
    end = float(barrier["finished"]) if barrier else max(ends, default=start)
    waits: Mapping[str, Any] = (barrier or {}).get("waits") or {}
    span = max(end - start + (save or 0.0), 1e-9)

    def at(moment: float) -> float:
        return round(min(max((moment - start) / span, 0.0), 1.0) * SCALE, 1)

    def width(seconds: float) -> float:
        return round(max(seconds / span * SCALE, _MIN_WIDTH), 1)

    bars = []
    for task, started, finished in zip(tasks, starts, ends, strict=True):
        duration = max(finished - started, 0.0)
        wait = float(waits.get(str(task.get("task_id")), 0.0) or 0.0)
        bars.append(
            WaterfallBar(
                task_id=str(task.get("task_id", "")),
                node=str(task.get("node", "")),
                duration=duration,
                wait=wait,
                x=at(started),
                width=width(duration),
                wait_x=at(finished),
                wait_width=round(wait / span * SCALE, 1) if wait > 0 else 0.0,
                error=bool(task.get("error")),
                interrupted=bool(task.get("interrupts")),
            )
        )
    return WaterfallStep(
        step=step,
        checkpoint_id=checkpoint_id,
        wall=max(end - start, 0.0),
        save=save,
        bars=tuple(bars),
        save_x=at(end),
        save_width=width(save) if save else 0.0,
    )


def for_checkpoint(
    thread_id: str, run_id: str, checkpoint_id: str
) -> WaterfallStep | None:
    """The waterfall of the step that made ``checkpoint_id`` (None when not logged).

    Reads a handful of rows by index, however long the run's log: the step event
    and the save by their ``checkpoint_id`` column, the previous root step event
    just before it, and the step's tasks between the two.
    """
    if not run_id:
        return None
    events = RunEvent.objects.filter(thread_id=thread_id, run_id=run_id)
    named = events.filter(checkpoint_id=checkpoint_id)
    barrier = named.filter(kind="step").order_by("-id").first()
    if barrier is None:
        return None
    previous = (
        events.filter(kind="step", checkpoint_id__isnull=False, id__lt=barrier.id)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    tasks = events.filter(kind="task.end", id__lt=barrier.id, payload__ns=[])
    if previous is not None:
        tasks = tasks.filter(id__gt=previous)
    saved = named.filter(kind="checkpoint", id__gt=barrier.id).order_by("id").first()
    step = int(barrier.payload.get("step", 0))
    return build_step(
        step,
        checkpoint_id,
        [t.payload for t in tasks if t.payload.get("step") == step],
        barrier.payload,
        _seconds(saved),
    )


def for_run(user: Any, thread_id: str, run_id: str = "") -> WaterfallView:
    """The last :data:`MAX_STEPS` steps of one run (default: the newest that logged steps).

    Raises:
        ThreadNotFound: unknown or invisible thread.
        NotFound: ``run_id`` is not a run of this thread.
    """
    thread = visible_thread(user, thread_id)
    runs = list(
        Run.objects.filter(thread=thread)
        .order_by("-created_at")
        .values_list("run_id", "status", "created_at")[:50]
    )
    choices = tuple(
        (rid, f"{created:%Y-%m-%d %H:%M:%S} · {status}")
        for rid, status, created in runs
    )
    if run_id and run_id not in {rid for rid, _, _ in runs}:
        raise NotFound(f"There is no run {run_id!r} on this thread.", run_id=run_id)
    if not run_id:
        run_id = (
            RunEvent.objects.filter(thread=thread, kind="step")
            .order_by("-id")
            .values_list("run_id", flat=True)
            .first()
            or ""
        )
    steps: tuple[WaterfallStep, ...] = ()
    if run_id:
        steps = _steps(thread.thread_id, run_id)
    return WaterfallView(
        thread_id=thread.thread_id, run_id=run_id, runs=choices, steps=steps
    )


def _steps(thread_id: str, run_id: str) -> tuple[WaterfallStep, ...]:
    barriers = list(
        RunEvent.objects.filter(
            thread_id=thread_id, run_id=run_id, kind="step", payload__ns=[]
        ).order_by("-id")[:MAX_STEPS]
    )
    barriers.reverse()
    first = int(barriers[0].payload.get("step", 0)) if barriers else 0
    rows = RunEvent.objects.filter(
        thread_id=thread_id, run_id=run_id, kind__in=_KINDS, payload__ns=[]
    )
    if barriers:
        rows = rows.filter(id__gte=_first_task_id(thread_id, run_id, barriers[0].id))
    tasks: dict[int, list[dict[str, Any]]] = {}
    saves: dict[str, float | None] = {}
    for row in rows.order_by("id").only("kind", "payload"):
        if row.kind == "task.end":
            tasks.setdefault(int(row.payload.get("step", 0)), []).append(row.payload)
        elif row.kind == "checkpoint":
            saves[str(row.payload.get("checkpoint_id"))] = _seconds(row)
    by_step = {int(b.payload.get("step", 0)): b.payload for b in barriers}
    numbers = sorted(set(by_step) | {s for s in tasks if s >= first})
    result = []
    for number in numbers:
        barrier = by_step.get(number)
        checkpoint_id = str((barrier or {}).get("checkpoint_id") or "")
        if barrier is None and not tasks.get(number):
            continue
        result.append(
            build_step(
                number,
                checkpoint_id,
                tasks.get(number, ()),
                barrier,
                saves.get(checkpoint_id),
            )
        )
    return tuple(result)


def _first_task_id(thread_id: str, run_id: str, barrier_id: int) -> int:
    """Id of the first event of the step ending at ``barrier_id``."""
    previous = (
        RunEvent.objects.filter(
            thread_id=thread_id, run_id=run_id, kind="step", id__lt=barrier_id
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    return (previous or 0) + 1


def _seconds(row: RunEvent | None) -> float | None:
    if row is None:
        return None
    value = row.payload.get("seconds")
    return float(value) if isinstance(value, int | float) else None

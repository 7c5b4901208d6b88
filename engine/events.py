"""Typed run events: what ``graph.stream_events()`` yields, and a safe projection.

Events say when a run and each task start and end (with timings), when state is
updated and saved, custom progress from nodes, and interrupts. They carry
namespaces, so subgraph activity is visible too. Asked for with
``stream_events(..., stream_mode=[...])``, the same stream also carries
:class:`StreamPart` events: the chunks ``stream()`` yields for those modes, in
the order ``stream()`` yields them.

``project_events`` turns events into plain dicts through a whitelist of public
fields, default deny: an event type or field that is not listed is dropped. Use
it to show progress to end users without leaking state::

    for public in project_events(
        graph.stream_events(inputs, config),
        {"TaskStarted": {"node"}, "Custom": {"payload.progress"}},
    ):
        send_to_browser(public)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

__all__ = (
    "CheckpointSaved",
    "Custom",
    "Interrupted",
    "RunEvent",
    "RunFinished",
    "RunStarted",
    "StateUpdated",
    "StepFinished",
    "StreamPart",
    "TaskFinished",
    "TaskStarted",
    "aproject_events",
    "event_fields",
    "project_event",
    "project_events",
)


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began (or resumed) on a thread."""

    ns: tuple[str, ...]
    thread_id: str | None
    run_id: str | None
    graph: str
    resumed: bool
    ts: float


@dataclass(frozen=True, slots=True)
class TaskStarted:
    """A task began its first attempt."""

    ns: tuple[str, ...]
    task_id: str
    node: str
    step: int
    ts: float


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """A task ended: with an update, an error, or interrupts."""

    ns: tuple[str, ...]
    task_id: str
    node: str
    step: int
    started: float
    finished: float
    update: Any
    error: str | None
    interrupts: tuple[Any, ...]
    cached: bool

    @property
    def duration(self) -> float:
        return self.finished - self.started


@dataclass(frozen=True, slots=True)
class StepFinished:
    """Every task of a step finished and the writes were applied.

    ``waits`` says, per task id, how long the finished task waited at the barrier
    for its slowest sibling.
    """

    ns: tuple[str, ...]
    step: int
    checkpoint_id: str | None
    started: float
    finished: float
    waits: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class CheckpointSaved:
    """A checkpoint reached the saver (``seconds`` spent saving it)."""

    ns: tuple[str, ...]
    checkpoint_id: str
    step: int
    seconds: float
    ts: float


@dataclass(frozen=True, slots=True)
class StateUpdated:
    """The state after a step (output keys only)."""

    ns: tuple[str, ...]
    step: int
    values: Any


@dataclass(frozen=True, slots=True)
class Custom:
    """A chunk a node wrote with its stream writer."""

    ns: tuple[str, ...]
    payload: Any


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The run paused; ``interrupts`` wait for answers."""

    ns: tuple[str, ...]
    interrupts: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended: ``done``, ``interrupted`` or ``error``."""

    ns: tuple[str, ...]
    status: Literal["done", "interrupted", "error"]
    error: str | None
    ts: float


@dataclass(frozen=True, slots=True)
class StreamPart:
    """A chunk of a ``stream_mode`` asked for with ``stream_events(stream_mode=...)``.

    ``mode`` is the stream mode (``"values"``, ``"updates"``, ``"custom"``, ...);
    ``payload`` is what ``stream()`` yields for that mode, and ``ns`` its
    namespace (``()`` for the root graph; subgraph parts only with
    ``subgraphs=True``).
    """

    ns: tuple[str, ...]
    mode: str
    payload: Any


RunEvent = (
    RunStarted
    | TaskStarted
    | TaskFinished
    | StepFinished
    | CheckpointSaved
    | StateUpdated
    | Custom
    | Interrupted
    | RunFinished
    | StreamPart
)


def _pick(value: Any, path: list[str]) -> Any:
    for part in path:
        if isinstance(value, Mapping):
            if part not in value:
                return _MISSING
            value = value[part]
        elif (
            hasattr(value, "__dataclass_fields__")
            and part in value.__dataclass_fields__
        ):
            value = getattr(value, part)
        else:
            return _MISSING
    return value


_MISSING = object()


def _assign(target: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value


def project_event(
    event: Any, allow: Mapping[str, Iterable[str]]
) -> dict[str, Any] | None:
    """The whitelisted part of one event as a plain dict, or None when its type is not listed.

    Args:
        event: a :data:`RunEvent`.
        allow: event type name -> field paths to keep (dotted paths reach into
            dicts, e.g. ``"payload.progress"`` or ``"update.status"``).
    """
    kind = type(event).__name__
    paths = allow.get(kind)
    if paths is None:
        return None
    out: dict[str, Any] = {"event": kind}
    for dotted in paths:
        path = dotted.split(".")
        value = _pick(event, path)
        if value is not _MISSING:
            _assign(out, path, value)
    return out


def project_events(
    events: Iterable[Any], allow: Mapping[str, Iterable[str]]
) -> Iterator[dict[str, Any]]:
    """:func:`project_event` over a stream, dropping events whose type is not allowed."""
    for event in events:
        projected = project_event(event, allow)
        if projected is not None:
            yield projected


async def aproject_events(
    events: AsyncIterator[Any], allow: Mapping[str, Iterable[str]]
) -> AsyncIterator[dict[str, Any]]:
    """Async twin of :func:`project_events`."""
    async for event in events:
        projected = project_event(event, allow)
        if projected is not None:
            yield projected


def event_fields(event_type: type[Any]) -> tuple[str, ...]:
    """Field names of an event type (for building whitelists)."""
    return tuple(f.name for f in fields(event_type))

"""The built-in stream transformers of the v3 protocol.

``stream_events(version="v3")`` always registers :class:`ValuesTransformer`,
:class:`MessagesTransformer`, :class:`LifecycleTransformer` and
:class:`SubgraphTransformer`; the others (:class:`UpdatesTransformer`,
:class:`CustomTransformer`, :class:`CheckpointsTransformer`,
:class:`DebugTransformer`, :class:`TasksTransformer`) are opt-in through
``compile(transformers=[...])`` or ``stream_events(..., transformers=[...])``.
Each projects the events of its own scope (the run, or one subgraph handle);
deeper subgraphs' events stay in the event log and on their handles.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal, NotRequired

from typing_extensions import TypedDict

from engine.errors import GraphDrained, GraphInterrupt
from engine.stream._messages import MessagesTransformer
from engine.stream._types import ProtocolEvent, StreamTransformer
from engine.stream.run_stream import AsyncSubgraphRunStream, SubgraphRunStream
from engine.stream.stream_channel import StreamChannel

__all__ = (
    "CheckpointsTransformer",
    "CustomTransformer",
    "DebugTransformer",
    "LifecycleCause",
    "LifecyclePayload",
    "LifecycleTransformer",
    "MessagesTransformer",
    "SubgraphStatus",
    "SubgraphTransformer",
    "TasksTransformer",
    "UpdatesTransformer",
    "ValuesTransformer",
)

logger = logging.getLogger(__name__)


class _OwnModeLog(StreamTransformer):
    """Pushes the data of one stream mode's events at its own scope onto a log."""

    _native = True
    _mode: ClassVar[str]

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._log: StreamChannel[Any] = StreamChannel()
        self._scope_list = list(scope)

    def init(self) -> dict[str, Any]:
        return {self._mode: self._log}

    def process(self, event: ProtocolEvent) -> bool:
        if (
            event["method"] == self._mode
            and event["params"]["namespace"] == self._scope_list
        ):
            self._log.push(event["params"]["data"])
        return True


class ValuesTransformer(_OwnModeLog):
    """``run.values``: the state after each step (and the input), at this scope."""

    _mode = "values"
    required_stream_modes = ("values",)

    @property
    def error(self) -> BaseException | None:
        """The error the run ended with, or None."""
        return self._log._error


class UpdatesTransformer(_OwnModeLog):
    """``run.updates``: ``{node: update}`` after each task, at this scope."""

    _mode = "updates"
    required_stream_modes = ("updates",)


class CustomTransformer(_OwnModeLog):
    """``run.custom``: what nodes wrote with ``get_stream_writer()``, at this scope."""

    _mode = "custom"
    required_stream_modes = ("custom",)


class CheckpointsTransformer(_OwnModeLog):
    """``run.checkpoints``: each saved checkpoint (as ``get_state()`` shows it).

    Empty without a checkpointer.
    """

    _mode = "checkpoints"
    required_stream_modes = ("checkpoints",)


class DebugTransformer(_OwnModeLog):
    """``run.debug``: the ``debug`` stream mode's payloads, at this scope."""

    _mode = "debug"
    required_stream_modes = ("debug",)


class TasksTransformer(_OwnModeLog):
    """``run.tasks``: task starts and results, at this scope.

    The lifecycle transformers keep ``tasks`` events out of the main log; this
    projection still receives them.
    """

    _mode = "tasks"
    required_stream_modes = ("tasks",)


SubgraphStatus = Literal["started", "completed", "failed", "interrupted", "drained"]
"""Where a subgraph run is: started, or how it ended."""


class LifecycleCause(TypedDict):
    """Why a subagent started: the tool call that spawned it."""

    type: Literal["toolCall"]
    tool_call_id: str


class LifecyclePayload(TypedDict, total=False):
    """An item of ``run.lifecycle`` (and the data of ``lifecycle`` events)."""

    event: SubgraphStatus
    """``"started"``, or how the subgraph ended."""
    namespace: list[str]
    """The subgraph's namespace."""
    graph_name: NotRequired[str]
    """Its node name, or the agent name of a subagent."""
    trigger_call_id: NotRequired[str]
    """The id of the parent task that runs it (on ``started``)."""
    cause: NotRequired[LifecycleCause]
    """The tool call that spawned a subagent (on ``started``)."""
    error: NotRequired[str]
    """Why it failed (on ``failed``)."""


def _split_segment(segment: str) -> tuple[str, str | None]:
    """``"node:task_id"`` -> ``("node", "task_id")``; no colon -> ``(segment, None)``."""
    name, colon, task_id = segment.partition(":")
    return name, task_id if colon else None


def _status_of_error(err: BaseException) -> tuple[SubgraphStatus, str | None]:
    if isinstance(err, GraphDrained):
        return "drained", None
    if isinstance(err, GraphInterrupt):
        return "interrupted", None
    return "failed", str(err)


def _status_of_result(result: dict[str, Any]) -> tuple[SubgraphStatus, str | None]:
    """A parent task's result -> how the subgraph it ran ended (interrupts win)."""
    if result.get("interrupts"):
        return "interrupted", None
    if error := result.get("error"):
        return "failed", str(error)
    return "completed", None


def _tool_call_id_of(task_input: Any) -> str | None:
    """The tool call a task runs: a ``{"tool_call": {...}}`` input or a list of calls."""
    if isinstance(task_input, dict) and isinstance(task_input.get("tool_call"), dict):
        found = task_input["tool_call"].get("id")
        return found if isinstance(found, str) else None
    if isinstance(task_input, list):
        for call in task_input:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                return str(call["id"])
    return None


class _SubgraphWatcher(StreamTransformer):
    """Finds subgraph runs in ``tasks`` events and tells when they end.

    A tracked namespace starts at its first task event and ends when its parent
    task's result arrives (or, failing that, when the run ends). Subclasses say
    which namespaces they track and what to do on start and end. ``tasks``
    events are kept out of the main log: the lifecycle view replaces them.
    """

    required_stream_modes = ("tasks",)

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._seen: set[tuple[str, ...]] = set()
        self._open: dict[tuple[str, ...], str] = {}  # namespace -> parent task id
        self._lc_by_ns: dict[tuple[str, ...], str | None] = {}
        self._pending_tool_calls: dict[str, str] = {}  # task id -> tool call id
        self._pending_cause: LifecycleCause | None = None

    def _should_track(self, ns: tuple[str, ...]) -> bool:
        raise NotImplementedError

    def _on_started(
        self, ns: tuple[str, ...], graph_name: str | None, trigger_call_id: str | None
    ) -> None:
        raise NotImplementedError

    def _on_terminal(
        self, ns: tuple[str, ...], status: SubgraphStatus, error: str | None
    ) -> None:
        raise NotImplementedError

    def process(self, event: ProtocolEvent) -> bool:
        if event["method"] != "tasks":
            return True
        ns = tuple(event["params"]["namespace"])
        data = event["params"]["data"]
        if "result" in data:
            for child, status, error in self._ended_by(ns, data):
                self._on_terminal(child, status, error)
        else:
            self._note_start(ns, data)
        return False

    def _note_start(self, ns: tuple[str, ...], data: dict[str, Any]) -> None:
        metadata = data.get("metadata") or {}
        self._lc_by_ns.setdefault(ns, metadata.get("lc_agent_name"))
        task_id = data.get("id")
        call_id = _tool_call_id_of(data.get("input"))
        if isinstance(task_id, str) and call_id is not None:
            self._pending_tool_calls[task_id] = call_id
        if not self._should_track(ns) or ns in self._seen:
            return
        self._seen.add(ns)
        node, trigger_call_id = _split_segment(ns[-1])
        agent = metadata.get("lc_agent_name")
        cause: LifecycleCause | None = None
        spawned_by = (
            self._pending_tool_calls.get(trigger_call_id)
            if agent is not None and trigger_call_id is not None
            else None
        )
        if spawned_by:
            cause = {"type": "toolCall", "tool_call_id": str(spawned_by)}
        self._pending_cause = cause
        self._on_started(
            ns, agent if agent is not None else (node or None), trigger_call_id
        )
        if trigger_call_id is not None:
            self._open[ns] = trigger_call_id

    def _ended_by(
        self, ns: tuple[str, ...], result: dict[str, Any]
    ) -> list[tuple[tuple[str, ...], SubgraphStatus, str | None]]:
        task_id = result.get("id")
        if not task_id:
            return []
        ended = [
            child
            for child, parent_task in self._open.items()
            if parent_task == task_id and child[:-1] == ns
        ]
        status, error = _status_of_result(result)
        for child in ended:
            del self._open[child]
        return [(child, status, error) for child in ended]

    def finalize(self) -> None:
        for ns in list(self._open):
            self._on_terminal(ns, "completed", None)
        self._open.clear()

    def fail(self, err: BaseException) -> None:
        status, error = _status_of_error(err)
        for ns in list(self._open):
            self._on_terminal(ns, status, error)
        self._open.clear()


class LifecycleTransformer(_SubgraphWatcher):
    """``run.lifecycle``: when each subgraph (at any depth) starts and ends.

    Its channel is named ``lifecycle``, so the payloads are also ``lifecycle``
    events of the main log.
    """

    _native = True

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._channel: StreamChannel[LifecyclePayload] = StreamChannel("lifecycle")

    def init(self) -> dict[str, Any]:
        return {"lifecycle": self._channel}

    def _should_track(self, ns: tuple[str, ...]) -> bool:
        depth = len(self.scope)
        return len(ns) > depth and ns[:depth] == self.scope

    def _on_started(
        self, ns: tuple[str, ...], graph_name: str | None, trigger_call_id: str | None
    ) -> None:
        if trigger_call_id is None:
            return  # its end could not be matched to a parent task
        payload: LifecyclePayload = {"event": "started", "namespace": list(ns)}
        if graph_name:
            payload["graph_name"] = graph_name
        payload["trigger_call_id"] = trigger_call_id
        if self._pending_cause is not None:
            payload["cause"] = self._pending_cause
        self._channel.push(payload)

    def _on_terminal(
        self, ns: tuple[str, ...], status: SubgraphStatus, error: str | None
    ) -> None:
        payload: LifecyclePayload = {"event": status, "namespace": list(ns)}
        if error is not None:
            payload["error"] = error
        self._channel.push(payload)


_Handle = SubgraphRunStream | AsyncSubgraphRunStream


class SubgraphTransformer(_SubgraphWatcher):
    """``run.subgraphs``: a run stream handle per direct child subgraph.

    Each handle has a child mux with fresh transformers for its namespace, fed
    with every event under it, so ``handle.values``, ``handle.subgraphs``
    (grandchildren) and the rest work as on the run.
    """

    _native = True
    supports_sync = True

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self._log: StreamChannel[_Handle] = StreamChannel()
        self._handles: dict[tuple[str, ...], _Handle] = {}
        self._mux: Any = None

    def init(self) -> dict[str, Any]:
        return {"subgraphs": self._log}

    def _on_register(self, mux: Any) -> None:
        self._mux = mux

    def _should_track(self, ns: tuple[str, ...]) -> bool:
        depth = len(self.scope)
        return len(ns) == depth + 1 and ns[:depth] == self.scope

    def _on_started(
        self, ns: tuple[str, ...], graph_name: str | None, trigger_call_id: str | None
    ) -> None:
        if self._mux is None:
            return
        try:
            child = self._mux._make_child(ns)
        except RuntimeError:
            return  # a mux of ready-made transformers cannot have children
        cls = AsyncSubgraphRunStream if child.is_async else SubgraphRunStream
        handle = cls(
            child, path=ns, graph_name=graph_name, trigger_call_id=trigger_call_id
        )
        self._handles[ns] = handle
        self._log.push(handle)

    def _mark(self, handle: _Handle, status: SubgraphStatus, error: str | None) -> bool:
        if handle._seen_terminal:
            return False
        handle._seen_terminal = True
        handle.status = status
        if error is not None and handle.error is None:
            handle.error = error
        return True

    def _on_terminal(
        self, ns: tuple[str, ...], status: SubgraphStatus, error: str | None
    ) -> None:
        handle = self._handles.get(ns)
        if handle is None or not self._mark(handle, status, error):
            return
        if handle._mux._events._closed:
            return
        if status == "failed":
            handle._mux.fail(RuntimeError(error or "Subgraph failed"))
        else:
            handle._mux.close()

    async def _aon_terminal(
        self, ns: tuple[str, ...], status: SubgraphStatus, error: str | None
    ) -> None:
        handle = self._handles.get(ns)
        if handle is None or not self._mark(handle, status, error):
            return
        if handle._mux._events._closed:
            return
        if status == "failed":
            await handle._mux.afail(RuntimeError(error or "Subgraph failed"))
        else:
            await handle._mux.aclose()

    def _handle_for(self, event: ProtocolEvent) -> _Handle | None:
        ns = tuple(event["params"]["namespace"])
        depth = len(self.scope)
        if len(ns) <= depth:
            return None
        handle = self._handles.get(ns[: depth + 1])
        if handle is None or handle._mux._events._closed:
            return None
        return handle

    def process(self, event: ProtocolEvent) -> bool:
        keep = super().process(event)  # a new handle exists before it gets events
        if (handle := self._handle_for(event)) is not None:
            handle._observe_event(event)
            handle._mux.push(event)
        return keep

    async def aprocess(self, event: ProtocolEvent) -> bool:
        keep = True
        if event["method"] == "tasks":
            keep = False
            ns = tuple(event["params"]["namespace"])
            data = event["params"]["data"]
            if "result" in data:
                for child, status, error in self._ended_by(ns, data):
                    await self._aon_terminal(child, status, error)
            else:
                self._note_start(ns, data)
        if (handle := self._handle_for(event)) is not None:
            handle._observe_event(event)
            await handle._mux.apush(event)
        return keep

    def finalize(self) -> None:
        first: BaseException | None = None
        for ns in [*self._open, *self._handles]:
            try:
                self._on_terminal(ns, "completed", None)
            except BaseException as exc:
                first = first or exc
        self._open.clear()
        if first is not None:
            raise first

    async def afinalize(self) -> None:
        first: BaseException | None = None
        for ns in [*self._open, *self._handles]:
            try:
                await self._aon_terminal(ns, "completed", None)
            except BaseException as exc:
                first = first or exc
        self._open.clear()
        if first is not None:
            raise first

    def fail(self, err: BaseException) -> None:
        status, error = _status_of_error(err)
        self._open.clear()
        for handle in self._handles.values():
            self._mark(handle, status, error)
            if not handle._mux._events._closed:
                try:
                    handle._mux.fail(err)
                except Exception:
                    logger.warning(
                        "Could not fail subgraph stream %s", handle.path, exc_info=True
                    )

    async def afail(self, err: BaseException) -> None:
        status, error = _status_of_error(err)
        self._open.clear()
        for handle in self._handles.values():
            self._mark(handle, status, error)
            if not handle._mux._events._closed:
                try:
                    await handle._mux.afail(err)
                except Exception:
                    logger.warning(
                        "Could not fail subgraph stream %s", handle.path, exc_info=True
                    )

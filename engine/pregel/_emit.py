"""The loop's stream output: ``values``/``updates``/``tasks``/``debug``/
``checkpoints``/``messages`` chunks and the typed ``events`` of a run.

Every chunk goes to the run's sink as ``(namespace, mode, payload)``; nothing
here reads or writes storage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from engine import events as ev
from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    PUSH,
    TASKS,
)
from engine._internal._ids import utc_now_iso
from engine._internal._typing import RunnableConfig
from engine.constants import TAG_HIDDEN
from engine.errors import (
    GraphBubbleUp,
    GraphInterrupt,
)
from engine.pregel._algo import (
    PregelExecutableTask,
)
from engine.pregel._io import keyed_update
from engine.pregel._loop_state import SPECIAL_WRITES, LoopState
from engine.types import Interrupt

__all__ = ("LoopEmitter",)


class LoopEmitter(LoopState):
    """Turns what the loop does into stream chunks, for the modes the run asked for."""

    def _emit(self, mode: str, payload: Any) -> None:
        if mode in self.modes:
            self.sink((self.ns, mode, payload))

    def _emit_debug(self, kind: str, payload: Any, step: int) -> None:
        if "debug" in self.modes:
            self.sink(
                (
                    self.ns,
                    "debug",
                    {
                        "step": step,
                        "timestamp": utc_now_iso(),
                        "type": kind,
                        "payload": payload,
                    },
                )
            )

    def task_started(self, task: PregelExecutableTask) -> None:
        """A task's first attempt begins (called from the thread that runs it)."""
        task.started = time.time()
        if "events" in self.modes and TAG_HIDDEN not in task.node.tags:
            self.sink(
                (
                    self.ns,
                    "events",
                    ev.TaskStarted(
                        self.ns, task.id, task.name, self.step, task.started
                    ),
                )
            )

    def call_started(self, task: PregelExecutableTask) -> None:
        """A call is about to run: the ``tasks`` and ``debug`` streams say so."""
        if "tasks" in self.modes or "debug" in self.modes:
            packed = task.input
            payload = {
                "id": task.id,
                "name": task.name,
                "input": (packed.args, packed.kwargs),
                "triggers": (PUSH,),
            }
            self._emit("tasks", payload)
            self._emit_debug("task", payload, self.step)

    def _task_event(
        self,
        task: PregelExecutableTask,
        error: BaseException | None,
        cached: bool = False,
    ) -> None:
        interrupts = (
            tuple(error.interrupts) if isinstance(error, GraphInterrupt) else ()
        )
        failure = (
            None
            if error is None or isinstance(error, GraphBubbleUp)
            else f"{type(error).__name__}: {error}"
        )
        update = self.graph.task_update(task) if error is None else None
        self.sink(
            (
                self.ns,
                "events",
                ev.TaskFinished(
                    self.ns,
                    task.id,
                    task.name,
                    self.step,
                    task.started or task.finished,
                    task.finished,
                    update,
                    failure,
                    interrupts,
                    cached,
                ),
            )
        )

    def _emit_task_output(self, task: PregelExecutableTask, *, cached: bool) -> None:
        modes = self.modes
        if not modes or TAG_HIDDEN in task.node.tags:
            return
        if "updates" in modes:
            keys = self.update_keys
            update = (
                self.graph.task_update(task)
                if keys is None
                else keyed_update(task.writes, keys)
            )
            chunk: dict[str, Any] = {task.name: update}
            if cached:
                chunk["__metadata__"] = {"cached": True}
            self.sink((self.ns, "updates", chunk))
        if "tasks" in modes or "debug" in modes:
            self._emit_task_result(task, None, [], cached=cached)

    def _emit_task_result(
        self,
        task: PregelExecutableTask,
        error: BaseException | None,
        interrupts: list[Interrupt],
        *,
        cached: bool = False,
    ) -> None:
        if TAG_HIDDEN in task.node.tags or not (
            "tasks" in self.modes or "debug" in self.modes
        ):
            return
        result = (
            {
                c: v
                for c, v in task.writes
                if c not in SPECIAL_WRITES
                and c != TASKS
                and c in self.graph.output_channel_set
            }
            if error is None and not interrupts
            else {}  # as LangGraph: a failed or paused task wrote nothing
        )
        payload: dict[str, Any] = {
            "id": task.id,
            "name": task.name,
            "error": error,  # the exception itself, as LangGraph
            "result": result,
            "interrupts": [_interrupt_dict(i) for i in interrupts],
        }
        if cached:
            payload["cached"] = True  # the writes came from the node's cache
        self._emit("tasks", payload)
        self._emit_debug("task_result", payload, self.step)

    def _emit_call_result(
        self,
        task: PregelExecutableTask,
        result: dict[str, Any] | None,
        error: BaseException | None,
    ) -> None:
        if "tasks" in self.modes or "debug" in self.modes:
            payload: dict[str, Any] = {
                "id": task.id,
                "name": task.name,
                "error": error,
                "result": {} if error is not None else result,
                "interrupts": [],
            }
            self._emit("tasks", payload)
            self._emit_debug("task_result", payload, self.step)

    def emit_paused_results(self) -> None:
        """Stream the ``tasks``/``debug`` results of the tasks that paused on an
        interrupt (the driver calls it after the pause's final ``values``)."""
        results, self._paused_results = self._paused_results, []
        for task, interrupts in results:
            self._emit_task_result(task, None, interrupts)

    def _step_events(
        self, tasks: Sequence[PregelExecutableTask], step: int, step_done: float
    ) -> None:
        ran = [t for t in tasks if t.finished]
        started = min((t.started for t in ran if t.started), default=step_done)
        waits = {t.id: max(0.0, step_done - t.finished) for t in ran}
        checkpoint_id = self.checkpoint["id"] if self.checkpointer is not None else None
        self.sink(
            (
                self.ns,
                "events",
                ev.StepFinished(
                    self.ns, step, checkpoint_id, started, step_done, waits
                ),
            )
        )
        self.sink(
            (
                self.ns,
                "events",
                ev.StateUpdated(self.ns, step, self.output_values(self.stream_keys)),
            )
        )

    def _on_saved(
        self, checkpoint_id: str, step: int
    ) -> Callable[[float], None] | None:
        if "events" not in self.modes:
            return None
        sink, ns = self.sink, self.ns

        def saved(seconds: float) -> None:
            sink(
                (
                    ns,
                    "events",
                    ev.CheckpointSaved(ns, checkpoint_id, step, seconds, time.time()),
                )
            )

        return saved

    def _emit_checkpoint(self) -> None:
        if not ("checkpoints" in self.modes or "debug" in self.modes):
            return
        if self._unsaved or self._last_saved_id is None:
            return
        payload = self.checkpoint_payload()
        self._emit("checkpoints", payload)
        self._emit_debug("checkpoint", payload, self.step - 1)

    def checkpoint_payload(self) -> dict[str, Any]:
        return {
            "config": self.checkpoint_config_public(),
            "parent_config": self.prev_checkpoint_config_public(),
            "values": self.output_values(self.stream_keys),
            "metadata": {
                k: v
                for k, v in self.checkpoint_metadata.items()
                if k not in ("writes", "next")
            },
            "next": [t.name for t in self.tasks.values()],
            "tasks": [
                {"id": t.id, "name": t.name, "interrupts": (), "state": None}
                for t in self.tasks.values()
            ],
        }

    def checkpoint_config_public(self) -> RunnableConfig:
        return {
            CONF: {
                CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
                CONFIG_KEY_THREAD_ID: self.thread_id,
                CONFIG_KEY_CHECKPOINT_ID: self.checkpoint["id"],
            }
        }

    def prev_checkpoint_config_public(self) -> RunnableConfig | None:
        parent = self.parent_checkpoint_id
        if parent is None:
            return None
        return {
            CONF: {
                CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
                CONFIG_KEY_THREAD_ID: self.thread_id,
                CONFIG_KEY_CHECKPOINT_ID: parent,
            }
        }

    def _message_metadata(self, task: PregelExecutableTask) -> dict[str, Any]:
        """A task's metadata as LangGraph puts it in its runs' callbacks: the
        config's (``lc_agent_name``...), the task's ``langgraph_*`` keys, the
        node's own metadata and the thread id."""
        metadata: dict[str, Any] = {
            **self.config.get("metadata", {}),
            "langgraph_step": self.step,
            "langgraph_node": task.name,
            "langgraph_triggers": tuple(task.triggers),
            "langgraph_path": task.path,
            "langgraph_checkpoint_ns": task.ns,
        }
        if node_metadata := getattr(task.node, "metadata", None):
            metadata.update(node_metadata)
        if self.thread_id is not None:
            metadata.setdefault("thread_id", self.thread_id)
        return metadata

    def _message_writer(self, task: PregelExecutableTask) -> Callable[..., None]:
        # streamed chunks come from a model run, whose metadata also has its tags
        metadata = self._message_metadata(task)
        tags = [
            tag
            for tag in (*self.config.get("tags", ()), *task.node.tags)
            if not tag.startswith("seq:step")
        ]
        if tags:
            metadata["tags"] = tags
        sink, ns, streamed = self.sink, self.ns, self._streamed_messages

        def write(chunk: Any, run_metadata: dict[str, Any] | None = None) -> None:
            """``chunk`` to the messages stream; ``run_metadata``: the model
            run's callback metadata, sent as LangGraph sends it (the config's
            keys again, and the model's ``ls_*`` and ``configurable`` ones)."""
            message_id = _message_id(chunk)
            if message_id is not None:
                streamed.add(message_id)
            meta = metadata if not run_metadata else {**run_metadata, **metadata}
            sink((ns, "messages", (chunk, meta)))

        return write

    def _emit_messages(self, task: PregelExecutableTask) -> None:
        """Messages a node wrote to a message list, unless their tokens were streamed
        or the node was given them (LangGraph's handler skips both)."""
        metadata: dict[str, Any] | None = None
        for chan, value in task.writes:
            channel = self.channels.get(chan)
            operator = getattr(channel, "operator", None)
            if getattr(operator, "__name__", "") != "add_messages":
                continue
            given: set[Any] | None = None
            for message in value if isinstance(value, list) else [value]:
                message_id = _message_id(message)
                if message_id is not None and message_id in self._streamed_messages:
                    continue
                if message_id is not None:
                    if given is None:
                        given = _given_message_ids(task.input, chan)
                    if message_id in given:
                        continue
                if metadata is None:
                    metadata = self._message_metadata(task)
                if message_id is not None:
                    self._streamed_messages.add(message_id)
                self.sink((self.ns, "messages", (message, metadata)))


def _message_id(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("id")
    return getattr(message, "id", None)


def _interrupt_dict(interrupt: Interrupt) -> dict[str, Any]:
    """An interrupt in a ``tasks`` payload (LangGraph's keys and order)."""
    return {
        "value": interrupt.value,
        "id": interrupt.id,
        "response_schema": interrupt.response_schema,
    }


def _given_message_ids(state: Any, key: str) -> set[Any]:
    """Ids of the messages a task's input holds under ``key``."""
    value = state.get(key) if isinstance(state, dict) else getattr(state, key, None)
    if value is None:
        return set()
    items = value if isinstance(value, (list, tuple)) else [value]
    return {i for i in map(_message_id, items) if i is not None}

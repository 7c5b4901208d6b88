"""PregelLoop: one run of a graph, step by step. The only runtime code that saves:
every checkpoint and pending write of a run goes to the saver from here.

The loop is assembled from its jobs, each a class in its own module over the
shared :class:`~engine.pregel._loop_state.LoopState`: resume bookkeeping
(``_resume``), the node cache (``_cache``), stream emission (``_emit``) and
checkpoint building (``_checkpoint_build``). What is left here is the step
order and the saver calls.

The driver (``_drive.py``) loads the checkpoint, calls :meth:`PregelLoop.start`,
then alternates :meth:`tick` (plan the next step), running the tasks (the
runner calls :meth:`task_done` for each), and :meth:`after_tick` (apply writes,
save a checkpoint), and finally :meth:`finish`. Stream chunks are pushed to a
sink as ``(namespace, mode, payload)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine import events as ev
from engine._internal import _faults
from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_REPLAY,
    CONFIG_KEY_RESUMING,
    ERROR,
    INPUT,
    INTERRUPT,
    NO_WRITES,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
    RESUME,
    RETURN,
    TASKS,
)
from engine._internal._scope import TaskScope
from engine._internal._typing import MISSING
from engine.checkpoint.base import (
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    empty_checkpoint,
)
from engine.constants import TAG_HIDDEN
from engine.errors import (
    EmptyInputError,
    GraphBubbleUp,
    GraphInterrupt,
)
from engine.pregel._algo import (
    PregelExecutableTask,
    PregelTaskWrites,
    should_interrupt,
    task_path_str,
)
from engine.runtime import ExecutionInfo, Runtime
from engine.types import Command, Send

if TYPE_CHECKING:
    pass
from engine.pregel._cache import NodeCache
from engine.pregel._checkpoint_build import CheckpointBuilder
from engine.pregel._loop_state import (
    SPECIAL_WRITES,
    StreamChunk,
    error_payload,
)
from engine.pregel._persist import background_pool
from engine.pregel._resume import ResumeBook, replay_bound, replays, replays_head
from engine.pregel._task_calls import submit_call

__all__ = ("PregelLoop", "StreamChunk")


class PregelLoop(ResumeBook, NodeCache, CheckpointBuilder):
    """One run of a graph: start, tick, after_tick, finish; the one saver caller."""

    def start(self, saved: CheckpointTuple | None, head_id: str | None = None) -> None:
        """Load the saved checkpoint (or an empty one) and take in the input."""
        graph = self.graph
        if saved is None:
            checkpoint = empty_checkpoint()
            metadata: CheckpointMetadata = {"step": -2}
            pending: list[PendingWrite] = []
            self.checkpoint_config = {
                **self.config,
                CONF: {
                    **self.configurable,
                    CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
                },
            }
            self.checkpoint_config[CONF].pop(CONFIG_KEY_CHECKPOINT_ID, None)
            self._head: str | None = None
        else:
            checkpoint = saved.checkpoint
            metadata = saved.metadata
            pending = list(saved.pending_writes or ())
            self.checkpoint_config = {
                **self.config,
                CONF: {**self.configurable, **saved.config.get(CONF, {})},
            }
            parent = saved.parent_config
            self.parent_checkpoint_id = (
                parent.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID) if parent else None
            )
            self._head = checkpoint["id"]
            self._last_saved_id = checkpoint["id"]
        migrated = graph.migrate_checkpoint(checkpoint)
        self.checkpoint = checkpoint
        self.checkpoint_metadata = metadata
        self.checkpoint_pending_writes = pending
        specs = graph.channels
        values = checkpoint["channel_values"]
        self.channels = {
            name: spec.from_checkpoint(values.get(name, MISSING))
            for name, spec in specs.items()
        }
        for name in graph.ephemeral_channels:
            if self.channels[name].is_available():
                self.live_ephemeral.add(name)
        if graph.previous_channel is not None:
            previous = self.channels[graph.previous_channel].peek()
            self.runtime = self.runtime.override(
                previous=None if previous is MISSING else previous
            )
        self._saved_values = dict(values)
        for name in self._delta_names:  # rebuilt on load, not stored
            self._saved_values.pop(name, None)
        self._saved_versions = checkpoint["channel_versions"]
        versions = checkpoint["channel_versions"]
        self._max_version = max(versions.values()) if versions else None
        if migrated:
            # migrated values get fresh versions, so the next save stores them
            version = self._next_version()
            for name in [k for k in versions if k not in graph.channels]:
                versions.pop(name)  # fields the migration removed or renamed
            for name in graph.channels:
                if name in values or name in versions:
                    if name not in values:
                        versions.pop(name, None)
                        continue
                    versions[name] = version
                    if self._bumped is not None:
                        self._bumped.add(name)
            self._saved_values = {}
        self.step = metadata.get("step", -2) + 1
        self.stop = self.step + self.recursion_limit + 1
        updated = checkpoint.get("updated_channels")
        self.updated_channels = set(updated) if updated is not None else None
        time_travel = (
            saved is not None
            and head_id is not None
            and not self.configurable.get(CONFIG_KEY_RESUMING)
            and (head_id != checkpoint["id"] or replays_head(saved, self))
        )
        if (
            saved is not None
            and not self.is_nested
            and replays(saved, time_travel, self)
        ):
            self.configurable[CONFIG_KEY_REPLAY] = replay_bound(saved)
        self._first(time_travel)
        if "events" in self.modes:
            self.sink(
                (
                    self.ns,
                    "events",
                    ev.RunStarted(
                        self.ns,
                        self.thread_id,
                        self.runtime.run_id,
                        self.graph.name,
                        bool(self.configurable.get(CONFIG_KEY_RESUMING)),
                        time.time(),
                    ),
                )
            )

    def _first(self, time_travel: bool) -> None:
        graph = self.graph
        input = self.input
        is_command = isinstance(input, Command)
        has_state = bool(self.checkpoint["channel_versions"])
        resuming = has_state and bool(
            self.configurable.get(CONFIG_KEY_RESUMING, input is None or is_command)
        )
        if time_travel and resuming:
            self._fork()
        if self.checkpointer is not None:
            self._collect_resumes()
        if is_command:
            assert isinstance(input, Command)
            if input.resume is not None:
                self._accept_resume(input.resume)
            null_writes = graph.map_command(input)
            if null_writes:
                self._save_writes(NULL_TASK_ID, "", null_writes)
                self.checkpoint_pending_writes.extend(
                    (NULL_TASK_ID, chan, value) for chan, value in null_writes
                )
            elif input.resume is None:
                raise EmptyInputError(
                    "Received an empty Command: give update, goto or resume"
                )
        if null := [
            (c, v)
            for t, c, v in self.checkpoint_pending_writes
            if t == NULL_TASK_ID and c not in SPECIAL_WRITES
        ]:
            updated = self._apply([PregelTaskWrites((), INPUT, null, ())])
            if self.updated_channels is not None:
                self.updated_channels |= updated
            else:
                self.updated_channels = None
        for task_id, chan, value in self.checkpoint_pending_writes:
            if (
                task_id == NULL_TASK_ID
                and chan == RESUME
                and self._null_resume is MISSING
            ):
                self._null_resume = value
        if resuming:
            # subgraphs run by the first step's tasks continue from their checkpoints
            self.resumed = True
            self.resuming_step = True
            self.configurable[CONFIG_KEY_RESUMING] = True
            seen = dict(self.checkpoint["versions_seen"].get(INTERRUPT, {}))
            seen.update(self.checkpoint["channel_versions"])
            self.checkpoint["versions_seen"][INTERRUPT] = seen
            self.output_written = True  # LangGraph streams the state on resume
            if "values" in self.modes:
                self._emit("values", self.output_values())
            self.status = "pending"
            return
        if is_command and not has_state:
            self._put_checkpoint("input", graph.input_metadata(input))
            self.status = "pending"
            return
        input_writes = graph.map_input(input) if input is not None else []
        if not input_writes:
            raise EmptyInputError(
                f"Received no input for {graph.input_channels!r}"
                if input is None
                else f"Received empty input {input!r}"
            )
        discarded = self._plan(self.checkpoint, self.step, for_execution=False)
        self.checkpoint_pending_writes = []
        self.updated_channels = self._apply(
            [*discarded.values(), PregelTaskWrites((), INPUT, input_writes, ())]
        )
        self._put_checkpoint("input", graph.input_metadata(input))
        self.status = "pending"

    def branch_off(self) -> None:
        """The first save starts a new branch instead of extending the thread's head
        (a subgraph replayed by its parent from an older checkpoint)."""
        self._fence = False

    def _fork(self) -> None:
        """Replay from a past checkpoint: branch off with a copy, drop its old writes."""
        self.checkpoint_pending_writes = [
            w
            for w in self.checkpoint_pending_writes
            if w[0] == NULL_TASK_ID and w[1] != RESUME
        ]
        self._fence = False
        self.step -= 1
        self._put_checkpoint("fork", None, advance=False)
        self.step += 1

    def tick(self) -> bool:
        """Plan the next step. False when the run is over (done or out of steps)."""
        if self.step > self.stop:
            self.status = "out_of_steps"
            return False
        planned, self._planned = self._planned, None
        if planned is not None and self._planned_for == (
            self.checkpoint["id"],
            self.step,
        ):
            self.tasks = planned
        else:
            self.tasks = self._plan(self.checkpoint, self.step)
        if not self._emitted_checkpoint and self.checkpointer is not None:
            self._emit_checkpoint()
        self._emitted_checkpoint = True
        self.step_interrupted = False
        if not self.tasks:
            self.status = "done"
            return False
        if self.checkpoint_pending_writes:
            self._reuse_pending_writes()
        if self.interrupt_before and should_interrupt(
            self.checkpoint, self.interrupt_before, self.tasks.values()
        ):
            self.status = "interrupt_before"
            self._mark_breakpoint()
            return False
        # a drain stops here, once the last step is saved; after the breakpoint
        # check, so that a resume past a breakpoint still stops at it
        if self.control is not None and self.control.drain_requested:
            self.status = "draining"
            return False
        if self.lease is not None:  # a clock read, unless the lease was lost
            self.lease.check()
        if self.cancel_flag is not None:
            self.cancel_flag.check()
        if "tasks" in self.modes or "debug" in self.modes:
            for task in self.tasks.values():
                if TAG_HIDDEN not in task.node.tags and not task.writes:
                    payload = {
                        "id": task.id,
                        "name": task.name,
                        "input": task.input,
                        "triggers": tuple(task.triggers),
                    }
                    self._emit("tasks", payload)
                    self._emit_debug("task", payload, self.step)
        return True

    def _reuse_pending_writes(self) -> None:
        """Tasks that finished before a crash or interrupt get their saved writes back."""
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, chan, value in self.checkpoint_pending_writes:
            if task_id == NULL_TASK_ID:
                continue
            by_task.setdefault(task_id, []).append((chan, value))
        for task_id, writes in by_task.items():
            task = self.tasks.get(task_id)
            if task is None:
                continue
            # errors and interrupts are not results: those tasks run again
            regular = [
                (c, v) for c, v in writes if c not in SPECIAL_WRITES or c == NO_WRITES
            ]
            if not regular:
                continue
            task.writes.extend(regular)
            self._emit_task_output(task, cached=True)

    def accepts(self, task: PregelExecutableTask) -> bool:
        """True when ``task`` still has to run (no saved writes were reused)."""
        return not task.writes

    def make_scope(self, task: PregelExecutableTask) -> TaskScope:
        """The scope a task attempt runs in (config built lazily)."""
        resume = self._resume_by_task.get(task.id)
        return TaskScope(
            task_id=task.id,
            name=task.name,
            path=task.path,
            checkpoint_ns=task.ns,
            config_factory=lambda: self.task_config(task),
            runtime=self.runtime,
            stream_writer=self.runtime.stream_writer,
            resume=list(resume) if resume else [],
            null_resume=self._take_null_resume,
            on_resume=lambda answers: self._save_resume(task, answers),
            serde_check=self._serde_check,
            stream_sink=(self.sink, self.modes) if self.modes else None,
            resume_map=self.resume_map
            or (
                self.parent_scope.resume_map if self.parent_scope is not None else None
            ),
            message_writer=self._message_writer(task)
            if "messages" in self.modes
            else None,
            call_submit=self._submit_call,
            task_writes=task.writes,
            runtime_factory=lambda scope: self._task_runtime(task, scope),
        )

    def _task_runtime(
        self, task: PregelExecutableTask, scope: TaskScope
    ) -> Runtime[Any]:
        """The Runtime a task attempt sees: the run's, with its ExecutionInfo."""
        runtime: Runtime[Any] = scope.base_runtime
        return runtime.override(
            stream_writer=scope.stream_writer,  # an idle timeout's, when it has one
            execution_info=ExecutionInfo(
                checkpoint_id=self.checkpoint["id"],
                checkpoint_ns=task.ns,
                task_id=task.id,
                thread_id=self.thread_id,
                run_id=runtime.run_id,
                node_attempt=scope.attempt,
                node_first_attempt_time=task.started or None,
            ),
        )

    def _submit_call(
        self,
        caller: TaskScope,
        name: str,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retry_policy: Sequence[Any] = (),
        cache_policy: Any = None,
        timeout: Any = None,
    ) -> Any:
        return submit_call(
            self,
            caller,
            name,
            func,
            args,
            kwargs,
            retry_policy=retry_policy,
            cache_policy=cache_policy,
            timeout=timeout,
        )

    def record_call(
        self, task: PregelExecutableTask, value: Any, *, cached: bool = False
    ) -> None:
        """Save a finished call's result at once (durable across resumes), stream it."""
        if self._call_results is not None:
            self._call_results[task.id] = value
        self._save_writes(task.id, task_path_str(task.path), [(RETURN, value)])
        if self.modes:
            if "updates" in self.modes:
                chunk: dict[str, Any] = {task.name: value}
                if cached:
                    chunk["__metadata__"] = {"cached": True}
                self.sink((self.ns, "updates", chunk))
            self._emit_call_result(task, {RETURN: value}, None)

    def call_failed(self, task: PregelExecutableTask, error: BaseException) -> None:
        """A call paused or failed. An ``interrupt()`` made in the call itself is saved
        under the call's id, so that its answer goes to the call (see
        :meth:`pending_interrupts`); its callers propagate it and save it too."""
        if isinstance(error, GraphInterrupt):
            own = [i for i in error.interrupts if i.id not in self._call_interrupt_ids]
            if own:
                self._call_interrupt_ids.update(i.id for i in own)
                self._save_writes(task.id, task_path_str(task.path), [(INTERRUPT, own)])
        elif not isinstance(error, GraphBubbleUp):
            self._emit_call_result(task, None, error)

    def _serde_check(self, value: Any) -> None:
        if self.checkpointer is not None:
            check = getattr(self.checkpointer.serde, "check", None)
            if check is not None:
                check(value)
            else:
                self.checkpointer.serde.dumps_typed(value)

    def task_config(self, task: PregelExecutableTask) -> dict[str, Any]:
        """The RunnableConfig a node sees (LangGraph's keys and metadata)."""
        config = self.config
        metadata = self._message_metadata(task)
        checkpoint_map = dict(self.configurable.get(CONFIG_KEY_CHECKPOINT_MAP, {}))
        checkpoint_map[self.checkpoint_ns] = self.checkpoint["id"]
        configurable = {
            k: v for k, v in self.configurable.items() if k != CONFIG_KEY_CHECKPOINT_ID
        }
        configurable.update(
            {
                CONFIG_KEY_CHECKPOINT_NS: task.ns,
                CONFIG_KEY_CHECKPOINT_MAP: checkpoint_map,
                "__engine_task_id": task.id,
            }
        )
        return {
            **config,
            "metadata": metadata,
            "configurable": configurable,
            "tags": [*config.get("tags", ()), *task.node.tags],
        }

    def task_done(
        self, task: PregelExecutableTask, error: BaseException | None, last: bool
    ) -> None:
        """Record a finished task: save its writes at once, stream its output.

        ``last`` says no sibling is still running: then the writes may ride along
        with the checkpoint that follows (one commit per step).
        """
        if _faults.ARMED and error is None:
            _faults.hit("after_task_before_writes", task.name)
        path = task_path_str(task.path)
        task.finished = time.time()
        if task.started:
            took = task.finished - task.started
            if self.resuming_step:  # a resumed task may do its real work now
                task.node.last_resumed_seconds = took
            else:
                task.node.last_seconds = took
        if "events" in self.modes and TAG_HIDDEN not in task.node.tags:
            self._task_event(task, error)
        if error is None:
            if not task.writes:
                task.writes.append((NO_WRITES, None))
            if TAG_HIDDEN in task.node.tags and not self._writes_delta(task):
                # the input step: re-running it from the saved input is free, so its
                # writes are not stored (the input is not serialized a third time);
                # a delta channel is rebuilt from stored writes, so then they are
                self._emit_task_output(task, cached=False)
                return
            if last and self.durability != "exit" and not self.interrupts:
                self._deferred = (task.id, path, list(task.writes))
            else:
                self._save_writes(
                    task.id, path, list(task.writes), siblings_running=not last
                )
            self._emit_task_output(task, cached=False)
            if "messages" in self.modes and TAG_HIDDEN not in task.node.tags:
                self._emit_messages(task)
            return
        if isinstance(error, GraphBubbleUp) and not isinstance(error, GraphInterrupt):
            # a Command for the parent graph: not a failure of this task
            task.writes.clear()
            self._flush_deferred()
            return
        if isinstance(error, GraphInterrupt):
            task.writes.clear()
            self.step_interrupted = True
            interrupts = list(error.interrupts)
            if interrupts:
                task.writes.append((INTERRUPT, interrupts))
                self._save_writes(
                    task.id, path, [(INTERRUPT, interrupts)], siblings_running=not last
                )
            self.interrupts.extend(interrupts)
            self._flush_deferred()
            if "tasks" in self.modes or "debug" in self.modes:
                # streamed after the pause's values, as LangGraph orders them
                self._paused_results.append((task, interrupts))
            return
        task.writes.clear()
        self._save_writes(
            task.id, path, [(ERROR, error_payload(error))], siblings_running=not last
        )
        self._flush_deferred()
        self._emit_task_result(task, error, [])

    def _writes_delta(self, task: PregelExecutableTask) -> bool:
        names = self._delta_names
        return bool(names) and any(chan in names for chan, _ in task.writes)

    def step_failed(self) -> None:
        """A task failed: make sure every finished sibling's writes are saved."""
        self._flush_deferred()
        self.emit_paused_results()

    @property
    def executor(self) -> Any:
        return background_pool()

    def _flush_deferred(self) -> None:
        if self._deferred is not None:
            task_id, path, writes = self._deferred
            self._deferred = None
            self._save_writes(task_id, path, writes)

    def _save_writes(
        self,
        task_id: str,
        path: str,
        writes: Sequence[tuple[str, Any]],
        *,
        siblings_running: bool = False,
    ) -> None:
        """``siblings_running``: other tasks of the step still run (see
        ``SyncPersistence.put_writes``)."""
        if self.checkpointer is None or self.persistence is None:
            return
        if self.durability == "exit":
            self._exit_writes.append((task_id, path, list(writes)))
            return
        self.persistence.put_writes(
            self.checkpoint_config,
            writes,
            task_id,
            path,
            siblings_running=siblings_running,
        )

    def after_step_interrupted(self) -> None:
        """Some task paused: keep the step open (writes stay pending), stop the run."""
        self._flush_deferred()
        self.status = "interrupted"
        if "events" in self.modes:
            self.sink(
                (self.ns, "events", ev.Interrupted(self.ns, tuple(self.interrupts)))
            )
        if "updates" in self.modes:
            self._emit("updates", {INTERRUPT: tuple(self.interrupts)})

    def after_tick(self) -> None:
        """All tasks finished: apply their writes, save the checkpoint, maybe stop."""
        self.resuming_step = False
        tasks = list(self.tasks.values())
        step_done = time.time() if "events" in self.modes else 0.0
        self.updated_channels = self._apply(tasks)
        if not self.output_written:
            keys = self.output_keys
            self.output_written = not self.updated_channels.isdisjoint(
                (keys,) if isinstance(keys, str) else keys
            )
        if "values" in self.modes and not self.updated_channels.isdisjoint(
            (self.stream_keys,)
            if isinstance(self.stream_keys, str)
            else self.stream_keys
        ):
            self._emit("values", self.output_values(self.stream_keys))
        self.checkpoint_pending_writes = []
        self._resume_by_task = {}
        self._exit_writes = []
        self._call_results = None
        self._cached_task_ids = set()
        step = self.step
        self._put_checkpoint("loop", self._step_writes(tasks))
        if "events" in self.modes:
            self._step_events(tasks, step, step_done)
        self.configurable.pop(CONFIG_KEY_RESUMING, None)
        if self.interrupt_after and should_interrupt(
            self.checkpoint, self.interrupt_after, tasks
        ):
            self.status = "interrupt_after"
            self._mark_breakpoint()
            if self.checkpointer is not None:
                self.tasks = self._plan(self.checkpoint, self.step, for_execution=False)
                self._emitted_checkpoint = False
                self._emit_checkpoint()
                self._emitted_checkpoint = True

    def _mark_breakpoint(self) -> None:
        # Resuming marks every channel as seen by the breakpoint (see _first), so the
        # marker needs no save of its own.
        seen = dict(self.checkpoint["versions_seen"].get(INTERRUPT, {}))
        seen.update(self.checkpoint["channel_versions"])
        self.checkpoint["versions_seen"][INTERRUPT] = seen
        if "updates" in self.modes:
            self._emit("updates", {INTERRUPT: ()})

    def _put_checkpoint(
        self, source: str, writes: Any, *, advance: bool = True
    ) -> None:
        """Start a new checkpoint for the current step and save it (per durability)."""
        if self.checkpointer is None:
            if advance:
                self.step += 1
            return
        metadata = self._stamp_checkpoint(source, writes)
        if self.durability != "exit":
            self._save(metadata)
        else:
            self._unsaved = True
        if advance:
            self.step += 1

    def _save(self, metadata: dict[str, Any]) -> None:
        """Hand a snapshot of the working checkpoint to the saver."""
        snapshot, new_versions, parent = self._step_snapshot(metadata)
        task_writes = [self._deferred] if self._deferred is not None else []
        self._deferred = None
        assert self.persistence is not None
        self.persistence.put_step(
            parent,
            task_writes,
            snapshot,
            metadata,  # type: ignore[arg-type]
            new_versions,
            on_saved=self._on_saved(snapshot["id"], metadata["step"]),
        )
        self._saved_versions = snapshot["channel_versions"]
        self._bumped = set()
        self._fence = True
        self._last_saved_id = snapshot["id"]
        self._unsaved = False
        self._emitted_checkpoint = False

    def finish(self) -> None:
        """Run is over: save what ``exit`` durability kept back; wait for saves."""
        if self.checkpointer is None or self.persistence is None:
            return
        if self.durability == "exit" and (self._unsaved or self._exit_writes):
            writes, self._exit_writes = self._exit_writes, []
            self._save(dict(self.checkpoint_metadata))
            for task_id, path, task_writes in writes:
                self.persistence.put_writes(
                    self.checkpoint_config, task_writes, task_id, path
                )
        self._flush_deferred()
        if self.lease is not None and not self.is_nested:
            # the run saves nothing more: its lease may go back with its last saves
            held = self.lease
            self.persistence.release_with_saves(
                (held.thread_id, held.checkpoint_ns, held.holder)
            )
        self.persistence.flush()

    def output(self) -> Any:
        """What ``invoke`` returns: output values, plus ``__interrupt__`` when paused.

        None when the run neither wrote an output channel nor resumed nor paused
        on an interrupt, as LangGraph (whose ``invoke`` returns the last ``values``
        chunk, and there is none then).
        """
        if not self.output_written and not self.interrupts:
            return None
        values = self.graph.map_output(self.output_values(with_pending=True))
        if self.interrupts and isinstance(values, dict):
            values = {**values, INTERRUPT: list(self.interrupts)}
        elif self.interrupts and values is None:
            values = {INTERRUPT: list(self.interrupts)}
        return values


def send_packets(writes: Sequence[tuple[str, Any]]) -> list[Send]:
    return [v for c, v in writes if c == TASKS]


__unused__ = (NS_END, NS_SEP, RETURN)

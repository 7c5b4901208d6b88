"""PregelLoop: one run of a graph, step by step. The only engine code that calls a saver.

The driver (``main.py``) loads the checkpoint, calls :meth:`PregelLoop.start`,
then alternates :meth:`tick` (plan the next step), running the tasks (the
runner calls :meth:`task_done` for each), and :meth:`after_tick` (apply writes,
save a checkpoint), and finally :meth:`finish`. Stream chunks are pushed to a
sink as ``(namespace, mode, payload)``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from engine import events as ev
from engine._internal._config import DEFAULT_RECURSION_LIMIT
from engine._internal._constants import (
    CACHE_NS_WRITES,
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_REPLAY,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_THREAD_ID,
    ERROR,
    INPUT,
    INTERRUPT,
    NO_WRITES,
    NS_END,
    NS_SEP,
    NULL_TASK_ID,
    PUSH,
    RESUME,
    RETURN,
    TASKS,
)
from engine._internal._ids import new_checkpoint_id
from engine._internal._scope import TaskScope
from engine._internal._typing import MISSING, RunnableConfig
from engine.channels.base import BaseChannel
from engine.checkpoint.base import (
    EXPECTED_HEAD,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    empty_checkpoint,
)
from engine.constants import TAG_HIDDEN
from engine.errors import (
    EmptyInputError,
    ErrorCode,
    GraphBubbleUp,
    GraphInterrupt,
    InvalidResumeError,
    UnknownInterruptError,
    error_message,
)
from engine.pregel._algo import (
    PregelExecutableTask,
    PregelTaskWrites,
    apply_writes,
    increment,
    next_names,
    prepare_next_tasks,
    should_interrupt,
    task_path_str,
)
from engine.pregel._delta import (
    COUNTERS_KEY,
    advance_counters,
    channels_to_snapshot,
    delta_channel_names,
    reset_counters,
)
from engine.pregel._io import keyed_update
from engine.pregel._persist import AsyncPersistence, SyncPersistence, TaskWrites
from engine.pregel._subgraph import ReplayBound
from engine.runtime import ExecutionInfo, Runtime
from engine.types import Command, Interrupt, Send

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = ("PregelLoop", "StreamChunk")

StreamChunk = tuple[tuple[str, ...], str, Any]
Status = Literal[
    "input",
    "pending",
    "done",
    "interrupted",
    "interrupt_before",
    "interrupt_after",
    "out_of_steps",
    "draining",
]
SPECIAL_WRITES = frozenset({ERROR, INTERRUPT, RESUME, NO_WRITES})


def _now() -> str:
    return datetime.now(UTC).isoformat()


def error_payload(exc: BaseException) -> dict[str, str]:
    """How a task failure is stored: JSON, readable by the studio."""
    return {"error": type(exc).__name__, "message": str(exc)}


class PregelLoop:
    """State of one run: channels, the current checkpoint, the current step's tasks."""

    def __init__(
        self,
        graph: Pregel,
        *,
        input: Any,
        config: RunnableConfig,
        checkpointer: BaseCheckpointSaver | None,
        persistence: SyncPersistence | AsyncPersistence | None,
        durability: str,
        modes: frozenset[str],
        sink: Callable[[StreamChunk], None],
        ns: tuple[str, ...],
        interrupt_before: Sequence[str] | str,
        interrupt_after: Sequence[str] | str,
        runtime: Runtime[Any],
        is_nested: bool,
        output_keys: str | Sequence[str],
        stream_keys: str | Sequence[str],
    ) -> None:
        self.graph = graph
        self.input = input
        self.config = config
        self.configurable: dict[str, Any] = config.get(CONF, {})
        self.checkpointer = checkpointer
        self.persistence = persistence
        self.durability = durability
        self.modes = modes
        self.sink = sink
        self.ns = ns
        self.checkpoint_ns: str = (
            self.configurable.get(CONFIG_KEY_CHECKPOINT_NS, "") or ""
        )
        self.thread_id: str | None = self.configurable.get(CONFIG_KEY_THREAD_ID)
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self.runtime = runtime
        self.control = runtime.control
        self.is_nested = is_nested
        self.output_keys = output_keys
        self.stream_keys = stream_keys
        self.recursion_limit: int = config.get(
            "recursion_limit", DEFAULT_RECURSION_LIMIT
        )

        self.status: Status = "input"
        self.tasks: dict[str, PregelExecutableTask] = {}
        self.interrupts: list[Interrupt] = []
        self.step = 0
        self.stop = 0
        self.channels: dict[str, BaseChannel[Any, Any, Any]] = {}
        self.checkpoint: Checkpoint = empty_checkpoint()
        self.checkpoint_metadata: CheckpointMetadata = {}
        self.checkpoint_config: RunnableConfig = config
        self.checkpoint_pending_writes: list[PendingWrite] = []
        self.prev_checkpoint_config: RunnableConfig | None = None
        self.updated_channels: set[str] | None = None
        self.live_ephemeral: set[str] = set()
        self._bumped: set[str] | None = set() if checkpointer is not None else None
        self._saved_values: dict[str, Any] = {}
        self._delta_names = delta_channel_names(graph.channels)
        self._saved_versions: dict[str, Any] = {}
        self._null_resume: Any = MISSING
        self._resume_by_task: dict[str, list[Any]] = {}
        self._deferred: TaskWrites | None = None
        self._fence = True
        self._emitted_checkpoint = False
        self._max_version: Any = None
        self._next_version_fn = (
            checkpointer.get_next_version if checkpointer is not None else increment
        )
        self._exit_writes: list[TaskWrites] = []
        self.parent_scope: TaskScope | None = None
        self._planned: dict[str, PregelExecutableTask] | None = None
        self._planned_for: tuple[str, int] | None = None
        self.resume_map: dict[str, Any] | None = None
        self.cache: Any = graph.cache
        self._call_results: dict[str, Any] | None = None
        self._call_interrupt_ids: set[str] = set()
        self._cached_task_ids: set[str] = set()
        self._streamed_messages: set[Any] = set()
        self.step_interrupted = False
        self._last_saved_id: str | None = None
        self._unsaved = False
        self.resumed = False  # continued from a saved checkpoint (set by start)
        self.lifecycle: Any = None  # graph callback manager, when handlers exist
        # an output channel was written (or the run resumed): else invoke gives None
        self.output_written = False
        self.update_keys: str | frozenset[str] | None = None  # stream(output_keys=)
        self._paused_results: list[tuple[PregelExecutableTask, list[Interrupt]]] = []
        self.lease: Any = None  # the run's thread lease (``_lease.ThreadHold``)

    # -- start -------------------------------------------------------------------

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
            self.prev_checkpoint_config = saved.parent_config
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
            and (head_id != checkpoint["id"] or _replays_head(saved, self))
        )
        if (
            saved is not None
            and not self.is_nested
            and _replays(saved, time_travel, self)
        ):
            self.configurable[CONFIG_KEY_REPLAY] = _replay_bound(saved)
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

    def _next_version(self) -> Any:
        version = self._next_version_fn(self._max_version)
        self._max_version = version
        return version

    def _apply(
        self, tasks: Sequence[PregelTaskWrites | PregelExecutableTask]
    ) -> set[str]:
        return apply_writes(
            self.checkpoint,
            self.channels,
            tasks,
            self._next_version,
            self.graph.trigger_to_nodes,
            live_ephemeral=self.live_ephemeral,
            finishers=self.graph.finisher_channels,
            bumped=self._bumped,
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

    def _collect_resumes(self) -> None:
        for task_id, chan, value in self.checkpoint_pending_writes:
            if chan == RESUME and task_id != NULL_TASK_ID:
                self._resume_by_task[task_id] = list(value)

    def pending_interrupts(self) -> dict[str, tuple[str, Interrupt]]:
        """Open interrupts of the loaded checkpoint: id -> (task_id, interrupt).

        An interrupt raised in a ``@task`` call is saved under the call and under
        the task that called it; it belongs to the call (the task is planned, the
        call is not), whose ``interrupt()`` takes the answer.
        """
        done = {
            task_id
            for task_id, chan, _ in self.checkpoint_pending_writes
            if chan not in SPECIAL_WRITES or chan == NO_WRITES
        }
        result: dict[str, tuple[str, Interrupt]] = {}
        shared: set[str] = set()
        for task_id, chan, value in self.checkpoint_pending_writes:
            if chan == INTERRUPT and task_id not in done:
                for item in value:
                    if item.id in result and result[item.id][0] != task_id:
                        shared.add(item.id)
                    result[item.id] = (task_id, item)
        if shared:
            planned = set(self._plan(self.checkpoint, self.step, for_execution=False))
            for task_id, chan, value in self.checkpoint_pending_writes:
                if chan == INTERRUPT and task_id not in done and task_id not in planned:
                    for item in value:
                        if item.id in shared:
                            result[item.id] = (task_id, item)
        return result

    def _accept_resume(self, resume: Any) -> None:
        if self.checkpointer is None:
            raise InvalidResumeError(
                error_message(
                    "Command(resume=...) needs a checkpointer: compile the graph with "
                    "checkpointer=... and pass a thread_id.",
                    ErrorCode.MISSING_CHECKPOINTER,
                )
            )
        pending = self.pending_interrupts()
        is_map = (
            isinstance(resume, dict)
            and bool(resume)
            and all(isinstance(k, str) and _looks_like_interrupt_id(k) for k in resume)
        )
        if isinstance(resume, dict) and not resume and pending:
            raise UnknownInterruptError(
                "The resume map names no interrupt",
                reason="empty_map",
                pending_ids=sorted(pending),
            )
        if is_map:
            unknown = sorted(set(resume) - set(pending))
            if unknown:
                raise UnknownInterruptError(
                    error_message(
                        f"Cannot resume interrupt {unknown[0]!r}: it is not pending on this "
                        f"thread (pending: {sorted(pending) or 'none'}).",
                        ErrorCode.INVALID_RESUME,
                    ),
                    reason="not_pending",
                    interrupt_ids=unknown,
                    pending_ids=sorted(pending),
                )
            self.resume_map = dict(resume)
            for interrupt_id, value in resume.items():
                task_id, _ = pending[interrupt_id]
                answers = self._resume_by_task.setdefault(task_id, [])
                answers.append(value)
                self._save_writes(task_id, "", [(RESUME, list(answers))])
            return
        if len(pending) > 1:
            raise UnknownInterruptError(
                error_message(
                    f"{len(pending)} interrupts are pending; resume them by id with "
                    "Command(resume={interrupt_id: value, ...}).",
                    ErrorCode.INVALID_RESUME,
                ),
                reason="ambiguous",
                pending_ids=sorted(pending),
            )
        if len(pending) == 1:
            ((task_id, _),) = pending.values()
            answers = self._resume_by_task.setdefault(task_id, [])
            answers.append(resume)
            self._save_writes(task_id, "", [(RESUME, list(answers))])
            return
        upcoming = prepare_next_tasks(
            self.checkpoint,
            self.graph.nodes,
            self.channels,
            self.step,
            checkpoint_ns=self.checkpoint_ns,
            for_execution=False,
        )
        if not upcoming and not self.configurable.get(CONFIG_KEY_RESUMING):
            raise InvalidResumeError(
                error_message(
                    f"Thread {self.thread_id!r} is not interrupted: there is nothing to resume.",
                    ErrorCode.INVALID_RESUME,
                )
            )
        # Paused at a static breakpoint (or stopped mid-run): the first interrupt()
        # that runs takes this value.
        self._null_resume = resume
        self._save_writes(NULL_TASK_ID, "", [(RESUME, resume)])

    # -- steps -------------------------------------------------------------------

    def _plan(
        self, checkpoint: Checkpoint, step: int, *, for_execution: bool = True
    ) -> dict[str, PregelExecutableTask]:
        """The tasks of ``step`` after ``checkpoint``, planned from the channels the
        last step updated (``for_execution=False``: to show, not to run)."""
        return prepare_next_tasks(
            checkpoint,
            self.graph.nodes,
            self.channels,
            step,
            checkpoint_ns=self.checkpoint_ns,
            updated_channels=self.updated_channels,
            trigger_to_nodes=self.graph.trigger_to_nodes,
            for_execution=for_execution,
            stop=self.stop,
        )

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
            )
        )

    # -- @task calls and caching -------------------------------------------------

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
        from engine.pregel._calls import submit_call  # noqa: PLC0415 - avoids a cycle

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

    def call_result(self, call_id: str) -> Any:
        """A call's saved result from before a resume or crash, or MISSING."""
        results = self._call_results
        if results is None:
            results = self._call_results = {
                task_id: value
                for task_id, chan, value in self.checkpoint_pending_writes
                if chan == RETURN
            }
        return results.get(call_id, MISSING)

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

    def call_cache_key(self, task: PregelExecutableTask, policy: Any) -> Any:
        if self.cache is None:
            return None
        policy = policy or self.graph.cache_policy  # the graph's default, if any
        if policy is None:
            return None
        return self._cache_key(task, policy)

    def _cache_key(
        self, task: PregelExecutableTask, policy: Any
    ) -> tuple[tuple[str, ...], str]:
        value = task.input
        if hasattr(value, "args") and hasattr(value, "kwargs"):
            raw = policy.key_func(*value.args, **value.kwargs)
        else:
            raw = policy.key_func(value)
        if isinstance(raw, bytes):
            raw = hashlib.blake2b(raw, digest_size=16).hexdigest()
        return ((CACHE_NS_WRITES, self.graph.name, task.name), str(raw))

    def cache_lookup(self, key: tuple[tuple[str, ...], str]) -> Any:
        assert self.cache is not None
        found = self.cache.get([key])
        return found.get(key, MISSING)

    def cache_store(
        self, key: tuple[tuple[str, ...], str], value: Any, policy: Any
    ) -> None:
        assert self.cache is not None
        policy = policy or self.graph.cache_policy
        self.cache.set({key: (value, policy.ttl)})

    def cache_probe(self) -> list[tuple[tuple[str, ...], str]]:
        """Cache keys of this step's tasks that have a CachePolicy (none without a cache)."""
        if self.cache is None:
            return []
        keys = []
        for task in self.tasks.values():
            policy = task.node.cache_policy or self.graph.cache_policy
            if policy is not None and not task.writes:
                task.cache_key = self._cache_key(task, policy)
                keys.append(task.cache_key)
        return keys

    def apply_cache_hits(self, hits: Mapping[Any, Any]) -> None:
        """Tasks whose writes are cached take them instead of running."""
        for task in self.tasks.values():
            if task.cache_key is None or task.writes or task.cache_key not in hits:
                continue
            task.writes.extend((chan, value) for chan, value in hits[task.cache_key])
            self._cached_task_ids.add(task.id)
            task.started = task.finished = time.time()
            self._save_writes(task.id, task_path_str(task.path), list(task.writes))
            if "events" in self.modes and TAG_HIDDEN not in task.node.tags:
                self._task_event(task, None, cached=True)
            self._emit_task_output(task, cached=True)

    def cache_updates(self) -> dict[Any, tuple[Any, int | None]]:
        """Writes of tasks that ran this step, to store under their cache keys."""
        updates: dict[Any, tuple[Any, int | None]] = {}
        for task in self.tasks.values():
            key = task.cache_key
            if (
                key is None
                or not task.writes
                or task.writes[0][0] in (ERROR, INTERRUPT)
            ):
                continue
            if task.id in self._cached_task_ids:
                continue
            writes = [(c, v) for c, v in task.writes if c != NO_WRITES]
            policy = task.node.cache_policy or self.graph.cache_policy
            updates[key] = (writes, policy.ttl)
        return updates

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

    def _message_writer(self, task: PregelExecutableTask) -> Callable[[Any], None]:
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

        def write(chunk: Any) -> None:
            message_id = _message_id(chunk)
            if message_id is not None:
                streamed.add(message_id)
            sink((ns, "messages", (chunk, metadata)))

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

    def _serde_check(self, value: Any) -> None:
        if self.checkpointer is not None:
            check = getattr(self.checkpointer.serde, "check", None)
            if check is not None:
                check(value)
            else:
                self.checkpointer.serde.dumps_typed(value)

    def _take_null_resume(self) -> Any:
        """The run-wide resume value; in a subgraph, the parent task's next answer."""
        value = self._null_resume
        if value is not MISSING:
            self._null_resume = MISSING
            return value
        parent = self.parent_scope
        if parent is not None:
            index = parent.interrupt_counter
            if index < len(parent.resume):
                parent.interrupt_counter += 1
                return parent.resume[index]
            return parent.take_null_resume()
        return MISSING

    def _save_resume(self, task: PregelExecutableTask, answers: list[Any]) -> None:
        self._resume_by_task[task.id] = list(answers)
        self._save_writes(task.id, task_path_str(task.path), [(RESUME, list(answers))])

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

    def task_done(
        self, task: PregelExecutableTask, error: BaseException | None, last: bool
    ) -> None:
        """Record a finished task: save its writes at once, stream its output.

        ``last`` says no sibling is still running: then the writes may ride along
        with the checkpoint that follows (one commit per step).
        """
        path = task_path_str(task.path)
        task.finished = time.time()
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
                self._save_writes(task.id, path, list(task.writes))
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
                self._save_writes(task.id, path, [(INTERRUPT, interrupts)])
            self.interrupts.extend(interrupts)
            self._flush_deferred()
            if "tasks" in self.modes or "debug" in self.modes:
                # streamed after the pause's values, as LangGraph orders them
                self._paused_results.append((task, interrupts))
            return
        task.writes.clear()
        self._save_writes(task.id, path, [(ERROR, error_payload(error))])
        self._flush_deferred()
        self._emit_task_result(task, error, [])

    def _writes_delta(self, task: PregelExecutableTask) -> bool:
        names = self._delta_names
        return bool(names) and any(chan in names for chan, _ in task.writes)

    def step_failed(self) -> None:
        """A task failed: make sure every finished sibling's writes are saved."""
        self._flush_deferred()
        self.emit_paused_results()

    def emit_paused_results(self) -> None:
        """Stream the ``tasks``/``debug`` results of the tasks that paused on an
        interrupt (the driver calls it after the pause's final ``values``)."""
        results, self._paused_results = self._paused_results, []
        for task, interrupts in results:
            self._emit_task_result(task, None, interrupts)

    @property
    def executor(self) -> Any:
        from engine.pregel._persist import background_pool  # noqa: PLC0415

        return background_pool()

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

    def _flush_deferred(self) -> None:
        if self._deferred is not None:
            task_id, path, writes = self._deferred
            self._deferred = None
            self._save_writes(task_id, path, writes)

    def _save_writes(
        self, task_id: str, path: str, writes: Sequence[tuple[str, Any]]
    ) -> None:
        if self.checkpointer is None or self.persistence is None:
            return
        if self.durability == "exit":
            self._exit_writes.append((task_id, path, list(writes)))
            return
        self.persistence.put_writes(self.checkpoint_config, writes, task_id, path)

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
        tasks = list(self.tasks.values())
        step_done = time.time()
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

    def _mark_breakpoint(self) -> None:
        # Resuming marks every channel as seen by the breakpoint (see _first), so the
        # marker needs no save of its own.
        seen = dict(self.checkpoint["versions_seen"].get(INTERRUPT, {}))
        seen.update(self.checkpoint["channel_versions"])
        self.checkpoint["versions_seen"][INTERRUPT] = seen
        if "updates" in self.modes:
            self._emit("updates", {INTERRUPT: ()})

    def _step_writes(
        self, tasks: Sequence[PregelExecutableTask]
    ) -> dict[str, list[str]] | None:
        """What the step wrote, by node: the state keys (values live in pending writes).

        Recording keys, not values, keeps metadata small and stores each value once.
        """
        if self.checkpointer is None:
            return None
        state_keys = self.graph.output_channel_set | set(
            (self.stream_keys,)
            if isinstance(self.stream_keys, str)
            else self.stream_keys
        )
        writes: dict[str, list[str]] = {}
        for task in tasks:
            if TAG_HIDDEN in task.node.tags:
                continue
            keys = writes.setdefault(task.name, [])
            for chan, _ in task.writes:
                if chan in state_keys and chan not in keys:
                    keys.append(chan)
        return writes

    # -- checkpoints ---------------------------------------------------------------

    def _put_checkpoint(
        self, source: str, writes: Any, *, advance: bool = True
    ) -> None:
        """Start a new checkpoint for the current step and save it (per durability)."""
        if self.checkpointer is None:
            if advance:
                self.step += 1
            return
        checkpoint = self.checkpoint
        checkpoint["id"] = new_checkpoint_id(self.step)
        checkpoint["ts"] = _now()
        checkpoint["updated_channels"] = (
            sorted(self.updated_channels) if self.updated_channels is not None else None
        )
        metadata: dict[str, Any] = {
            **{
                k: v
                for k, v in self.config.get("metadata", {}).items()
                if _plain(v) and not k.startswith(("langgraph_", "__"))
            },
            "source": source,
            "step": self.step,
            "parents": {
                ns: cid
                for ns, cid in self.configurable.get(
                    CONFIG_KEY_CHECKPOINT_MAP, {}
                ).items()
                if ns != self.checkpoint_ns
            },
        }
        if writes is not None:
            metadata["writes"] = writes
        # Plan the next step now (the tick reuses it) so the checkpoint can say
        # which nodes run next: history reads that without re-planning.
        self._planned = self._plan(checkpoint, self.step + 1)
        self._planned_for = (checkpoint["id"], self.step + 1)
        metadata["next"] = next_names(self._planned, self.graph.node_index)
        if self._delta_names:
            metadata[COUNTERS_KEY] = advance_counters(
                self.checkpoint_metadata.get(COUNTERS_KEY),
                self._delta_names,
                self.updated_channels,
            )
        self.checkpoint_metadata = metadata  # type: ignore[assignment]
        self.prev_checkpoint_config = (
            self._config_for(self._last_saved_id)
            if self._last_saved_id is not None
            else None
        )
        self.checkpoint_config = {
            **self.checkpoint_config,
            CONF: {
                **self.checkpoint_config.get(CONF, {}),
                CONFIG_KEY_THREAD_ID: self.thread_id,
                CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
                CONFIG_KEY_CHECKPOINT_ID: checkpoint["id"],
            },
        }
        if self.durability != "exit":
            self._save(metadata)
        else:
            self._unsaved = True
        if advance:
            self.step += 1

    def _config_for(self, checkpoint_id: str) -> RunnableConfig:
        return {
            CONF: {
                CONFIG_KEY_THREAD_ID: self.thread_id,
                CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
                CONFIG_KEY_CHECKPOINT_ID: checkpoint_id,
            }
        }

    def _save(self, metadata: dict[str, Any]) -> None:
        """Hand a snapshot of the working checkpoint to the saver."""
        snapshot = self._snapshot()
        parent_id = self._last_saved_id
        new_versions = {
            c: snapshot["channel_versions"][c]
            for c in (self._bumped or ())
            if c in snapshot["channel_versions"]
        }
        if deltas := self._deltas(new_versions):
            snapshot["channel_deltas"] = deltas
        if self._delta_names:
            self._store_delta_snapshots(snapshot, metadata, new_versions)
        conf: dict[str, Any] = {
            CONFIG_KEY_THREAD_ID: self.thread_id,
            CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
        }
        if parent_id is not None:
            conf[CONFIG_KEY_CHECKPOINT_ID] = parent_id
        if self._fence:
            conf[EXPECTED_HEAD] = parent_id
        task_writes = [self._deferred] if self._deferred is not None else []
        self._deferred = None
        assert self.persistence is not None
        self.persistence.put_step(
            {CONF: conf},
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

    def _store_delta_snapshots(
        self, snapshot: Checkpoint, metadata: dict[str, Any], changed: Mapping[str, Any]
    ) -> None:
        """Put the delta channels due a snapshot in ``snapshot`` (see ``_delta``)."""
        counters = metadata.get(COUNTERS_KEY) or {}
        replayable = (
            metadata.get("source") == "loop"
            and self.durability != "exit"
            and self._fence
        )
        chosen = channels_to_snapshot(
            self.channels, self._delta_names, counters, changed, replayable=replayable
        )
        if chosen:
            values = dict(snapshot["channel_values"])
            for name in chosen:
                values[name] = self.channels[name].get()
            snapshot["channel_values"] = values
        reset_counters(metadata, counters, chosen)

    def _deltas(self, new_versions: Mapping[str, Any]) -> dict[str, tuple[Any, int]]:
        deltas: dict[str, tuple[Any, int]] = {}
        saved = self._saved_versions
        for chan in new_versions:
            base = getattr(self.channels[chan], "append_base", None)
            if base is not None and chan in saved:
                deltas[chan] = (saved[chan], base)
        return deltas

    def _snapshot(self) -> Checkpoint:
        """A copy of the working checkpoint the saver may keep (values shared, dicts fresh)."""
        working = self.checkpoint
        values = dict(self._saved_values)
        channels = self.channels
        for chan in self._bumped if self._bumped is not None else channels.keys():
            value = channels[chan].checkpoint()
            if value is MISSING:
                values.pop(chan, None)
            else:
                values[chan] = value
        self._saved_values = values
        snapshot = Checkpoint(
            v=working.get("v", 4),
            id=working["id"],
            ts=working["ts"],
            channel_values=values,
            channel_versions=dict(working["channel_versions"]),
            versions_seen={k: dict(v) for k, v in working["versions_seen"].items()},
            updated_channels=working.get("updated_channels"),
        )
        if self.graph.schema_version is not None:
            snapshot["schema_version"] = self.graph.schema_version
        return snapshot

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
        self.persistence.flush()

    # -- output ------------------------------------------------------------------

    def output_values(
        self, keys: str | Sequence[str] | None = None, *, with_pending: bool = False
    ) -> Any:
        """Output channels' values; ``with_pending`` also counts the writes of tasks
        that finished in a step that then paused (what ``get_state`` shows)."""
        keys = self.output_keys if keys is None else keys
        channels: Mapping[str, BaseChannel[Any, Any, Any]] = self.channels
        if with_pending and self.status == "interrupted":
            channels = self._with_pending_writes()
        if isinstance(keys, str):
            value = channels[keys].peek()
            return None if value is MISSING else value
        values: dict[str, Any] = {}
        for key in keys:
            value = channels[key].peek()
            if value is not MISSING:
                values[key] = value
        return values

    def _with_pending_writes(self) -> dict[str, BaseChannel[Any, Any, Any]]:
        finished = sorted(
            (
                t
                for t in self.tasks.values()
                if t.writes and t.writes[0][0] not in (ERROR, INTERRUPT)
            ),
            key=lambda t: task_path_str(t.path),
        )
        channels = dict(self.channels)
        written: dict[str, list[Any]] = {}
        for task in finished:
            for chan, value in task.writes:
                if chan in channels and chan not in SPECIAL_WRITES:
                    written.setdefault(chan, []).append(value)
        for chan, values in written.items():
            copy = channels[chan].copy()
            copy.update(values)
            channels[chan] = copy
        return channels

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

    # -- streaming -----------------------------------------------------------------

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
                        "timestamp": _now(),
                        "type": kind,
                        "payload": payload,
                    },
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
        prev = self.prev_checkpoint_config
        if not prev or CONFIG_KEY_CHECKPOINT_ID not in prev.get(CONF, {}):
            return None
        return {
            CONF: {
                CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
                CONFIG_KEY_THREAD_ID: self.thread_id,
                CONFIG_KEY_CHECKPOINT_ID: prev[CONF][CONFIG_KEY_CHECKPOINT_ID],
            }
        }


def _answers_or_unaddressed(loop: PregelLoop) -> bool:
    if not loop.configurable.get(CONFIG_KEY_CHECKPOINT_ID):
        return True
    command = loop.input
    return isinstance(command, Command) and command.resume is not None


def _replays_head(saved: CheckpointTuple, loop: PregelLoop) -> bool:
    """A run addressed at the thread's newest checkpoint replays it (reruns its
    tasks on a new branch, interrupts asking again) unless it answers an
    interrupt, as in LangGraph; a fork or an update is already a branch."""
    if _answers_or_unaddressed(loop):
        return False
    return saved.metadata.get("source") not in ("update", "fork")


def _replays(saved: CheckpointTuple, time_travel: bool, loop: PregelLoop) -> bool:
    """Whether subgraphs replay: the run addresses a past checkpoint, or a fork or
    update, and does not answer an interrupt (as in LangGraph)."""
    if _answers_or_unaddressed(loop):
        return False
    return time_travel or saved.metadata.get("source") in ("update", "fork")


def _replay_bound(saved: CheckpointTuple) -> ReplayBound:
    """Subgraphs replay from before the addressed checkpoint; from before its
    parent when it is a fork or an update (made after the original run's
    subgraph checkpoints)."""
    bound = saved.checkpoint["id"]
    parent = (saved.parent_config or {}).get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    if saved.metadata.get("source") in ("update", "fork") and parent:
        bound = parent
    return ReplayBound(bound)


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


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _looks_like_interrupt_id(key: str) -> bool:
    return len(key) == 32 and all(c in "0123456789abcdef" for c in key)


def send_packets(writes: Sequence[tuple[str, Any]]) -> list[Send]:
    return [v for c, v in writes if c == TASKS]


__unused__ = (NS_END, NS_SEP, RETURN)

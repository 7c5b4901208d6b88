"""What one run holds, shared by the loop's jobs: channels, the working checkpoint,
the step's tasks, and the few reads every job needs (planning, applying writes,
output values).

:class:`~engine.pregel._loop.PregelLoop` is assembled from job classes over this
state: resume bookkeeping (``_resume``), the node cache (``_cache``), stream
emission (``_emit``) and checkpoint building (``_checkpoint_build``). None of them
calls a saver: they ask the loop through :meth:`LoopState._save_writes`, which only
the loop implements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from engine._internal._config import DEFAULT_RECURSION_LIMIT
from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    ERROR,
    INTERRUPT,
    NO_WRITES,
    RESUME,
)
from engine._internal._scope import TaskScope
from engine._internal._typing import MISSING, RunnableConfig
from engine.channels.base import BaseChannel
from engine.checkpoint.base import (
    CHECKPOINT_FORMAT,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
)
from engine.pregel._algo import (
    PregelExecutableTask,
    PregelTaskWrites,
    apply_writes,
    increment,
    prepare_next_tasks,
    task_path_str,
)
from engine.pregel._delta import (
    delta_channel_names,
)
from engine.pregel._persist import AsyncPersistence, SyncPersistence, TaskWrites
from engine.runtime import Runtime
from engine.types import Interrupt

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = (
    "SPECIAL_WRITES",
    "LoopState",
    "Status",
    "StreamChunk",
    "error_payload",
)

StreamChunk = tuple[tuple[str, ...], str, Any]
"""What a loop pushes to its sink: ``(namespace, mode, payload)``."""
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


def error_payload(exc: BaseException) -> dict[str, str]:
    """How a task failure is stored: JSON, readable by the studio."""
    return {"error": type(exc).__name__, "message": str(exc)}


def _unstarted_checkpoint() -> Checkpoint:
    """What a loop holds until ``start`` loads its checkpoint (or makes an empty
    one): empty, with no id or time (reading the clock and making an id for a
    checkpoint every run replaces at once cost ~3% of a resumed run's time)."""
    return Checkpoint(
        v=CHECKPOINT_FORMAT,
        id="",
        ts="",
        channel_values={},
        channel_versions={},
        versions_seen={},
        updated_channels=None,
    )


class LoopState:
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
        self.checkpoint: Checkpoint = _unstarted_checkpoint()
        self.checkpoint_metadata: CheckpointMetadata = {}
        self._checkpoint_config: RunnableConfig = config
        self._stamped_id: str | None = None  # see checkpoint_config
        self.checkpoint_pending_writes: list[PendingWrite] = []
        self.parent_checkpoint_id: str | None = None
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
        self._state_keys: tuple[Any, frozenset[str] | set[str]] | None = None
        """(stream_keys, the keys whose writes a checkpoint's metadata lists)."""
        self._appending: frozenset[str] | None = None
        """The channels that may record an append (``_deltas``), once known."""
        self._metadata_base: tuple[dict[str, Any], dict[str, str], bool] | None = None
        """The run's metadata entries every checkpoint repeats (``_run_metadata``)."""
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
        self.resuming_step = False  # the first step of a resumed run is running
        self.lifecycle: Any = None  # graph callback manager, when handlers exist
        # an output channel was written (or the run resumed): else invoke gives None
        self.output_written = False
        self.update_keys: str | frozenset[str] | None = None  # stream(output_keys=)
        self._paused_results: list[tuple[PregelExecutableTask, list[Interrupt]]] = []
        self.lease: Any = None  # the run's thread lease (``_lease.ThreadHold``)
        # set when an ``ainvoke`` run on one thread was cancelled (``_one_thread``)
        self.cancel_flag: Any = None
        # (checkpoint tuple,) read with the lease when it was taken; load uses it
        self.preloaded: tuple[CheckpointTuple | None] | None = None

    @property
    def checkpoint_config(self) -> RunnableConfig:
        """The config that addresses the current checkpoint: the run's config with
        the thread, namespace and checkpoint id. A new checkpoint only notes its
        id (most steps never ask: their writes go with the step's save); the
        config is made when it is first asked for."""
        stamped = self._stamped_id
        if stamped is not None:
            config = self._checkpoint_config
            self._checkpoint_config = {
                **config,
                CONF: {
                    **config.get(CONF, {}),
                    CONFIG_KEY_THREAD_ID: self.thread_id,
                    CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
                    CONFIG_KEY_CHECKPOINT_ID: stamped,
                },
            }
            self._stamped_id = None
        return self._checkpoint_config

    @checkpoint_config.setter
    def checkpoint_config(self, config: RunnableConfig) -> None:
        self._checkpoint_config = config
        self._stamped_id = None

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

    def _save_writes(
        self,
        task_id: str,
        path: str,
        writes: Sequence[tuple[str, Any]],
        *,
        siblings_running: bool = False,
    ) -> None:
        """Save a task's writes on the current checkpoint (the loop does: it is the
        one saver caller)."""
        raise NotImplementedError

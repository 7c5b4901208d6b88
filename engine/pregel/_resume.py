"""Resume bookkeeping: which interrupts are open, which answers go to which task,
saved ``@task`` call results, and whether a run replays a past checkpoint."""

from __future__ import annotations

from typing import Any

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_RESUMING,
    INTERRUPT,
    NO_WRITES,
    NULL_TASK_ID,
    RESUME,
    RETURN,
)
from engine._internal._typing import MISSING
from engine.checkpoint.base import (
    CheckpointTuple,
)
from engine.errors import (
    ErrorCode,
    InvalidResumeError,
    UnknownInterruptError,
    error_message,
)
from engine.pregel._algo import (
    PregelExecutableTask,
    prepare_next_tasks,
    task_path_str,
)
from engine.pregel._loop_state import SPECIAL_WRITES, LoopState
from engine.pregel._subgraph import ReplayBound
from engine.types import Command, Interrupt

__all__ = ("ResumeBook", "replay_bound", "replays", "replays_head")


class ResumeBook(LoopState):
    """Answers to interrupts (``Command(resume=...)``) and saved results of calls."""

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


def _answers_or_unaddressed(loop: LoopState) -> bool:
    if not loop.configurable.get(CONFIG_KEY_CHECKPOINT_ID):
        return True
    command = loop.input
    return isinstance(command, Command) and command.resume is not None


def replays_head(saved: CheckpointTuple, loop: LoopState) -> bool:
    """A run addressed at the thread's newest checkpoint replays it (reruns its
    tasks on a new branch, interrupts asking again) unless it answers an
    interrupt, as in LangGraph; a fork or an update is already a branch."""
    if _answers_or_unaddressed(loop):
        return False
    return saved.metadata.get("source") not in ("update", "fork")


def replays(saved: CheckpointTuple, time_travel: bool, loop: LoopState) -> bool:
    """Whether subgraphs replay: the run addresses a past checkpoint, or a fork or
    update, and does not answer an interrupt (as in LangGraph)."""
    if _answers_or_unaddressed(loop):
        return False
    return time_travel or saved.metadata.get("source") in ("update", "fork")


def replay_bound(saved: CheckpointTuple) -> ReplayBound:
    """Subgraphs replay from before the addressed checkpoint; from before its
    parent when it is a fork or an update (made after the original run's
    subgraph checkpoints)."""
    bound = saved.checkpoint["id"]
    parent = (saved.parent_config or {}).get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    if saved.metadata.get("source") in ("update", "fork") and parent:
        bound = parent
    return ReplayBound(bound)


def _looks_like_interrupt_id(key: str) -> bool:
    return len(key) == 32 and all(c in "0123456789abcdef" for c in key)

"""Stop an agent after a number of model calls, per thread and per run.

The counts live in the agent's state: ``thread_model_call_count`` is saved with
the thread (it spans invocations), ``run_model_call_count`` lives only for the
current invocation (an untracked channel: never checkpointed, so a new run, a
resume included, starts again from zero). Both are private: not input, not
output.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from engine.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    PrivateStateAttr,
    hook_config,
)
from engine.channels.untracked_value import UntrackedValue
from engine.prebuilt._chat import ai_message

__all__ = (
    "ModelCallLimitExceededError",
    "ModelCallLimitMiddleware",
    "ModelCallLimitState",
)


class ModelCallLimitState(AgentState[Any]):
    """The counts this middleware keeps."""

    thread_model_call_count: NotRequired[Annotated[int, PrivateStateAttr]]
    run_model_call_count: NotRequired[Annotated[int, UntrackedValue, PrivateStateAttr]]


def _limit_message(
    thread_count: int, run_count: int, thread_limit: int | None, run_limit: int | None
) -> str:
    reached = []
    if thread_limit is not None and thread_count >= thread_limit:
        reached.append(f"thread limit ({thread_count}/{thread_limit})")
    if run_limit is not None and run_count >= run_limit:
        reached.append(f"run limit ({run_count}/{run_limit})")
    return "Model call limits exceeded: " + ", ".join(reached)


class ModelCallLimitExceededError(Exception):
    """Raised, with ``exit_behavior="error"``, when a limit is reached."""

    def __init__(
        self,
        thread_count: int,
        run_count: int,
        thread_limit: int | None,
        run_limit: int | None,
    ) -> None:
        self.thread_count = thread_count
        self.run_count = run_count
        self.thread_limit = thread_limit
        self.run_limit = run_limit
        super().__init__(
            _limit_message(thread_count, run_count, thread_limit, run_limit)
        )


class ModelCallLimitMiddleware(AgentMiddleware[ModelCallLimitState, Any]):
    """Allow at most ``thread_limit`` model calls per thread and ``run_limit`` per run.

    Args:
        thread_limit: calls allowed over the thread's life (``None``: no limit).
        run_limit: calls allowed in one invocation (``None``: no limit).
        exit_behavior: ``"end"`` (default) ends the run with an AI message saying
            which limit was reached; ``"error"`` raises
            :class:`ModelCallLimitExceededError`.

    Raises:
        ValueError: neither limit given, or an unknown exit behavior.
    """

    state_schema = ModelCallLimitState

    def __init__(
        self,
        *,
        thread_limit: int | None = None,
        run_limit: int | None = None,
        exit_behavior: Literal["end", "error"] = "end",
    ) -> None:
        if thread_limit is None and run_limit is None:
            raise ValueError("At least one limit must be specified.")
        if exit_behavior not in ("end", "error"):
            raise ValueError(
                f"Invalid exit_behavior: {exit_behavior!r}. Must be 'end' or 'error'."
            )
        self.thread_limit = thread_limit
        self.run_limit = run_limit
        self.exit_behavior = exit_behavior

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        thread_count = state.get("thread_model_call_count", 0)
        run_count = state.get("run_model_call_count", 0)
        over = (
            self.thread_limit is not None and thread_count >= self.thread_limit
        ) or (self.run_limit is not None and run_count >= self.run_limit)
        if not over:
            return None
        if self.exit_behavior == "error":
            raise ModelCallLimitExceededError(
                thread_count, run_count, self.thread_limit, self.run_limit
            )
        text = _limit_message(
            thread_count, run_count, self.thread_limit, self.run_limit
        )
        return {"jump_to": "end", "messages": [ai_message(text)]}

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {
            "thread_model_call_count": state.get("thread_model_call_count", 0) + 1,
            "run_model_call_count": state.get("run_model_call_count", 0) + 1,
        }

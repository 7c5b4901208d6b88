"""Limit how many times the agent calls tools (one tool or all), per thread and per run.

Counted after each model call, over the tool calls it asks for. Calls within the
limits run; a call past a limit never runs: with ``exit_behavior="continue"``
(default) an error tool message answers it ("Tool call limit exceeded..."), so the
model can answer without it; ``"end"`` answers every unanswered call of that
model message the same way and ends the run with an AI message saying which
limit was reached; ``"error"`` raises :class:`ToolCallLimitExceededError`.

Counts are keyed by tool name (``"__all__"`` when no ``tool_name`` is given):
``thread_tool_call_count`` is saved with the thread, ``run_tool_call_count`` lives
for one invocation (never checkpointed). Only calls that were allowed to run
are counted.
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
from engine.prebuilt._chat import (
    ai_message,
    is_ai,
    is_tool,
    tool_call_id,
    tool_calls,
    tool_message,
)

__all__ = (
    "ToolCallLimitExceededError",
    "ToolCallLimitMiddleware",
    "ToolCallLimitState",
)

ALL_TOOLS = "__all__"


class ToolCallLimitState(AgentState[Any]):
    """The counts this middleware keeps, by tool name."""

    thread_tool_call_count: NotRequired[Annotated[dict[str, int], PrivateStateAttr]]
    run_tool_call_count: NotRequired[
        Annotated[dict[str, int], UntrackedValue, PrivateStateAttr]
    ]


class ToolCallLimitExceededError(Exception):
    """Raised, with ``exit_behavior="error"``, when a call goes past a limit."""

    def __init__(
        self,
        tool_name: str | None,
        thread_count: int,
        run_count: int,
        thread_limit: int | None,
        run_limit: int | None,
    ) -> None:
        self.tool_name = tool_name
        self.thread_count = thread_count
        self.run_count = run_count
        self.thread_limit = thread_limit
        self.run_limit = run_limit
        what = f"'{tool_name}'" if tool_name else "all tools"
        super().__init__(
            f"Tool call limit exceeded for {what}: thread {thread_count}/"
            f"{thread_limit}, run {run_count}/{run_limit}."
        )


class ToolCallLimitMiddleware(AgentMiddleware[ToolCallLimitState, Any]):
    """Allow ``tool_name`` (or any tool) to be called at most so many times.

    Args:
        tool_name: the tool counted; ``None`` counts every tool call.
        thread_limit: calls allowed over the thread's life.
        run_limit: calls allowed in one invocation.
        exit_behavior: ``"continue"``, ``"end"`` or ``"error"`` (see the module).

    Raises:
        ValueError: neither limit given, or an unknown exit behavior.
    """

    state_schema = ToolCallLimitState

    def __init__(
        self,
        *,
        tool_name: str | None = None,
        thread_limit: int | None = None,
        run_limit: int | None = None,
        exit_behavior: Literal["continue", "end", "error"] = "continue",
    ) -> None:
        if thread_limit is None and run_limit is None:
            raise ValueError("At least one limit must be specified.")
        if exit_behavior not in ("continue", "end", "error"):
            raise ValueError(
                f"Invalid exit_behavior: {exit_behavior!r}. Must be 'continue', 'end' "
                "or 'error'."
            )
        self.tool_name = tool_name
        self.thread_limit = thread_limit
        self.run_limit = run_limit
        self.exit_behavior = exit_behavior

    @property
    def name(self) -> str:
        """One instance per tool may be used: the name includes the tool's."""
        base = type(self).__name__
        return f"{base}[{self.tool_name}]" if self.tool_name else base

    def _over(self, thread: int, run: int) -> bool:
        return (self.thread_limit is not None and thread > self.thread_limit) or (
            self.run_limit is not None and run > self.run_limit
        )

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        last = messages[-1] if messages else None
        if last is None or not is_ai(last):
            return None
        key = self.tool_name or ALL_TOOLS
        thread_counts = dict(state.get("thread_tool_call_count") or {})
        run_counts = dict(state.get("run_tool_call_count") or {})
        thread, run = thread_counts.get(key, 0), run_counts.get(key, 0)
        calls = tool_calls(last)
        blocked: list[dict[str, Any]] = []
        for call in calls:
            if self.tool_name is not None and call["name"] != self.tool_name:
                continue
            if self._over(thread + 1, run + 1):
                blocked.append(call)
            else:
                thread, run = thread + 1, run + 1
        update: dict[str, Any] = {
            "thread_tool_call_count": {**thread_counts, key: thread},
            "run_tool_call_count": {**run_counts, key: run},
        }
        if not blocked:
            return update
        if self.exit_behavior == "error":
            raise ToolCallLimitExceededError(
                self.tool_name, thread + 1, run + 1, self.thread_limit, self.run_limit
            )
        if self.exit_behavior == "continue":
            update["messages"] = [self._refusal(call) for call in blocked]
            return update
        answered = {tool_call_id(m) for m in messages if is_tool(m)}
        what = f"'{self.tool_name}'" if self.tool_name else "tools"
        update["messages"] = [
            *(self._refusal(c) for c in calls if c["id"] not in answered),
            ai_message(f"Tool call limit reached for {what}; stopping here."),
        ]
        update["jump_to"] = "end"
        return update

    def _refusal(self, call: dict[str, Any]) -> Any:
        return tool_message(
            f"Tool call limit exceeded. Do not call '{call['name']}' again.",
            tool_call_id=call["id"],
            name=call["name"],
            status="error",
        )

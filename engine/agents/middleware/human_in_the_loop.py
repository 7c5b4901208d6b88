"""Human in the loop: pause before chosen tools run, and let a person approve, edit or reject.

After each model call, the tool calls of the answer whose tool is listed in
``interrupt_on`` are put to a person in one ``interrupt()``. The interrupt's
value is a :class:`HITLRequest`: one action request (tool name, arguments, a
description) and one review config (the decisions allowed) per call. Resume with
``Command(resume={"decisions": [...]})``, one decision per action request, in
order:

- ``{"type": "approve"}``: the call runs as the model asked;
- ``{"type": "edit", "edited_action": {"name": ..., "args": {...}}}``: the call runs
  with the edited name and arguments (same call id);
- ``{"type": "reject", "message": "..."}``: the call does not run; an error tool
  message (``message``, or a default naming the call) answers it, and the model
  is called again with it.

The resume value is checked against :class:`HITLResponse` (a pydantic-validated
TypedDict). A wrong shape, a decision the review config does not allow, or a
number of decisions other than the number of action requests does not fail the
run: the agent asks again, pausing with the same request plus an ``error`` key
naming the problem, and the next resume answers that. (Raising would leave the
thread stuck: a resume value, once given, is replayed each time the node runs.)
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Protocol, TypedDict

from pydantic import TypeAdapter, ValidationError

from engine.agents.middleware.types import AgentMiddleware, AgentState
from engine.prebuilt._chat import (
    ai_message,
    is_ai,
    message_id,
    tool_calls,
    tool_message,
)
from engine.prebuilt._chat import (
    langchain_messages as _lc_messages,
)
from engine.types import interrupt

__all__ = (
    "Action",
    "ActionRequest",
    "ApproveDecision",
    "DecisionType",
    "EditDecision",
    "HITLRequest",
    "HITLResponse",
    "HumanInTheLoopMiddleware",
    "InterruptOnConfig",
    "RejectDecision",
    "ReviewConfig",
)

DecisionType = Literal["approve", "edit", "reject"]


class Action(TypedDict):
    """A tool call as a person sees and edits it."""

    name: str
    args: dict[str, Any]


class ActionRequest(TypedDict):
    """One tool call put to a person."""

    name: str
    args: dict[str, Any]
    description: NotRequired[str]


class ReviewConfig(TypedDict):
    """What a person may decide about one tool."""

    action_name: str
    allowed_decisions: list[DecisionType]
    args_schema: NotRequired[dict[str, Any]]


class HITLRequest(TypedDict):
    """The value of the interrupt."""

    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]
    error: NotRequired[str]
    """Why the previous answer was refused (only when asking again)."""


class ApproveDecision(TypedDict):
    type: Literal["approve"]


class EditDecision(TypedDict):
    type: Literal["edit"]
    edited_action: Action


class RejectDecision(TypedDict):
    type: Literal["reject"]
    message: NotRequired[str]


Decision = ApproveDecision | EditDecision | RejectDecision


class HITLResponse(TypedDict):
    """The resume value: one decision per action request, in order."""

    decisions: list[Decision]


class _Describe(Protocol):
    def __call__(self, tool_call: dict[str, Any], state: Any, runtime: Any) -> str: ...


class InterruptOnConfig(TypedDict):
    """How to put one tool's calls to a person."""

    allowed_decisions: list[DecisionType]
    description: NotRequired[str | _Describe]
    args_schema: NotRequired[dict[str, Any]]


_RESPONSE = TypeAdapter(HITLResponse)
_ALL: list[DecisionType] = ["approve", "edit", "reject"]


class HumanInTheLoopMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Pause before the listed tools run, for a person's decision.

    Args:
        interrupt_on: tool name -> ``True`` (any decision), ``False`` (never
            ask), or an :class:`InterruptOnConfig`.
        description_prefix: the start of the default description of a call.
    """

    def __init__(
        self,
        interrupt_on: dict[str, bool | InterruptOnConfig],
        *,
        description_prefix: str = "Tool execution requires approval",
    ) -> None:
        self.interrupt_on: dict[str, InterruptOnConfig] = {}
        for tool_name, config in interrupt_on.items():
            if config is True:
                self.interrupt_on[tool_name] = {"allowed_decisions": list(_ALL)}
            elif config:
                unknown = set(config["allowed_decisions"]) - set(_ALL)
                if unknown:
                    raise ValueError(
                        f"Unknown decision(s) {sorted(unknown)} for {tool_name!r}: "
                        f"use {_ALL}."
                    )
                self.interrupt_on[tool_name] = config
        self.description_prefix = description_prefix

    def _describe(
        self, call: dict[str, Any], config: InterruptOnConfig, state: Any, runtime: Any
    ) -> str:
        description = config.get("description")
        if callable(description):
            return str(description(call, state, runtime))
        if isinstance(description, str):
            return description
        return (
            f"{self.description_prefix}\n\nTool: {call['name']}\nArgs: {call['args']}"
        )

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        last = next((m for m in reversed(messages) if is_ai(m)), None)
        if last is None:
            return None
        calls = tool_calls(last)
        asked = [c for c in calls if c["name"] in self.interrupt_on]
        if not asked:
            return None
        request: HITLRequest = {"action_requests": [], "review_configs": []}
        for call in asked:
            config = self.interrupt_on[call["name"]]
            action: ActionRequest = {
                "name": call["name"],
                "args": call["args"],
                "description": self._describe(call, config, state, runtime),
            }
            review: ReviewConfig = {
                "action_name": call["name"],
                "allowed_decisions": list(config["allowed_decisions"]),
            }
            if "args_schema" in config:
                review["args_schema"] = config["args_schema"]
            request["action_requests"].append(action)
            request["review_configs"].append(review)
        asked_request: HITLRequest = request
        while True:
            try:
                decisions = self._decisions(interrupt(asked_request), request)
                break
            except ValueError as problem:
                asked_request = {**request, "error": str(problem)}
        revised: list[dict[str, Any]] = []
        answers: list[Any] = []
        by_id = {c["id"]: d for c, d in zip(asked, decisions, strict=True)}
        for call in calls:
            decision = by_id.get(call["id"])
            if decision is None or decision["type"] == "approve":
                revised.append(call)
            elif decision["type"] == "edit":
                edited = decision["edited_action"]
                revised.append({**call, "name": edited["name"], "args": edited["args"]})
            else:
                revised.append(call)
                answers.append(
                    tool_message(
                        decision.get("message")
                        or f"User rejected the tool call for `{call['name']}` with "
                        f"id {call['id']}",
                        tool_call_id=call["id"],
                        name=call["name"],
                        status="error",
                    )
                )
        return {"messages": [_with_tool_calls(last, revised), *answers]}

    def _decisions(self, resume: Any, request: HITLRequest) -> list[Any]:
        try:
            response = _RESPONSE.validate_python(resume)
        except ValidationError as exc:
            raise ValueError(
                "The resume value of a human-in-the-loop interrupt must be "
                '{"decisions": [...]}, one {"type": "approve" | "edit" | "reject", '
                f"...}} per action request: {exc}"
            ) from exc
        decisions = list(response["decisions"])
        expected = len(request["action_requests"])
        if len(decisions) != expected:
            raise ValueError(
                f"Number of human decisions ({len(decisions)}) does not match number "
                f"of hanging tool calls ({expected})."
            )
        for decision, review in zip(decisions, request["review_configs"], strict=True):
            if decision["type"] not in review["allowed_decisions"]:
                raise ValueError(
                    f"Unexpected human decision: {decision['type']!r} is not allowed "
                    f"for tool {review['action_name']!r} (allowed: "
                    f"{review['allowed_decisions']})."
                )
        return decisions


def _with_tool_calls(message: Any, calls: list[dict[str, Any]]) -> Any:
    """The AI message (same id, so it replaces the original) with ``calls``."""
    if isinstance(message, dict):
        return {**message, "tool_calls": calls}
    lc = _lc_messages()
    if lc is not None and isinstance(message, lc.AIMessage):
        return message.model_copy(
            update={
                "tool_calls": [
                    {
                        "type": "tool_call",
                        "id": c["id"],
                        "name": c["name"],
                        "args": c["args"],
                    }
                    for c in calls
                ]
            }
        )
    return ai_message(message.content, id=message_id(message), tool_calls=calls)

"""Retry a failing tool call with exponential backoff."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from engine.agents.middleware._retry import RetryOn, RetrySchedule
from engine.agents.middleware.types import AgentMiddleware, ToolCallRequest
from engine.prebuilt._chat import tool_message

__all__ = ("ToolRetryMiddleware",)

OnFailure = Literal["continue", "error"] | Callable[[Exception], str]


class ToolRetryMiddleware(AgentMiddleware[Any, Any]):
    """Run a tool again when it raises one of ``retry_on``.

    Args:
        max_retries: retries after the first attempt (0: none).
        tools: the tools (or tool names) retried; ``None``: all.
        retry_on: exception types to retry, or a predicate on the exception.
        on_failure: when every attempt failed: ``"continue"`` (default) answers
            the call with an error tool message, so the model can react;
            ``"error"`` raises the last error; a function ``(error) -> str``
            writes the answer.
        backoff_factor, initial_delay, max_delay, jitter: as for
            :class:`~engine.agents.middleware.ModelRetryMiddleware`.
    """

    def __init__(
        self,
        *,
        max_retries: int = 2,
        tools: Sequence[Any] | None = None,
        retry_on: RetryOn = (Exception,),
        on_failure: OnFailure = "continue",
        backoff_factor: float = 2.0,
        initial_delay: float = 1.0,
        max_delay: float = 60.0,
        jitter: bool = True,
    ) -> None:
        self.schedule = RetrySchedule(
            max_retries=max_retries,
            retry_on=retry_on,
            backoff_factor=backoff_factor,
            initial_delay=initial_delay,
            max_delay=max_delay,
            jitter=jitter,
        )
        self.tool_names = (
            None
            if tools is None
            else {
                t
                if isinstance(t, str)
                else getattr(t, "name", getattr(t, "__name__", ""))
                for t in tools
            }
        )
        self.on_failure = on_failure

    def _applies(self, request: ToolCallRequest) -> bool:
        return (
            self.tool_names is None or request.tool_call.get("name") in self.tool_names
        )

    def _failed(self, request: ToolCallRequest, error: Exception, attempts: int) -> Any:
        if self.on_failure == "error":
            raise error
        call = request.tool_call
        if callable(self.on_failure):
            content = self.on_failure(error)
        else:
            content = (
                f"Tool '{call.get('name')}' failed after {attempts} attempt(s) with "
                f"{type(error).__name__}: {error}. Please try again or do without it."
            )
        return tool_message(
            content, tool_call_id=call.get("id"), name=call.get("name"), status="error"
        )

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
    ) -> Any:
        if not self._applies(request):
            return handler(request)
        return self.schedule.run(
            lambda: handler(request),
            lambda error, attempts: self._failed(request, error, attempts),
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Any]],
    ) -> Any:
        if not self._applies(request):
            return await handler(request)
        return await self.schedule.arun(
            lambda: handler(request),
            lambda error, attempts: self._failed(request, error, attempts),
        )

"""Retry a failing tool call with exponential backoff."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from engine.agents.middleware._retry import (
    RetryOn,
    backoff_delay,
    should_retry,
    validate_retry_args,
)
from engine.agents.middleware.types import AgentMiddleware, ToolCallRequest
from engine.errors import GraphBubbleUp
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
        validate_retry_args(max_retries, initial_delay, max_delay, backoff_factor)
        self.max_retries = max_retries
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
        self.retry_on = retry_on
        self.on_failure = on_failure
        self.backoff_factor = backoff_factor
        self.initial_delay = initial_delay
        self.max_delay = max_delay
        self.jitter = jitter

    def _applies(self, request: ToolCallRequest) -> bool:
        return (
            self.tool_names is None or request.tool_call.get("name") in self.tool_names
        )

    def _delay(self, retry: int) -> float:
        return backoff_delay(
            retry,
            initial_delay=self.initial_delay,
            backoff_factor=self.backoff_factor,
            max_delay=self.max_delay,
            jitter=self.jitter,
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
        for attempt in range(self.max_retries + 1):
            try:
                return handler(request)
            except GraphBubbleUp:
                raise
            except Exception as error:
                if (
                    not should_retry(error, self.retry_on)
                    or attempt == self.max_retries
                ):
                    return self._failed(request, error, attempt + 1)
                time.sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Any]],
    ) -> Any:
        if not self._applies(request):
            return await handler(request)
        for attempt in range(self.max_retries + 1):
            try:
                return await handler(request)
            except GraphBubbleUp:
                raise
            except Exception as error:
                if (
                    not should_retry(error, self.retry_on)
                    or attempt == self.max_retries
                ):
                    return self._failed(request, error, attempt + 1)
                await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

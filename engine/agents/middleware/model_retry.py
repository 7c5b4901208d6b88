"""Retry a failing model call with exponential backoff."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from engine.agents.middleware._retry import (
    RetryOn,
    backoff_delay,
    should_retry,
    validate_retry_args,
)
from engine.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from engine.errors import GraphBubbleUp
from engine.prebuilt._chat import ai_message

__all__ = ("ModelRetryMiddleware",)

OnFailure = Literal["continue", "error"] | Callable[[Exception], str]


class ModelRetryMiddleware(AgentMiddleware[Any, Any]):
    """Call the model again when it raises one of ``retry_on``.

    Args:
        max_retries: retries after the first attempt (0: none).
        retry_on: exception types to retry, or a predicate on the exception.
        on_failure: when every attempt failed: ``"continue"`` (default) answers
            with an AI message describing the error, so the run goes on;
            ``"error"`` raises the last error; a function ``(error) -> str``
            writes the AI message.
        backoff_factor, initial_delay, max_delay, jitter: the wait before retry
            ``n`` is ``initial_delay * backoff_factor ** n`` seconds, at most
            ``max_delay``, randomized by +-25% with ``jitter``.
    """

    def __init__(
        self,
        *,
        max_retries: int = 2,
        retry_on: RetryOn = (Exception,),
        on_failure: OnFailure = "continue",
        backoff_factor: float = 2.0,
        initial_delay: float = 1.0,
        max_delay: float = 60.0,
        jitter: bool = True,
    ) -> None:
        validate_retry_args(max_retries, initial_delay, max_delay, backoff_factor)
        self.max_retries = max_retries
        self.retry_on = retry_on
        self.on_failure = on_failure
        self.backoff_factor = backoff_factor
        self.initial_delay = initial_delay
        self.max_delay = max_delay
        self.jitter = jitter

    def _delay(self, retry: int) -> float:
        return backoff_delay(
            retry,
            initial_delay=self.initial_delay,
            backoff_factor=self.backoff_factor,
            max_delay=self.max_delay,
            jitter=self.jitter,
        )

    def _failed(self, error: Exception, attempts: int) -> ModelResponse:
        if self.on_failure == "error":
            raise error
        if callable(self.on_failure):
            content = self.on_failure(error)
        else:
            content = (
                f"Model call failed after {attempts} attempt(s) with "
                f"{type(error).__name__}: {error}"
            )
        return ModelResponse([ai_message(content)])

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
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
                    return self._failed(error, attempt + 1)
                time.sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
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
                    return self._failed(error, attempt + 1)
                await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

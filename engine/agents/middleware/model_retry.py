"""Retry a failing model call with exponential backoff."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from engine.agents.middleware._retry import RetryOn, RetrySchedule
from engine.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
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
        self.schedule = RetrySchedule(
            max_retries=max_retries,
            retry_on=retry_on,
            backoff_factor=backoff_factor,
            initial_delay=initial_delay,
            max_delay=max_delay,
            jitter=jitter,
        )
        self.on_failure = on_failure

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
        return self.schedule.run(lambda: handler(request), self._failed)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        return await self.schedule.arun(lambda: handler(request), self._failed)

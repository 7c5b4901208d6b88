"""What the retry middlewares share: which errors to retry and how long to wait."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from engine.errors import GraphBubbleUp

__all__ = (
    "RetryOn",
    "RetrySchedule",
    "backoff_delay",
    "should_retry",
    "validate_retry_args",
)

T = TypeVar("T")

RetryOn = tuple[type[Exception], ...] | Callable[[Exception], bool]
"""Exception types to retry, or a predicate on the exception."""


def validate_retry_args(
    max_retries: int, initial_delay: float, max_delay: float, backoff_factor: float
) -> None:
    if max_retries < 0:
        raise ValueError("max_retries must be >= 0")
    if initial_delay < 0 or max_delay < 0 or backoff_factor < 0:
        raise ValueError("initial_delay, max_delay and backoff_factor must be >= 0")


def should_retry(error: Exception, retry_on: RetryOn) -> bool:
    if isinstance(retry_on, tuple):
        return isinstance(error, retry_on)
    return bool(retry_on(error))


def backoff_delay(
    retry: int,
    *,
    initial_delay: float,
    backoff_factor: float,
    max_delay: float,
    jitter: bool,
    rng: Any = random,
) -> float:
    """Seconds to wait before retry number ``retry`` (0-based): ``initial_delay *
    backoff_factor ** retry``, at most ``max_delay``, +-25% when ``jitter``."""
    delay = initial_delay * (backoff_factor**retry) if backoff_factor else initial_delay
    delay = min(delay, max_delay)
    if jitter and delay > 0:
        delay *= 1 + rng.uniform(-0.25, 0.25)
    return max(0.0, delay)


class RetrySchedule:
    """The attempt loop both retry middlewares run, with its settings.

    ``run(call, failed)`` calls ``call()`` up to ``max_retries + 1`` times, waiting
    :func:`backoff_delay` between attempts, while the error is one of ``retry_on``;
    the last error (or one not to retry) goes to ``failed(error, attempts)``, whose
    answer is returned. Interrupts and other control signals pass through.
    """

    def __init__(
        self,
        *,
        max_retries: int,
        retry_on: RetryOn,
        backoff_factor: float,
        initial_delay: float,
        max_delay: float,
        jitter: bool,
    ) -> None:
        validate_retry_args(max_retries, initial_delay, max_delay, backoff_factor)
        self.max_retries = max_retries
        self.retry_on = retry_on
        self.backoff_factor = backoff_factor
        self.initial_delay = initial_delay
        self.max_delay = max_delay
        self.jitter = jitter

    def delay(self, retry: int) -> float:
        return backoff_delay(
            retry,
            initial_delay=self.initial_delay,
            backoff_factor=self.backoff_factor,
            max_delay=self.max_delay,
            jitter=self.jitter,
        )

    def _gives_up(self, error: Exception, attempt: int) -> bool:
        return not should_retry(error, self.retry_on) or attempt == self.max_retries

    def run(self, call: Callable[[], T], failed: Callable[[Exception, int], T]) -> T:
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except GraphBubbleUp:
                raise
            except Exception as error:
                if self._gives_up(error, attempt):
                    return failed(error, attempt + 1)
                time.sleep(self.delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def arun(
        self, call: Callable[[], Awaitable[T]], failed: Callable[[Exception, int], T]
    ) -> T:
        for attempt in range(self.max_retries + 1):
            try:
                return await call()
            except GraphBubbleUp:
                raise
            except Exception as error:
                if self._gives_up(error, attempt):
                    return failed(error, attempt + 1)
                await asyncio.sleep(self.delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

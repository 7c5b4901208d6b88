"""What the retry middlewares share: which errors to retry and how long to wait."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

__all__ = ("RetryOn", "backoff_delay", "should_retry", "validate_retry_args")

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

"""Node policies: retrying, caching, timing out and tracing a node.

Given to ``add_node(retry_policy=..., cache_policy=..., timeout=...,
trace_policy=...)`` and ``@task``. Re-exported from ``engine.types``, as in
``langgraph.types``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar

__all__ = (
    "CachePolicy",
    "default_retry_on",
    "omit_payload",
    "RetryPolicy",
    "TimeoutPolicy",
    "TracePolicy",
)

N = TypeVar("N")


def default_retry_on(exc: Exception) -> bool:
    """Retry transient failures; never retry programming errors.

    Programming errors (``ValueError``, ``TypeError``, ``LookupError``...) fail at
    once. HTTP client errors retry only on 5xx responses.
    """
    if isinstance(
        exc,
        (
            ValueError,
            TypeError,
            ArithmeticError,
            ImportError,
            LookupError,
            NameError,
            SyntaxError,
            RuntimeError,
            ReferenceError,
            StopIteration,
            StopAsyncIteration,
            OSError,
        ),
    ):
        # Connection-level OSErrors are transient; other OSErrors are not.
        return isinstance(exc, ConnectionError)
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int) and type(exc).__module__.split(".")[0] in {
        "httpx",
        "requests",
    }:
        return status >= 500
    return True


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed node attempt is retried.

    ``max_attempts`` counts the first attempt: ``max_attempts=3`` means one try and
    two retries. Only exceptions matched by ``retry_on`` are retried; interrupts
    never are. A failed attempt's writes are discarded.
    """

    initial_interval: float = 0.5
    """Seconds before the first retry."""
    backoff_factor: float = 2.0
    """Multiplier of the interval after each retry."""
    max_interval: float = 128.0
    """Upper bound of the interval between retries, in seconds."""
    max_attempts: int = 3
    """Attempts in all, the first one included."""
    jitter: bool = True
    """Add up to one second of random jitter to each interval."""
    retry_on: (
        type[Exception] | Sequence[type[Exception]] | Callable[[Exception], bool]
    ) = default_retry_on
    """Exception types to retry, or a predicate."""

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(
                f"RetryPolicy.max_attempts must be an int >= 1 (it counts the first "
                f"attempt); got {self.max_attempts!r}"
            )
        if (
            self.initial_interval < 0
            or self.max_interval < 0
            or self.backoff_factor < 1
        ):
            raise ValueError(
                "RetryPolicy intervals must be >= 0 and backoff_factor >= 1; got "
                f"initial_interval={self.initial_interval}, max_interval={self.max_interval}, "
                f"backoff_factor={self.backoff_factor}"
            )

    def should_retry(self, exc: Exception) -> bool:
        retry_on = self.retry_on
        if isinstance(retry_on, type) and issubclass(retry_on, BaseException):
            return isinstance(exc, retry_on)
        if isinstance(retry_on, Sequence):
            return isinstance(exc, tuple(retry_on))
        predicate: Callable[[Exception], bool] = retry_on  # type: ignore[assignment]
        return bool(predicate(exc))

    def interval(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(
            self.max_interval,
            self.initial_interval * self.backoff_factor ** (attempt - 1),
        )
        return base + (random.uniform(0, 1) if self.jitter else 0.0)


def _default_cache_key(*args: Any, **kwargs: Any) -> str | bytes:
    from engine._internal._cache_key import default_cache_key  # noqa: PLC0415

    return default_cache_key(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class CachePolicy(Generic[N]):
    """Reuse a node's writes when it runs again on the same input."""

    key_func: Callable[..., str | bytes] = _default_cache_key
    """Maps the node's input to a cache key."""
    ttl: int | None = None
    """Seconds a cached result lives; ``None`` keeps it until cleared."""

    def __post_init__(self) -> None:
        if self.ttl is not None and (
            not isinstance(self.ttl, (int, float)) or self.ttl <= 0
        ):
            raise ValueError(
                f"CachePolicy.ttl must be a positive number of seconds or None, got {self.ttl!r}"
            )


@dataclass(frozen=True, slots=True)
class TimeoutPolicy:
    """Limits for one attempt of an async node. Sync nodes cannot be timed out.

    ``run_timeout`` caps the wall-clock time of an attempt; ``idle_timeout`` caps
    the time without progress (a custom stream write or ``runtime.heartbeat()``).
    """

    run_timeout: float | None = None
    idle_timeout: float | None = None
    refresh_on: Literal["auto", "heartbeat"] = "auto"

    def __post_init__(self) -> None:
        for name in ("run_timeout", "idle_timeout"):
            value = getattr(self, name)
            if isinstance(value, timedelta):
                object.__setattr__(self, name, value.total_seconds())
                value = getattr(self, name)
            if value is not None and (
                not isinstance(value, (int, float)) or value <= 0
            ):
                raise ValueError(
                    f"TimeoutPolicy.{name} must be a positive number of seconds"
                )
        if self.run_timeout is None and self.idle_timeout is None:
            raise ValueError("TimeoutPolicy needs run_timeout or idle_timeout")

    @classmethod
    def coerce(
        cls, value: float | timedelta | TimeoutPolicy | None
    ) -> TimeoutPolicy | None:
        if value is None or isinstance(value, TimeoutPolicy):
            return value
        if isinstance(value, timedelta):
            return cls(run_timeout=value.total_seconds())
        return cls(run_timeout=float(value))


@dataclass(frozen=True, kw_only=True)
class TracePolicy:
    """What a tracer records of a node's run (``add_node(..., trace_policy=...)``).

    The engine records no traces of node inputs and outputs (it has no LangChain
    callbacks), so a policy changes nothing here; it is accepted so graphs written
    for LangGraph compile unchanged.
    """

    process_inputs: Callable[[Any], Any] | None = None
    """Turns the node's input into what is recorded."""
    process_outputs: Callable[[Any], Any] | None = None
    """Turns the node's output into what is recorded."""


def omit_payload(_value: Any) -> dict[str, Any]:
    """A :class:`TracePolicy` processor that records nothing of the value."""
    return {}

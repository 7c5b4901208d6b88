"""Small typing aliases and the MISSING sentinel used across the engine."""

from __future__ import annotations

from typing import Any, Final, TypedDict


class _Missing:
    """Type of the :data:`MISSING` sentinel (a value that was never set)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()


class RunnableConfig(TypedDict, total=False):
    """The per-call configuration dict, shaped like LangChain's ``RunnableConfig``."""

    tags: list[str]
    metadata: dict[str, Any]
    callbacks: Any
    run_name: str
    max_concurrency: int | None
    recursion_limit: int
    configurable: dict[str, Any]
    run_id: Any

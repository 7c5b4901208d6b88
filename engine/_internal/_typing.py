"""Small typing aliases and the MISSING sentinel used across the engine."""

from __future__ import annotations

from typing import Any, Final


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


RunnableConfig = dict[str, Any]
"""The per-call configuration dict, shaped like LangChain's ``RunnableConfig``:
``configurable`` (``thread_id``, ``checkpoint_id``, ``checkpoint_ns``...),
``recursion_limit``, ``tags``, ``metadata``, ``run_id``, ``max_concurrency``."""

"""Checks on numbers given by users (TTLs, sizes)."""

from __future__ import annotations

import math
from typing import TypeGuard

__all__ = ("is_positive_number",)


def is_positive_number(value: object) -> TypeGuard[int | float]:
    """An int or float (not a bool) that is finite and above zero."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )

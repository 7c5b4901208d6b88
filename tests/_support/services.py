"""The one rule for tests that need a real service: skip locally, fail in CI."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ("in_ci", "unavailable")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skip the test, or fail it when ``CI`` is set: a missing service never turns CI green."""
    if in_ci():
        pytest.fail(
            f"{reason} (CI is set, so this cannot be skipped; .ci/run starts the services)",
            pytrace=False,
        )
    pytest.skip(reason)

"""A graph whose ``THREAD_TITLE`` fails: its runs start all the same."""

from __future__ import annotations

from typing import Any

from tests.studio.titled_graphs_for_tests import trip

__all__ = ("THREAD_TITLE", "trip")


def THREAD_TITLE(input: Any) -> str:
    raise KeyError("no title today")

"""Stand-ins for compiled graphs, for registry tests. Anything with ``invoke`` counts."""

from __future__ import annotations

from typing import Any


class FakeGraph:
    def __init__(self, name: str) -> None:
        self.name = name

    def invoke(self, state: dict[str, Any]) -> dict[str, Any]:
        return state


graph = FakeGraph("prebuilt")
calls: list[str] = []


def build() -> FakeGraph:
    calls.append("build")
    return FakeGraph("built")


def broken() -> FakeGraph:
    raise RuntimeError("no model configured")


not_a_graph = 42

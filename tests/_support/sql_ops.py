"""Driving a SQL saver's operation (``engine.checkpoint._sqlcore``) without a
database, to see the statements it would send."""

from __future__ import annotations

from typing import Any

from engine.checkpoint._sqlcore.dialect import Op

__all__ = ("statements_of",)


def statements_of(op: Op[Any]) -> list[Any]:
    """What ``op`` yields (statements and batches) when every read finds no row."""
    yielded: list[Any] = []
    answer: Any = None
    while True:
        try:
            stmt = op.send(answer)
        except StopIteration:
            return yielded
        yielded.append(stmt)
        answer = [[] for _ in stmt] if isinstance(stmt, tuple) else None

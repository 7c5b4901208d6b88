"""Driving a SQL saver's operation (``engine.checkpoint._sqlcore``) without a
database, to see the statements it would send."""

from __future__ import annotations

from typing import Any

from engine.checkpoint._sqlcore.dialect import Op, Stmt

__all__ = ("flat", "statements_of")


def statements_of(op: Op[Any], into: list[Any] | None = None) -> list[Any]:
    """What ``op`` yields (statements and batches) when every read finds no row,
    appended to ``into`` (a new list if not given) as they come."""
    yielded: list[Any] = [] if into is None else into
    answer: Any = None
    while True:
        try:
            stmt = op.send(answer)
        except StopIteration:
            return yielded
        yielded.append(stmt)
        answer = [[] for _ in stmt] if isinstance(stmt, tuple) else None


def flat(yielded: list[Any]) -> list[Stmt]:
    """The statements of ``yielded``, those of a batch in its place."""
    return [
        s for item in yielded for s in (item if isinstance(item, tuple) else [item])
    ]

"""Driving a SQL saver's operation (``engine.checkpoint._sqlcore``) without a
database, to see the statements it would send."""

from __future__ import annotations

from typing import Any

from engine.checkpoint._sqlcore.dialect import Op, Stmt
from engine.checkpoint.postgres._sql import merged_insert

__all__ = ("flat", "insert_rows", "statements_of")


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


def insert_rows(stmt: Any, sql: str) -> list[tuple[Any, ...]] | None:
    """The rows ``stmt`` inserts when it is the one-row insert ``sql``, run once
    per row or given several rows at once (Postgres merges them:
    ``PostgresDialect.inserts``); None for any other statement (or a batch)."""
    if not isinstance(stmt, Stmt):
        return None
    if stmt.sql == sql:
        if stmt.many is not None:
            return [tuple(row) for row in stmt.many]
        return [tuple(stmt.params)]
    width = sql.count("%s")
    params = tuple(stmt.params)
    if not width or not params or len(params) % width:
        return None
    if stmt.sql != merged_insert(sql, len(params) // width):
        return None
    return [params[at : at + width] for at in range(0, len(params), width)]

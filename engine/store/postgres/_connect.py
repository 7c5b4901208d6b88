"""How ``from_conn_string`` connects the Postgres stores: a pool, or one pipelined connection.

By default the stores get a pool of autocommit connections (``pool_config`` tunes its
size and connection arguments). ``pipeline=True`` without ``pool_config`` gives them
one connection in psycopg pipeline mode instead, as LangGraph's do: statements of a
batch are sent without waiting for each answer, at the price of one connection
shared by all callers. As in LangGraph, ``pool_config`` wins over ``pipeline``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypedDict

from psycopg import AsyncConnection, AsyncPipeline, Connection, Pipeline
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from engine._internal._postgres import POOL_OPEN_TIMEOUT

__all__ = ("PoolConfig", "aconnect", "connect")


class PoolConfig(TypedDict, total=False):
    """Connection pool settings for ``from_conn_string(..., pool_config=...)``."""

    min_size: int
    """Connections kept open (default 1)."""
    max_size: int | None
    """Most connections open at once (default: ``from_conn_string``'s ``max_size``)."""
    kwargs: dict[str, Any]
    """Extra ``psycopg.connect`` arguments; ``autocommit`` is always True."""


def _pool_args(pool_config: PoolConfig | None, max_size: int) -> dict[str, Any]:
    config: dict[str, Any] = dict(pool_config or {})
    min_size = config.pop("min_size", 1)
    size = config.pop("max_size", None) or max(max_size, min_size)
    kwargs = {**(config.pop("kwargs", None) or {}), "autocommit": True}
    return {"min_size": min_size, "max_size": size, "kwargs": kwargs, **config}


@contextmanager
def connect(
    conn_string: str,
    *,
    pipeline: bool,
    pool_config: PoolConfig | None,
    max_size: int,
    name: str,
) -> Iterator[tuple[Connection[Any] | ConnectionPool[Any], Pipeline | None]]:
    """``(pool, None)`` or ``(connection, pipeline)``, closed on exit."""
    if pipeline and pool_config is None:
        with (
            Connection.connect(conn_string, autocommit=True) as conn,
            conn.pipeline() as pipe,
        ):
            yield conn, pipe
        return
    pool: ConnectionPool[Any] = ConnectionPool(
        conn_string, open=False, name=name, **_pool_args(pool_config, max_size)
    )
    pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT)
    try:
        yield pool, None
    finally:
        pool.close()


@asynccontextmanager
async def aconnect(
    conn_string: str,
    *,
    pipeline: bool,
    pool_config: PoolConfig | None,
    max_size: int,
    name: str,
) -> AsyncIterator[
    tuple[AsyncConnection[Any] | AsyncConnectionPool[Any], AsyncPipeline | None]
]:
    """Async twin of :func:`connect`."""
    if pipeline and pool_config is None:
        conn = await AsyncConnection.connect(conn_string, autocommit=True)
        async with conn, conn.pipeline() as pipe:
            yield conn, pipe
        return
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conn_string, open=False, name=name, **_pool_args(pool_config, max_size)
    )
    await pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT)
    try:
        yield pool, None
    finally:
        await pool.close()

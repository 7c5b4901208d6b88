"""Background TTL sweepers: a thread for sync stores, a task for async ones.

Both call the store's ``sweep_ttl`` every ``interval`` minutes until stopped; a
failing sweep is logged and the next one runs on time. The interval is the
argument of ``start_ttl_sweeper``, else the store's
``ttl["sweep_interval_minutes"]``, else 5 minutes. They sweep whether or not the
store has a TTL config (items put with an explicit ``ttl=`` expire too); LangGraph's
start nothing without one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable

from engine._internal._numbers import is_positive_number
from engine.store.base import InvalidStoreInputError, TTLConfig

__all__ = ("DEFAULT_SWEEP_MINUTES", "AsyncTTLSweeper", "TTLSweeper", "sweep_interval")

logger = logging.getLogger("engine.store")

DEFAULT_SWEEP_MINUTES = 5.0


def sweep_interval(given: float | None, ttl_config: TTLConfig | None) -> float:
    """Minutes between sweeps (see the module docstring)."""
    interval = given or (ttl_config or {}).get("sweep_interval_minutes")
    if interval is None:
        return DEFAULT_SWEEP_MINUTES
    if not is_positive_number(interval):
        raise InvalidStoreInputError(
            f"sweep_interval_minutes must be a positive number, got {interval!r}."
        )
    return float(interval)


class TTLSweeper:
    """Runs ``sweep`` in a daemon thread; one per store."""

    def __init__(self, sweep: Callable[[], int], name: str) -> None:
        self._sweep = sweep
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._future: concurrent.futures.Future[None] | None = None

    def start(self, minutes: float) -> concurrent.futures.Future[None]:
        """Start (or keep) the thread; its future completes when it stops.

        Cancelling the future stops the thread.
        """
        if self._thread is not None and self._thread.is_alive() and self._future:
            return self._future
        self._stop.clear()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
        self._future = future
        self._thread = threading.Thread(
            target=self._loop, args=(minutes * 60, future), name=self._name, daemon=True
        )
        self._thread.start()
        return future

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to stop; whether it stopped within ``timeout`` seconds."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        self._stop.set()
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._thread = None
        return True

    def _loop(self, seconds: float, future: concurrent.futures.Future[None]) -> None:
        while not self._stop.wait(seconds):
            try:
                swept = self._sweep()
            except Exception:
                logger.exception("TTL sweep failed; retrying in %s s", seconds)
            else:
                if swept:
                    logger.info("TTL sweep deleted %d expired items", swept)
        if not future.done():
            future.set_result(None)


class AsyncTTLSweeper:
    """Runs ``sweep`` in an asyncio task; one per store."""

    def __init__(self, sweep: Callable[[], Awaitable[int]]) -> None:
        self._sweep = sweep
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self, minutes: float) -> asyncio.Task[None]:
        """Start (or keep) the task; cancel it or call :meth:`stop` to end it."""
        if self._task is not None and not self._task.done():
            return self._task
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(minutes * 60))
        return self._task

    async def stop(self, timeout: float | None = None) -> bool:
        """Ask the task to stop; whether it stopped within ``timeout`` seconds."""
        task = self._task
        if task is None or task.done():
            return True
        self._stop.set()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            return False
        self._task = None
        return True

    async def _loop(self, seconds: float) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), seconds)
            except TimeoutError:
                pass
            else:
                return
            try:
                swept = await self._sweep()
            except Exception:
                logger.exception("TTL sweep failed; retrying in %s s", seconds)
            else:
                if swept:
                    logger.info("TTL sweep deleted %d expired items", swept)

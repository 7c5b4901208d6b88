"""Thread leases for the in-memory saver: a lease table under the saver's lock.

``MemoryLeases`` is a base class of :class:`~engine.checkpoint.memory.InMemorySaver`.
Leases live only in the process (never persisted), which is all an in-memory
saver's threads can be shared with.
"""

from __future__ import annotations

import threading

from engine.checkpoint._lease import LeaseTable, ThreadLease

__all__ = ("MemoryLeases",)


class MemoryLeases:
    """The lease methods of ``BaseCheckpointSaver``, over ``leases`` and ``lock``."""

    leases: LeaseTable
    lock: threading.RLock

    supports_leases = True

    def acquire_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> ThreadLease:
        with self.lock:
            return self.leases.acquire(str(thread_id), checkpoint_ns, holder, seconds)

    def renew_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> bool:
        with self.lock:
            return self.leases.renew(str(thread_id), checkpoint_ns, holder, seconds)

    def release_lease(self, thread_id: str, checkpoint_ns: str, holder: str) -> None:
        with self.lock:
            self.leases.release(str(thread_id), checkpoint_ns, holder)

    def get_lease(self, thread_id: str, checkpoint_ns: str) -> ThreadLease | None:
        with self.lock:
            return self.leases.get(str(thread_id), checkpoint_ns)

    async def aacquire_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> ThreadLease:
        return self.acquire_lease(thread_id, checkpoint_ns, holder, seconds)

    async def arenew_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str, seconds: float
    ) -> bool:
        return self.renew_lease(thread_id, checkpoint_ns, holder, seconds)

    async def arelease_lease(
        self, thread_id: str, checkpoint_ns: str, holder: str
    ) -> None:
        self.release_lease(thread_id, checkpoint_ns, holder)

    async def aget_lease(
        self, thread_id: str, checkpoint_ns: str
    ) -> ThreadLease | None:
        return self.get_lease(thread_id, checkpoint_ns)

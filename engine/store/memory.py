"""InMemoryStore: long-term memory in process memory, stored as the SQL backend stores it.

For tests, notebooks and the embedded studio. Values are kept as tagged-JSON text
and decoded on every read, so what works here works on Postgres too, and callers
never share mutable objects with the store. Thread-safe; not shared between processes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from engine.store._match import matches_filter, namespace_matches, query_score
from engine.store._ops import (
    SERDE,
    GetPlan,
    ListPlan,
    PutPlan,
    SearchPlan,
    prepare_ops,
)
from engine.store.base import BaseStore, Item, Op, Result, SearchItem, TTLConfig

__all__ = ("InMemoryStore",)

_TICK = timedelta(microseconds=1)


@dataclass(slots=True)
class _Record:
    value: dict[str, Any]
    """Encoded (tagged JSON) value, for filters; never handed out."""
    json: str
    """The value's JSON text: every read decodes a fresh copy from it."""
    text: str
    """Lower-cased JSON text of the value, for ``query``."""
    created_at: datetime
    updated_at: datetime
    ttl: float | None
    """Minutes."""
    expires_at: datetime | None

    def live(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now


class InMemoryStore(BaseStore):
    """Keeps items in a dict. Supports filters, term queries and TTLs (in minutes).

    Args:
        ttl: store-wide TTL behaviour (``default_ttl`` minutes, ``refresh_on_read``).

    Example::

        store = InMemoryStore()
        store.put(("users", "alice"), "prefs", {"food": "ramen"}, ttl=60)
        store.search(("users",), query="ramen")
    """

    supports_ttl = True

    def __init__(self, *, ttl: TTLConfig | None = None) -> None:
        self.ttl_config = ttl
        self._data: dict[tuple[str, ...], dict[str, _Record]] = {}
        self._lock = threading.RLock()
        self._last_write = datetime.min.replace(tzinfo=UTC)

    def __repr__(self) -> str:
        return f"InMemoryStore(namespaces={len(self._data)})"

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        with self._lock:
            results: list[Result] = []
            for plan in plans:
                now = datetime.now(UTC)
                if isinstance(plan, GetPlan):
                    results.append(self._get(plan, now))
                elif isinstance(plan, PutPlan):
                    self._put(plan, now)
                    results.append(None)
                elif isinstance(plan, SearchPlan):
                    results.append(self._search(plan, now))
                else:
                    results.append(self._list(plan, now))
            return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)

    def sweep_ttl(self) -> int:
        """Delete expired items; returns how many were deleted."""
        now = datetime.now(UTC)
        removed = 0
        with self._lock:
            for namespace in list(self._data):
                records = self._data[namespace]
                for key in [k for k, r in records.items() if not r.live(now)]:
                    del records[key]
                    removed += 1
                if not records:
                    del self._data[namespace]
        return removed

    async def asweep_ttl(self) -> int:
        return self.sweep_ttl()

    # -- operations --------------------------------------------------------------------

    def _get(self, plan: GetPlan, now: datetime) -> Item | None:
        record = self._data.get(plan.namespace, {}).get(plan.key)
        if record is None or not record.live(now):
            return None
        if plan.refresh_ttl:
            _refresh(record, now)
        return Item(
            value=SERDE.loads(record.json),
            key=plan.key,
            namespace=plan.namespace,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )

    def _put(self, plan: PutPlan, now: datetime) -> None:
        records = self._data.get(plan.namespace)
        if plan.value is None:
            if records is not None:
                records.pop(plan.key, None)
                if not records:
                    del self._data[plan.namespace]
            return
        # Strictly increasing write times: a later put is always "more recent".
        stamp = max(now, self._last_write + _TICK)
        self._last_write = stamp
        previous = records.get(plan.key) if records is not None else None
        created = previous.created_at if previous and previous.live(now) else stamp
        expires = stamp + timedelta(minutes=plan.ttl) if plan.ttl is not None else None
        record = _Record(
            plan.value, plan.text, plan.text.lower(), created, stamp, plan.ttl, expires
        )
        self._data.setdefault(plan.namespace, {})[plan.key] = record

    def _search(self, plan: SearchPlan, now: datetime) -> list[SearchItem]:
        if plan.terms == ():  # a query without words matches nothing
            return []
        size = len(plan.namespace_prefix)
        hits: list[tuple[float | None, tuple[str, ...], str, _Record]] = []
        for namespace, records in self._data.items():
            if namespace[:size] != plan.namespace_prefix:
                continue
            for key, record in records.items():
                if not record.live(now) or not matches_filter(
                    record.value, plan.conditions
                ):
                    continue
                score: float | None = None
                if plan.terms is not None:
                    score = query_score(record.text, plan.terms)
                    if score == 0.0:
                        continue
                hits.append((score, namespace, key, record))
        # Stable sorts: namespace text and key ascending, then best and newest first.
        hits.sort(key=lambda hit: (".".join(hit[1]), hit[2]))
        hits.sort(key=lambda hit: (hit[0] or 0.0, hit[3].updated_at), reverse=True)
        page = hits[plan.offset : plan.offset + plan.limit]
        items: list[SearchItem] = []
        for score, namespace, key, record in page:
            if plan.refresh_ttl:
                _refresh(record, now)
            items.append(
                SearchItem(
                    namespace,
                    key,
                    SERDE.loads(record.json),
                    record.created_at,
                    record.updated_at,
                    score,
                )
            )
        return items

    def _list(self, plan: ListPlan, now: datetime) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for namespace, records in self._data.items():
            if not any(record.live(now) for record in records.values()):
                continue
            if all(namespace_matches(namespace, c) for c in plan.conditions):
                depth = plan.max_depth
                found.add(namespace[:depth] if depth is not None else namespace)
        ordered = sorted(found)
        return ordered[plan.offset : plan.offset + plan.limit]


def _refresh(record: _Record, now: datetime) -> None:
    if record.ttl is not None:
        record.expires_at = now + timedelta(minutes=record.ttl)

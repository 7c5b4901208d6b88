"""InMemoryStore: long-term memory in process memory, stored as the SQL backend stores it.

For tests, notebooks and the embedded studio. Values are kept as tagged-JSON text
and decoded on every read, so what works here works on Postgres too, and callers
never share mutable objects with the store. Semantic search (``index=``) keeps each
item's field vectors next to it and compares a query with all of them (pure Python:
fine for thousands of items, not millions). Thread-safe; not shared between
processes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from engine.store._index import (
    BatchVectors,
    FieldVector,
    VectorIndex,
    aembed_batch,
    embed_batch,
)
from engine.store._match import namespace_matches
from engine.store._ops import (
    SERDE,
    GetPlan,
    ListPlan,
    Plan,
    PutPlan,
    SearchPlan,
    prepare_ops,
)
from engine.store._rank import Candidate, rank
from engine.store.base import (
    BaseStore,
    IndexConfig,
    Item,
    Op,
    Result,
    SearchItem,
    TTLConfig,
)

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
    vectors: list[FieldVector]
    """Field vectors for semantic search (empty without an index or index=False)."""

    def live(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now


class InMemoryStore(BaseStore):
    """Keeps items in a dict. Supports filters, queries and TTLs (in minutes).

    Args:
        index: semantic search settings (see :class:`~engine.store.base.IndexConfig`);
            without them ``query`` matches terms.
        ttl: store-wide TTL behaviour (``default_ttl`` minutes, ``refresh_on_read``).

    Example::

        store = InMemoryStore(index={"dims": 2, "embed": embed, "fields": ["text"]})
        store.put(("docs",), "d1", {"text": "ramen recipes"}, ttl=60)
        store.search(("docs",), query="noodle soup")
    """

    supports_ttl = True

    def __init__(
        self, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> None:
        self._index = VectorIndex(index) if index else None
        self.index_config = self._index.config if self._index else None
        self.embeddings = self._index.embeddings if self._index else None
        self.ttl_config = ttl
        self._data: dict[tuple[str, ...], dict[str, _Record]] = {}
        self._lock = threading.RLock()
        self._last_write = datetime.min.replace(tzinfo=UTC)

    def __repr__(self) -> str:
        return f"InMemoryStore(namespaces={len(self._data)})"

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        return self._apply(plans, embed_batch(self._index, plans))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plans = prepare_ops(ops)
        return self._apply(plans, await aembed_batch(self._index, plans))

    def _apply(self, plans: list[Plan], vectors: BatchVectors) -> list[Result]:
        with self._lock:
            results: list[Result] = []
            for position, plan in enumerate(plans):
                now = datetime.now(UTC)
                if isinstance(plan, GetPlan):
                    results.append(self._get(plan, now))
                elif isinstance(plan, PutPlan):
                    self._put(plan, now, vectors.fields.get(position, []))
                    results.append(None)
                elif isinstance(plan, SearchPlan):
                    query = vectors.queries.get(position)
                    results.append(self._search(plan, now, query))
                else:
                    results.append(self._list(plan, now))
            return results

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

    def _put(self, plan: PutPlan, now: datetime, vectors: list[FieldVector]) -> None:
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
            plan.value,
            plan.text,
            plan.text.lower(),
            created,
            stamp,
            plan.ttl,
            expires,
            vectors,
        )
        self._data.setdefault(plan.namespace, {})[plan.key] = record

    def _search(
        self, plan: SearchPlan, now: datetime, query: list[float] | None
    ) -> list[SearchItem]:
        size = len(plan.namespace_prefix)
        candidates = (
            Candidate(
                namespace,
                key,
                record.value,
                record.text,
                record.updated_at,
                [field.vector for field in record.vectors],
                record,
            )
            for namespace, records in self._data.items()
            if namespace[:size] == plan.namespace_prefix
            for key, record in records.items()
            if record.live(now)
        )
        items: list[SearchItem] = []
        for score, hit in rank(plan, candidates, self._index, query):
            record = hit.ref
            if plan.refresh_ttl:
                _refresh(record, now)
            items.append(
                SearchItem(
                    hit.namespace,
                    hit.key,
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

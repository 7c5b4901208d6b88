"""Search ranking for stores that evaluate in Python (memory, SQLite).

One function decides which candidates match a :class:`SearchPlan` and in what order,
as the Postgres store's SQL does: filters first; then, with a query, the similarity
of the best field vector (stores with an index; items without vectors follow with
score ``None``) or the fraction of query terms found (stores without one; items
with none are dropped); ties and query-less searches go newest first, then by
namespace and key. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from engine.store._index import VectorIndex, norm, similarity, unit
from engine.store._match import matches_filter, query_score
from engine.store._ops import SearchPlan

__all__ = ("Candidate", "rank")

T = TypeVar("T")


@dataclass(slots=True)
class Candidate(Generic[T]):
    """An item a search may return; ``ref`` is the backend's own record of it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    """Encoded (tagged JSON) value, for filters."""
    text: str
    """Lower-cased JSON text of the value, for term queries."""
    updated_at: datetime
    vectors: Sequence[Sequence[float]]
    ref: T


def rank(
    plan: SearchPlan,
    candidates: Iterable[Candidate[T]],
    index: VectorIndex | None,
    query_vector: Sequence[float] | None,
) -> list[tuple[float | None, Candidate[T]]]:
    """The page of ``(score, candidate)`` pairs the plan asks for, in order."""
    semantic = index is not None and query_vector is not None
    if not semantic and plan.terms == ():  # a term query without words
        return []
    hits: list[tuple[float | None, Candidate[T]]] = []
    for candidate in candidates:
        if not matches_filter(candidate.value, plan.conditions):
            continue
        score: float | None = None
        if index is not None and query_vector is not None:
            score = _best(index, query_vector, candidate.vectors)
        elif plan.terms is not None:
            score = query_score(candidate.text, plan.terms)
            if score == 0.0:
                continue
        hits.append((score, candidate))
    # Stable sorts: namespace text and key ascending, then best and newest first.
    hits.sort(key=lambda hit: (".".join(hit[1].namespace), hit[1].key))
    hits.sort(
        key=lambda hit: (hit[0] is not None, hit[0] or 0.0, hit[1].updated_at),
        reverse=True,
    )
    return hits[plan.offset : plan.offset + plan.limit]


def _best(
    index: VectorIndex,
    query: Sequence[float],
    vectors: Sequence[Sequence[float]],
) -> float | None:
    if not vectors:
        return None
    target = unit(query) if index.distance_type == "cosine" else query
    return max(
        similarity(target, vector, norm(vector), index.distance_type)
        for vector in vectors
    )

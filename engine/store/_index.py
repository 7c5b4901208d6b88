"""Semantic search for every store: the validated index settings and the embedding step.

A store with ``index=`` builds a :class:`VectorIndex`. Before a batch touches storage,
:func:`embed_batch` (or :func:`aembed_batch`) embeds, in one call, the field texts
of every put and, once per distinct text, every search query. Backends then store
the field vectors and rank with :func:`similarity`, all with the same formulas, so
memory, SQLite and Postgres agree. Without an index nothing is embedded and
``query`` stays a term match.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast, get_args

from engine.store._ops import Plan, PutPlan, SearchPlan
from engine.store.base import (
    Embeddings,
    IndexConfig,
    InvalidStoreInputError,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)
from engine.store.base._types import DistanceType

__all__ = (
    "BatchVectors",
    "FieldVector",
    "VectorIndex",
    "aembed_batch",
    "embed_batch",
    "norm",
    "similarity",
    "unit",
)

_KEYS = frozenset(IndexConfig.__annotations__)
_DISTANCES: tuple[str, ...] = get_args(DistanceType)


class FieldVector(NamedTuple):
    field: str
    """The path that selected the text; ``"path.i"`` for the i-th of several."""
    vector: list[float]


class BatchVectors(NamedTuple):
    """The vectors of one batch, by the position of their plan in it."""

    fields: dict[int, list[FieldVector]]
    """Put position -> the item's new field vectors (absent: no index)."""
    queries: dict[int, list[float]]
    """Search position -> the query's vector (absent: no index or no query)."""


NO_VECTORS = BatchVectors({}, {})


class VectorIndex:
    """An ``index=`` config, checked once, with its :class:`Embeddings`.

    Raises (on construction):
        InvalidStoreInputError: an unknown key, ``dims`` not a positive integer,
            ``fields`` not a list of paths, or an unknown ``distance_type``.
        ValueError, TypeError: ``embed`` is missing or unusable
            (see ``ensure_embeddings``).
    """

    __slots__ = ("config", "dims", "distance_type", "embeddings", "fields")

    def __init__(self, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise InvalidStoreInputError(
                f"index must be a dict such as {{'dims': 1536, 'embed': ...}}, "
                f"got {type(config).__name__}."
            )
        unknown = sorted(set(config) - _KEYS)
        if unknown:
            raise InvalidStoreInputError(
                f"Unknown index settings {unknown}: use {sorted(_KEYS)}."
            )
        dims = config.get("dims")
        if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
            raise InvalidStoreInputError(
                f"index['dims'] must be a positive integer (the length of the "
                f"embedding vectors), got {dims!r}."
            )
        distance = config.get("distance_type", "cosine")
        if distance not in _DISTANCES:
            raise InvalidStoreInputError(
                f"index['distance_type'] must be one of {list(_DISTANCES)}, got {distance!r}."
            )
        self.config = cast("IndexConfig", dict(config))
        self.dims: int = dims
        self.distance_type = cast("DistanceType", distance)
        self.fields = _fields(config.get("fields"))
        self.embeddings: Embeddings = ensure_embeddings(config.get("embed"))

    def __repr__(self) -> str:
        return f"VectorIndex(dims={self.dims}, fields={list(self.fields)})"

    def field_texts(self, plan: PutPlan) -> list[tuple[str, str]]:
        """``(field, text)`` pairs to embed for a put (none for deletes, index=False)."""
        if plan.value is None or plan.index is False:
            return []
        paths = self.fields if plan.index is None else plan.index
        pairs: list[tuple[str, str]] = []
        for path in paths:
            texts = get_text_at_path(plan.value, path)
            if len(texts) == 1:
                pairs.append((path, texts[0]))
            else:
                pairs.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
        return pairs

    def checked(self, vectors: object, count: int) -> list[list[float]]:
        """The embedding function's answer for ``count`` texts, checked and as floats."""
        if not isinstance(vectors, Sequence) or len(vectors) != count:
            got = (
                len(vectors)
                if isinstance(vectors, Sequence)
                else type(vectors).__name__
            )
            raise ValueError(
                f"The embedding function returned {got} vectors for {count} texts."
            )
        return [self._vector(vector) for vector in vectors]

    def _vector(self, vector: object) -> list[float]:
        if not isinstance(vector, Sequence) or isinstance(vector, (str, bytes)):
            raise ValueError(
                f"The embedding function returned {type(vector).__name__}, not a "
                "list of floats."
            )
        if len(vector) != self.dims:
            raise ValueError(
                f"The embedding function returned a vector of {len(vector)} "
                f"dimensions; the store's index has dims={self.dims}."
            )
        floats = [float(x) for x in vector]
        if not all(math.isfinite(x) for x in floats):
            raise ValueError("The embedding function returned a non-finite number.")
        return floats


def _fields(fields: object) -> tuple[str, ...]:
    if fields is None:
        return ("$",)
    if isinstance(fields, str):
        return (fields,)
    if isinstance(fields, (list, tuple)) and all(isinstance(f, str) for f in fields):
        for path in fields:
            tokenize_path(path)
        return tuple(fields) or ("$",)
    raise InvalidStoreInputError(
        f"index['fields'] must be a list of paths such as ['text', 'items[*].title'], "
        f"got {fields!r}."
    )


# -- the embedding step of a batch ---------------------------------------------------------


class _Work(NamedTuple):
    owners: list[tuple[int, str]]
    """(put position, field) for each text, in order."""
    texts: list[str]
    queries: dict[int, str]


def _work(index: VectorIndex, plans: Sequence[Plan]) -> _Work:
    owners: list[tuple[int, str]] = []
    texts: list[str] = []
    queries: dict[int, str] = {}
    for position, plan in enumerate(plans):
        if isinstance(plan, PutPlan) and plan.value is not None:
            for field, text in index.field_texts(plan):
                owners.append((position, field))
                texts.append(text)
        elif isinstance(plan, SearchPlan) and plan.query is not None:
            queries[position] = plan.query
    return _Work(owners, texts, queries)


def _assemble(
    index: VectorIndex,
    plans: Sequence[Plan],
    work: _Work,
    documents: list[list[float]],
    by_query: Mapping[str, list[float]],
) -> BatchVectors:
    fields: dict[int, list[FieldVector]] = {
        position: []
        for position, plan in enumerate(plans)
        if isinstance(plan, PutPlan) and plan.value is not None
    }
    for (position, field), vector in zip(work.owners, documents, strict=True):
        fields[position].append(FieldVector(field, vector))
    queries = {position: by_query[text] for position, text in work.queries.items()}
    return BatchVectors(fields, queries)


def embed_batch(index: VectorIndex | None, plans: Sequence[Plan]) -> BatchVectors:
    """Embed a batch's put texts (one call) and distinct queries."""
    if index is None:
        return NO_VECTORS
    work = _work(index, plans)
    distinct = _distinct(work.texts)
    documents: list[list[float]] = []
    if distinct:
        answer = index.embeddings.embed_documents(distinct)
        documents = _spread(work.texts, distinct, index.checked(answer, len(distinct)))
    by_query = {
        text: index.checked([index.embeddings.embed_query(text)], 1)[0]
        for text in dict.fromkeys(work.queries.values())
    }
    return _assemble(index, plans, work, documents, by_query)


async def aembed_batch(
    index: VectorIndex | None, plans: Sequence[Plan]
) -> BatchVectors:
    """Async twin of :func:`embed_batch` (queries are embedded concurrently)."""
    if index is None:
        return NO_VECTORS
    work = _work(index, plans)
    distinct = _distinct(work.texts)
    documents: list[list[float]] = []
    if distinct:
        answer = await index.embeddings.aembed_documents(distinct)
        documents = _spread(work.texts, distinct, index.checked(answer, len(distinct)))
    texts = list(dict.fromkeys(work.queries.values()))
    answers = await asyncio.gather(*(index.embeddings.aembed_query(t) for t in texts))
    by_query = {
        text: index.checked([vector], 1)[0]
        for text, vector in zip(texts, answers, strict=True)
    }
    return _assemble(index, plans, work, documents, by_query)


def _distinct(texts: list[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def _spread(
    texts: list[str], distinct: list[str], vectors: list[list[float]]
) -> list[list[float]]:
    by_text = dict(zip(distinct, vectors, strict=True))
    return [by_text[text] for text in texts]


# -- scoring --------------------------------------------------------------------------------


def norm(vector: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def unit(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (the zero vector stays zero)."""
    length = norm(vector)
    return [x / length for x in vector] if length else [0.0] * len(vector)


def similarity(
    query: Sequence[float],
    vector: Sequence[float],
    vector_norm: float,
    distance_type: DistanceType,
) -> float:
    """How close ``vector`` is to ``query``: larger is closer.

    For ``"cosine"`` pass the query as :func:`unit` made it: the score is then
    ``dot / |vector|`` (0 for a zero vector), what the Postgres store computes.
    """
    if distance_type == "l2":
        return -math.sqrt(sum((a - b) ** 2 for a, b in zip(vector, query, strict=True)))
    dot = sum(a * b for a, b in zip(vector, query, strict=True))
    if distance_type == "inner_product":
        return dot
    return dot / vector_norm if vector_norm else 0.0

"""The store's data types: items, operations, configuration, errors and namespace checks.

Re-exported from ``engine.store.base``, whose docstring describes the contract;
``BaseStore`` and ``ScopedStore`` are defined there.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypedDict

from engine.store.base.embed import (
    AEmbeddingsFunc,
    Embeddings,
    EmbeddingsFunc,
)

__all__ = (
    "DistanceType",
    "GetOp",
    "IndexConfig",
    "InvalidNamespaceError",
    "InvalidStoreInputError",
    "Item",
    "ListNamespacesOp",
    "MatchCondition",
    "NOT_PROVIDED",
    "NamespaceMatchType",
    "NamespacePath",
    "NotProvided",
    "Op",
    "PutOp",
    "Result",
    "SearchItem",
    "SearchOp",
    "TTLConfig",
    "WILDCARD",
    "validate_namespace_labels",
    "validate_op_namespace",
)

NamespacePath = tuple[str, ...]
"""A namespace (or a pattern for one): labels from the root, e.g. ``("users", "alice")``."""

NamespaceMatchType = Literal["prefix", "suffix"]
"""How a :class:`MatchCondition` path is compared with a namespace."""

WILDCARD = "*"
"""Matches any one label in a :class:`MatchCondition` path (never in ``search``)."""


class NotProvided:
    """Sentinel for "argument not given" where ``None`` means something (``ttl=None``)."""

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "NOT_PROVIDED"


NOT_PROVIDED = NotProvided()


class InvalidStoreInputError(ValueError):
    """An argument to a store operation is invalid: key, value, filter, limit, ttl..."""


class InvalidNamespaceError(InvalidStoreInputError):
    """A namespace (or tenant prefix) is empty or has an empty, non-string or dotted label."""


class TTLConfig(TypedDict, total=False):
    """Store-wide TTL behaviour, given to a store's constructor as ``ttl=``."""

    refresh_on_read: bool
    """Whether ``get``/``search`` push an item's expiry back by its TTL (default True)."""
    default_ttl: float | None
    """Minutes an item lives when ``put`` is called without ``ttl=`` (default: forever)."""
    sweep_interval_minutes: int | None
    """Minutes between sweeps of the sweeper ``start_ttl_sweeper()`` starts (default 5)."""


DistanceType = Literal["cosine", "l2", "inner_product"]
"""How query and field vectors are compared; the score is larger for closer vectors."""


class IndexConfig(TypedDict, total=False):
    """Semantic search settings, given to a store's constructor as ``index=``.

    Example::

        InMemoryStore(index={"dims": 256, "embed": my_embed, "fields": ["text"]})
    """

    dims: int
    """Length of every embedding vector (e.g. 1536 for text-embedding-3-small)."""
    embed: Embeddings | EmbeddingsFunc | AEmbeddingsFunc | str
    """What makes the vectors: an ``Embeddings`` object (LangChain's work), a function
    ``texts -> vectors`` (sync or async) or a ``"provider:model"`` string (needs
    ``langchain``). See ``engine.store.base.embed``."""
    fields: list[str] | None
    """Paths of the text to embed in each value (default ``["$"]``: the whole value
    as JSON). Each selected text gets its own vector, so ``"items[*].text"`` embeds
    every item; an item scores by its best vector. ``put(..., index=[...])``
    overrides this per item, ``index=False`` embeds nothing."""
    distance_type: DistanceType
    """``"cosine"`` (default): cosine similarity; ``"inner_product"``: dot product;
    ``"l2"``: minus the Euclidean distance."""
    ann_index_config: dict[str, Any]
    """Accepted for LangGraph's Postgres store and ignored: searches are exact
    (every vector under the namespace prefix is compared), never approximate."""


class Item:
    """A stored document with its address and timestamps.

    Args:
        value: the stored data; top-level keys are what ``filter=`` matches.
        key: unique identifier within the namespace.
        namespace: the hierarchical path holding the item.
        created_at: when the item was first put (UTC).
        updated_at: when the item was last put (UTC).
    """

    __slots__ = ("created_at", "key", "namespace", "updated_at", "value")

    def __init__(
        self,
        *,
        value: builtins.dict[str, Any],
        key: str,
        namespace: tuple[str, ...],
        created_at: datetime | str,
        updated_at: datetime | str,
    ) -> None:
        self.value = value
        self.key = key
        self.namespace = tuple(namespace)
        self.created_at = _as_datetime(created_at)
        self.updated_at = _as_datetime(updated_at)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Item):
            return NotImplemented
        return (
            self.value == other.value
            and self.key == other.key
            and self.namespace == other.namespace
            and self.created_at == other.created_at
            and self.updated_at == other.updated_at
        )

    def __hash__(self) -> int:
        return hash((self.namespace, self.key))

    def dict(self) -> builtins.dict[str, Any]:
        """A JSON-friendly dict (timestamps as ISO 8601 strings)."""
        return {
            "namespace": list(self.namespace),
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.dict().items())
        return f"{type(self).__name__}({fields})"


class SearchItem(Item):
    """An item returned by ``search``, with its relevance ``score``.

    ``score`` is ``None`` for searches without ``query``. With a query it is the
    similarity of the item's best field to the query on a store with an index
    (``None`` for items stored without vectors), otherwise the fraction of the
    query's distinct terms found in the item (``0 < score <= 1``).
    """

    __slots__ = ("score",)

    def __init__(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: builtins.dict[str, Any],
        created_at: datetime | str,
        updated_at: datetime | str,
        score: float | None = None,
    ) -> None:
        super().__init__(
            value=value,
            key=key,
            namespace=namespace,
            created_at=created_at,
            updated_at=updated_at,
        )
        self.score = score

    def dict(self) -> builtins.dict[str, Any]:
        result = super().dict()
        result["score"] = self.score
        return result


def _as_datetime(value: datetime | str) -> datetime:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


# -- operations ------------------------------------------------------------------------


class GetOp(NamedTuple):
    """Read one item by namespace and key."""

    namespace: tuple[str, ...]
    """The item's namespace."""
    key: str
    """The item's key."""
    refresh_ttl: bool = True
    """Push the item's expiry back by its TTL (items without a TTL are unaffected)."""


class SearchOp(NamedTuple):
    """Find items under a namespace prefix, optionally filtered and ranked by a query."""

    namespace_prefix: tuple[str, ...]
    """Literal leading labels of the namespaces to search; ``()`` searches everything."""
    filter: dict[str, Any] | None = None
    """Top-level value key -> exact value, or ``{"$op": operand}`` with ``$eq``,
    ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``; all conditions must hold."""
    limit: int = 10
    """Maximum number of items returned."""
    offset: int = 0
    """Number of matching items skipped first."""
    query: str | None = None
    """Text to rank by: semantic similarity on a store with an index, otherwise
    words to look for (case-insensitive) in the JSON text of values."""
    refresh_ttl: bool = True
    """Push the returned items' expiry back by their TTL."""


class MatchCondition(NamedTuple):
    """A namespace pattern for ``list_namespaces``: ``"*"`` labels match any one label."""

    match_type: NamespaceMatchType
    """``"prefix"``: the namespace starts with ``path``; ``"suffix"``: it ends with it."""
    path: NamespacePath
    """Labels to compare, possibly with ``"*"`` wildcards."""


class ListNamespacesOp(NamedTuple):
    """List the distinct namespaces that hold live items, sorted label by label."""

    match_conditions: tuple[MatchCondition, ...] | None = None
    """Conditions that must all hold."""
    max_depth: int | None = None
    """Truncate namespaces to this many labels (then de-duplicate)."""
    limit: int = 100
    """Maximum number of namespaces returned."""
    offset: int = 0
    """Number of namespaces skipped first."""


class PutOp(NamedTuple):
    """Create or replace an item, or delete it (``value=None``)."""

    namespace: tuple[str, ...]
    """The item's namespace; must have at least one label."""
    key: str
    """The item's key: a non-empty string."""
    value: Mapping[str, Any] | None
    """A dict with string keys whose values the tagged-JSON serializer can store,
    or ``None`` to delete the item."""
    index: Literal[False] | list[str] | None = None  # type: ignore[assignment]
    """What to embed on a store with an index: ``None``, the store's ``fields``;
    a list of paths, those; ``False``, nothing (the item is then found by queries
    only after the embedded ones, with score ``None``). Ignored without an index."""
    ttl: float | None = None
    """Minutes until the item expires (pushed back on reads); ``None``: never."""


Op = GetOp | SearchOp | PutOp | ListNamespacesOp
Result = Item | list[Item] | list[SearchItem] | list[tuple[str, ...]] | None


def validate_op_namespace(op: Op) -> None:
    """Check the namespace labels an op carries, as a store executing it would.

    For ops handed straight to ``batch``: the store methods check namespaces
    already. Labels are checked, not lengths (an empty namespace passes here).

    Raises:
        InvalidNamespaceError: a label is not a string, is empty, or contains
            ``"."`` or NUL.
    """
    if isinstance(op, (GetOp, PutOp)):
        validate_namespace_labels(op.namespace, allow_empty=True)
    elif isinstance(op, SearchOp):
        validate_namespace_labels(
            op.namespace_prefix, what="namespace prefix", allow_empty=True
        )
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            validate_namespace_labels(
                condition.path, what=f"{condition.match_type} path", allow_empty=True
            )


def validate_namespace_labels(
    namespace: Sequence[str], *, what: str = "namespace", allow_empty: bool = False
) -> tuple[str, ...]:
    """Check a namespace's shape and labels; return it as a tuple.

    Args:
        namespace: the labels, as a tuple (or list).
        what: how to call it in error messages ("namespace prefix", "tenant prefix").
        allow_empty: accept ``()`` (a search or listing over everything).

    Raises:
        InvalidNamespaceError: not a tuple/list of strings, empty when not allowed, or
            a label that is empty or contains ``"."`` or a NUL character.
    """
    if isinstance(namespace, str) or not isinstance(namespace, (tuple, list)):
        raise InvalidNamespaceError(
            f"A {what} must be a tuple of strings such as ('users', 'alice'), "
            f"got {type(namespace).__name__} {namespace!r}."
        )
    labels = tuple(namespace)
    if not labels and not allow_empty:
        raise InvalidNamespaceError(
            f"A {what} cannot be empty: give at least one label, e.g. ('memories',)."
        )
    for label in labels:
        if not isinstance(label, str):
            raise InvalidNamespaceError(
                f"Invalid label {label!r} in {what} {labels!r}: labels must be strings, "
                f"got {type(label).__name__}."
            )
        if not label:
            raise InvalidNamespaceError(
                f"Invalid {what} {labels!r}: labels cannot be empty strings."
            )
        if "." in label:
            raise InvalidNamespaceError(
                f"Invalid label {label!r} in {what} {labels!r}: labels cannot contain '.' "
                "(it separates labels in storage). Use separate labels instead."
            )
        if "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid label {label!r} in {what} {labels!r}: labels cannot contain NUL."
            )
    return labels


# -- the contract ----------------------------------------------------------------------

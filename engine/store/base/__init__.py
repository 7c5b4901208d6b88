"""The long-term memory store contract: items, operations, ``BaseStore`` and tenant views.

A store keeps JSON documents (``dict`` values) under a hierarchical *namespace* (a
tuple of string labels such as ``("users", "alice", "memories")``) and a *key*. Items
outlive threads and runs: nodes read them through the runtime and ``get_store()``.
Names and signatures follow ``langgraph.store.base``, so ``langgraph.store.X`` ports to
``engine.store.X`` by a rename. Storage only: nothing here imports the runtime.
This module defines ``BaseStore`` and ``ScopedStore``; the data types (items,
operations, configuration, errors) are in ``_types`` and re-exported here.

Values go through the tagged-JSON serializer (``engine.checkpoint.serde.jsonplus``), so
datetimes, UUIDs, tuples, pydantic models and dataclasses *inside* a value load back as
the same types; anything else is refused when it is put, never pickled. Filters compare
the stored JSON form. TTLs are given in **minutes**, as in LangGraph.

Semantic search. A store made with ``index=IndexConfig(dims=..., embed=...,
fields=[...])`` embeds the chosen fields of every value it is given (see
``engine.store.base.embed`` for what ``embed`` may be and ``get_text_at_path`` for
the field paths) and ranks ``search(..., query=...)`` by the similarity of the query's
embedding to the best-matching field. Without an index, ``query`` is a
case-insensitive term match over the JSON text of values (see
:meth:`BaseStore.search`); LangGraph ignores ``query`` there.

Tenant isolation. ``store.scoped("acme")`` returns a :class:`ScopedStore`, a view that
prepends the tenant prefix to every namespace on the way in and strips it on the way
out. Through a view:

* every get, put, delete and search addresses namespaces under the prefix. There is no
  way to name one outside it: labels cannot be empty or contain ``"."``, there is no
  "parent" label, and the prefix is always prepended;
* ``search(())`` and ``list_namespaces()`` without a prefix see only the tenant's
  namespaces; ``suffix=`` and ``max_depth=`` apply to the tenant-relative namespace;
* results carry tenant-relative namespaces, so tenant code never learns the prefix;
* a tenant prefix may not contain the ``list_namespaces`` wildcard ``"*"``.

The rule for callers: give each tenant (user, organisation) its own view and never hand
the unscoped store to tenant code. The view is a guard against mistakes (a forgotten
``user_id`` in a namespace), not a sandbox against hostile code running in the same
process, which can always reach the underlying store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from engine.store.base._paths import get_text_at_path, tokenize_path
from engine.store.base._types import (
    NOT_PROVIDED,
    WILDCARD,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    InvalidStoreInputError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NamespaceMatchType,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_namespace_labels,
    validate_op_namespace,
)
from engine.store.base.embed import (
    Embeddings,
    ensure_embeddings,
)

__all__ = (
    "NOT_PROVIDED",
    "BaseStore",
    "Embeddings",
    "GetOp",
    "IndexConfig",
    "InvalidNamespaceError",
    "InvalidStoreInputError",
    "Item",
    "ListNamespacesOp",
    "MatchCondition",
    "NamespaceMatchType",
    "NamespacePath",
    "NotProvided",
    "Op",
    "PutOp",
    "Result",
    "ScopedStore",
    "SearchItem",
    "SearchOp",
    "TTLConfig",
    "ensure_embeddings",
    "get_text_at_path",
    "tokenize_path",
    "validate_namespace_labels",
    "validate_op_namespace",
)


class BaseStore(ABC):
    """Storage contract shared by the memory, SQLite and Postgres stores.

    Backends implement :meth:`batch` and :meth:`abatch`; every other method builds
    operations and calls them. Stores with semantic search set ``index_config``
    (the ``index=`` they were given) and ``embeddings``. Ops in one batch run in order, each seeing the effects
    of the ones before it. Every backend must pass ``tests/conformance/store``.

    Example::

        store = InMemoryStore()
        store.put(("users", "alice"), "prefs", {"food": "ramen", "spicy": 3})
        store.get(("users", "alice"), "prefs").value  # {"food": "ramen", "spicy": 3}
        store.search(("users",), filter={"spicy": {"$gte": 2}}, query="ramen")
    """

    supports_ttl: bool = False
    """Whether ``put(..., ttl=...)`` is honoured."""
    ttl_config: TTLConfig | None = None
    """Store-wide TTL defaults (see :class:`TTLConfig`)."""
    index_config: IndexConfig | None = None
    """The semantic search settings (``None``: ``query`` matches terms)."""
    embeddings: Embeddings | None = None
    """What embeds values and queries, made from ``index_config["embed"]``."""

    __slots__ = ("__weakref__",)

    @abstractmethod
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order; one result per op (``None`` for puts).

        Raises:
            InvalidStoreInputError: an op is invalid; nothing in the batch was applied.
            SerializationError: a value cannot be stored; nothing was applied.
        """

    @abstractmethod
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch`."""

    # -- sync API ----------------------------------------------------------------------

    def get(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
    ) -> Item | None:
        """The item at ``namespace``/``key``, or ``None`` (missing or expired).

        Args:
            namespace: the item's namespace.
            key: the item's key.
            refresh_ttl: push the expiry back by the item's TTL; ``None`` uses the
                store's ``refresh_on_read`` (default True).

        Raises:
            InvalidNamespaceError: the namespace is empty or has an invalid label.
            InvalidStoreInputError: the key is not a non-empty string.
        """
        op = GetOp(namespace, key, self._refresh(refresh_ttl))
        return cast("Item | None", self.batch([op])[0])

    def search(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Items whose namespace starts with ``namespace_prefix``.

        Args:
            namespace_prefix: literal leading labels (no wildcards); ``()`` for all.
            query: on a store with an index, text whose embedding ranks the
                items: the best similarity among an item's embedded fields is its
                ``score``; items without vectors (``index=False``) follow, with score
                ``None``. Without an index: words looked for, case-insensitively, as
                substrings of the stored JSON text of each value (keys included, and
                the type tags of non-JSON values such as ``"tuple"``); items
                containing none of the words are left out and ``score`` is the
                fraction of distinct words found. (Non-ASCII case folding on
                Postgres follows the database's locale.) ``None`` or ``""``: no
                ranking.
            filter: top-level value key -> required value. A value compares equal
                to the stored JSON (``1 == 1.0``; ``True != 1``). Use
                ``{"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": operand}`` for operators;
                order operators take a number or a string and match only stored
                values of the same kind (strings compare by code point). ``$ne``
                also matches items without the key.
            limit: maximum number of items (``>= 0``).
            offset: items to skip (``>= 0``).
            refresh_ttl: as in :meth:`get`, for the returned items.

        Returns:
            Items ordered by score (best first, when ``query`` is given; ``None``
            last), then most recently updated first, then namespace and key.

        Raises:
            InvalidNamespaceError: a prefix label is invalid.
            InvalidStoreInputError: bad filter, operator, limit or offset.
        """
        op = SearchOp(
            namespace_prefix, filter, limit, offset, query, self._refresh(refresh_ttl)
        )
        return cast("list[SearchItem]", self.batch([op])[0])

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        """Create or replace an item.

        Args:
            namespace: at least one label; labels are non-empty and contain no ``"."``.
            key: a non-empty string.
            value: a dict with string keys (``"__t"`` is reserved). Nested values may
                be anything the tagged-JSON serializer stores (datetimes, UUIDs,
                tuples, pydantic models, dataclasses...); they load back as such.
            index: on a store with an index, the paths to embed (default: the
                store's ``fields``), or ``False`` to embed nothing. Ignored otherwise.
            ttl: **minutes** until the item expires; reads push the expiry back
                (see :class:`TTLConfig`). ``None``: never. Not given: the store's
                ``default_ttl``.

        Raises:
            InvalidNamespaceError: the namespace is empty or has an invalid label.
            InvalidStoreInputError: bad key, a value that is not a dict, or a bad ttl.
            SerializationError: part of the value cannot be stored (the message names
                the field).
        """
        resolved = self._ttl(ttl)
        self.batch([PutOp(namespace, key, value, index, resolved)])

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Delete an item; deleting a missing item does nothing."""
        self.batch([PutOp(namespace, key, None)])

    def list_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Distinct namespaces holding live items, sorted label by label.

        Args:
            prefix: namespaces starting with these labels (``"*"`` matches any label).
            suffix: namespaces ending with these labels (``"*"`` matches any label).
            max_depth: truncate to this many labels, then de-duplicate (``>= 1``).
            limit: maximum number of namespaces (``>= 0``).
            offset: namespaces to skip (``>= 0``).

        Example::

            # namespaces: ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "c", "f")
            store.list_namespaces(prefix=("a", "b"), max_depth=3)
            # [("a", "b", "c"), ("a", "b", "d")]
        """
        return cast(
            "list[tuple[str, ...]]",
            self.batch([_list_op(prefix, suffix, max_depth, limit, offset)])[0],
        )

    def sweep_ttl(self) -> int:
        """Delete expired items now; returns how many were deleted."""
        raise NotImplementedError(f"{type(self).__name__} does not sweep expired items")

    def scoped(self, *prefix: str) -> ScopedStore:
        """A view confined to the namespaces under ``prefix`` (one tenant).

        Example::

            acme = store.scoped("tenants", "acme")
            acme.put(("users", "bob"), "k", {"v": 1})  # stored at tenants.acme.users.bob
            acme.list_namespaces()                      # [("users", "bob")]

        Raises:
            InvalidNamespaceError: the prefix is empty, has an invalid label or a
                ``"*"`` label.
        """
        return ScopedStore(self, prefix)

    # -- async API ---------------------------------------------------------------------

    async def _arun_one(self, op: Op) -> Result:
        """Run one operation (the async methods all come here; a batching store
        queues it with others instead)."""
        return (await self.abatch([op]))[0]

    async def aget(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
    ) -> Item | None:
        """Async twin of :meth:`get`."""
        op = GetOp(namespace, key, self._refresh(refresh_ttl))
        return cast("Item | None", await self._arun_one(op))

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Async twin of :meth:`search`."""
        op = SearchOp(
            namespace_prefix, filter, limit, offset, query, self._refresh(refresh_ttl)
        )
        return cast("list[SearchItem]", await self._arun_one(op))

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        """Async twin of :meth:`put` (``ttl`` in minutes)."""
        await self._arun_one(PutOp(namespace, key, value, index, self._ttl(ttl)))

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """Async twin of :meth:`delete`."""
        await self._arun_one(PutOp(namespace, key, None))

    async def alist_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Async twin of :meth:`list_namespaces`."""
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        return cast("list[tuple[str, ...]]", await self._arun_one(op))

    async def asweep_ttl(self) -> int:
        """Async twin of :meth:`sweep_ttl`."""
        raise NotImplementedError(f"{type(self).__name__} does not sweep expired items")

    # -- helpers -----------------------------------------------------------------------

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is not None:
            return refresh_ttl
        return (self.ttl_config or {}).get("refresh_on_read", True)

    def _ttl(self, ttl: float | None | NotProvided) -> float | None:
        if isinstance(ttl, NotProvided):
            return (self.ttl_config or {}).get("default_ttl")
        if ttl is not None and not self.supports_ttl:
            raise NotImplementedError(
                f"TTL is not supported by {type(self).__name__}; pass ttl=None."
            )
        return ttl


def _list_op(
    prefix: NamespacePath | None,
    suffix: NamespacePath | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> ListNamespacesOp:
    conditions: list[MatchCondition] = []
    if prefix:
        conditions.append(MatchCondition("prefix", prefix))
    if suffix:
        conditions.append(MatchCondition("suffix", suffix))
    return ListNamespacesOp(tuple(conditions), max_depth, limit, offset)


# -- tenant views ----------------------------------------------------------------------


class ScopedStore(BaseStore):
    """A view of a store confined to one namespace prefix (see the module docstring).

    Made by :meth:`BaseStore.scoped`. Namespaces given to the view are relative to
    the prefix; namespaces it returns are relative too. Scoping a view nests the
    prefixes. ``sweep_ttl`` is not available through a view: sweeping is an
    operator's job on the underlying store.
    """

    def __init__(self, store: BaseStore, prefix: Sequence[str]) -> None:
        labels = validate_namespace_labels(prefix, what="tenant prefix")
        if WILDCARD in labels:
            raise InvalidNamespaceError(
                f"Invalid tenant prefix {labels!r}: the label '*' is a wildcard in "
                "list_namespaces and would match other tenants."
            )
        if isinstance(store, ScopedStore):
            labels = store._prefix + labels
            store = store._store
        self._store: BaseStore = store
        self._prefix: tuple[str, ...] = labels
        self.supports_ttl = store.supports_ttl
        self.ttl_config = store.ttl_config
        self.index_config = store.index_config
        self.embeddings = store.embeddings

    @property
    def prefix(self) -> tuple[str, ...]:
        """The labels prepended to every namespace."""
        return self._prefix

    def __repr__(self) -> str:
        return f"ScopedStore({self._store!r}, prefix={self._prefix!r})"

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        inner = [self._inward(op) for op in ops]
        results = self._store.batch(inner)
        return [self._outward(result) for result in results]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        inner = [self._inward(op) for op in ops]
        results = await self._store.abatch(inner)
        return [self._outward(result) for result in results]

    def scoped(self, *prefix: str) -> ScopedStore:
        return ScopedStore(self, prefix)

    # -- the two directions --------------------------------------------------------------

    def _inward(self, op: Op) -> Op:
        if isinstance(op, GetOp):
            return op._replace(namespace=self._prefix + self._relative(op.namespace))
        if isinstance(op, PutOp):
            return op._replace(namespace=self._prefix + self._relative(op.namespace))
        if isinstance(op, SearchOp):
            relative = validate_namespace_labels(
                op.namespace_prefix, what="namespace prefix", allow_empty=True
            )
            return op._replace(namespace_prefix=self._prefix + relative)
        if isinstance(op, ListNamespacesOp):
            return self._inward_list(op)
        raise InvalidStoreInputError(f"Unknown store operation {op!r}.")

    def _relative(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        return validate_namespace_labels(namespace)

    def _inward_list(self, op: ListNamespacesOp) -> ListNamespacesOp:
        # Every condition is anchored under the prefix. A suffix must match the
        # tenant-relative namespace, so require at least len(suffix) labels after
        # the prefix: otherwise ("x", "*") could match the prefix's own labels.
        conditions: list[MatchCondition] = []
        min_relative = 0
        for condition in op.match_conditions or ():
            if not isinstance(condition, MatchCondition):
                raise InvalidStoreInputError(
                    f"match_conditions must hold MatchCondition values, got {condition!r}."
                )
            path = validate_namespace_labels(
                condition.path, what=f"{condition.match_type} path", allow_empty=True
            )
            if condition.match_type == "prefix":
                conditions.append(MatchCondition("prefix", self._prefix + path))
            elif condition.match_type == "suffix":
                conditions.append(MatchCondition("suffix", path))
                min_relative = max(min_relative, len(path))
            else:
                raise InvalidStoreInputError(
                    f"Unknown match_type {condition.match_type!r}: use 'prefix' or 'suffix'."
                )
        anchor = self._prefix + (WILDCARD,) * min_relative
        conditions.insert(0, MatchCondition("prefix", anchor))
        max_depth = op.max_depth
        if isinstance(max_depth, int) and not isinstance(max_depth, bool):
            if max_depth < 1:
                raise InvalidStoreInputError(
                    f"max_depth must be >= 1, got {max_depth}."
                )
            max_depth += len(self._prefix)
        return op._replace(match_conditions=tuple(conditions), max_depth=max_depth)

    def _outward(self, result: Result) -> Result:
        if result is None:
            return None
        if isinstance(result, Item):
            return self._strip_item(result)
        return cast(
            "Result",
            [
                self._strip_item(entry)
                if isinstance(entry, Item)
                else self._strip(entry)
                for entry in result
            ],
        )

    def _strip(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        size = len(self._prefix)
        if namespace[:size] != self._prefix or len(namespace) <= size:
            raise RuntimeError(  # a backend bug, never a caller's mistake
                f"{type(self._store).__name__} returned namespace {namespace!r} outside "
                f"the tenant prefix {self._prefix!r}."
            )
        return namespace[size:]

    def _strip_item(self, item: Item) -> Item:
        namespace = self._strip(item.namespace)
        if isinstance(item, SearchItem):
            return SearchItem(
                namespace,
                item.key,
                item.value,
                item.created_at,
                item.updated_at,
                item.score,
            )
        return Item(
            value=item.value,
            key=item.key,
            namespace=namespace,
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

"""Long-term memory stores: namespaced JSON documents shared across threads.

The contract and the in-memory store are re-exported here; the SQLite and Postgres
stores live in ``engine.store.sqlite`` and ``engine.store.postgres`` (as LangGraph's
do). Semantic search (``index=``) is described in ``engine.store.base``. Tenant isolation
by namespace prefix is described in ``engine.store.base``.
"""

from __future__ import annotations

from engine.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
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
    ScopedStore,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from engine.store.memory import InMemoryStore

__all__ = (
    "NOT_PROVIDED",
    "BaseStore",
    "GetOp",
    "InMemoryStore",
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
)

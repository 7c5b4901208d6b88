"""list_namespaces: prefix, suffix, wildcards, max_depth, paging and order."""

from __future__ import annotations

import pytest

from engine.store.base import (
    BaseStore,
    InvalidNamespaceError,
    InvalidStoreInputError,
    ListNamespacesOp,
    MatchCondition,
)

NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "alice", "memories"),
    ("users", "bob", "memories"),
    ("users", "bob", "prefs"),
]


@pytest.fixture
def tree(store: BaseStore) -> BaseStore:
    for namespace in reversed(NAMESPACES):
        store.put(namespace, "k", {"v": 1})
    return store


def test_lists_every_namespace_sorted_label_by_label(tree: BaseStore) -> None:
    assert tree.list_namespaces() == NAMESPACES


def test_sorting_compares_labels_not_dotted_text(store: BaseStore) -> None:
    for namespace in [("a-",), ("a", "z"), ("a",), ("B",)]:
        store.put(namespace, "k", {})

    assert store.list_namespaces() == [("B",), ("a",), ("a", "z"), ("a-",)]


def test_prefix_filter(tree: BaseStore) -> None:
    assert tree.list_namespaces(prefix=("a", "b")) == NAMESPACES[:4]
    assert tree.list_namespaces(prefix=("a", "b", "c")) == [("a", "b", "c")]
    assert tree.list_namespaces(prefix=("users",)) == NAMESPACES[6:]
    assert tree.list_namespaces(prefix=("user",)) == []


def test_suffix_filter(tree: BaseStore) -> None:
    assert tree.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert tree.list_namespaces(suffix=("bob", "memories")) == [
        ("users", "bob", "memories")
    ]
    assert tree.list_namespaces(suffix=("x", "a", "b", "c")) == []


def test_prefix_and_suffix_together(tree: BaseStore) -> None:
    assert tree.list_namespaces(prefix=("a",), suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]


def test_wildcards_match_any_one_label(tree: BaseStore) -> None:
    assert tree.list_namespaces(prefix=("users", "*", "memories")) == [
        ("users", "alice", "memories"),
        ("users", "bob", "memories"),
    ]
    assert tree.list_namespaces(prefix=("*", "b")) == NAMESPACES[:4]
    assert tree.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert tree.list_namespaces(suffix=("b", "*")) == [("a", "b", "c"), ("a", "b", "f")]
    assert tree.list_namespaces(prefix=("*", "*", "*", "*")) == [
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
    ]


def test_max_depth_truncates_and_deduplicates(tree: BaseStore) -> None:
    assert tree.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert tree.list_namespaces(max_depth=1) == [("a",), ("b",), ("users",)]
    assert tree.list_namespaces(max_depth=10) == NAMESPACES


def test_limit_and_offset(tree: BaseStore) -> None:
    assert tree.list_namespaces(limit=2) == NAMESPACES[:2]
    assert tree.list_namespaces(limit=3, offset=2) == NAMESPACES[2:5]
    assert tree.list_namespaces(offset=100) == []
    assert tree.list_namespaces(max_depth=1, limit=1, offset=1) == [("b",)]


def test_default_limit_is_one_hundred(store: BaseStore) -> None:
    for n in range(105):
        store.put(("n", f"{n:03}"), "k", {})

    assert len(store.list_namespaces()) == 100


def test_a_namespace_disappears_with_its_last_item(tree: BaseStore) -> None:
    tree.put(("users", "bob", "prefs"), "other", {})
    tree.delete(("users", "bob", "prefs"), "k")
    assert ("users", "bob", "prefs") in tree.list_namespaces()

    tree.delete(("users", "bob", "prefs"), "other")
    assert ("users", "bob", "prefs") not in tree.list_namespaces()


def test_labels_with_pattern_characters_are_literal(store: BaseStore) -> None:
    for namespace in [
        ("a_", "x"),
        ("ab", "x"),
        ("a%", "x"),
        ("a%b", "x"),
        ("a\\", "x"),
    ]:
        store.put(namespace, "k", {})

    assert store.list_namespaces(prefix=("a_",)) == [("a_", "x")]
    assert store.list_namespaces(prefix=("a%",)) == [("a%", "x")]
    assert store.list_namespaces(prefix=("a\\",)) == [("a\\", "x")]
    assert store.list_namespaces(prefix=("a_", "*")) == [("a_", "x")]


def test_batch_accepts_match_conditions(tree: BaseStore) -> None:
    op = ListNamespacesOp(
        match_conditions=(
            MatchCondition("prefix", ("users",)),
            MatchCondition("suffix", ("memories",)),
        ),
        max_depth=2,
    )

    assert tree.batch([op]) == [[("users", "alice"), ("users", "bob")]]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_depth": 0}, InvalidStoreInputError, "max_depth must be an integer >= 1"),
        ({"max_depth": "2"}, InvalidStoreInputError, "max_depth"),
        ({"limit": -1}, InvalidStoreInputError, "limit must be an integer >= 0"),
        ({"offset": -5}, InvalidStoreInputError, "offset must be an integer >= 0"),
        ({"prefix": ("a.b",)}, InvalidNamespaceError, "cannot contain '.'"),
        ({"suffix": ("",)}, InvalidNamespaceError, "cannot be empty"),
        ({"prefix": "users"}, InvalidNamespaceError, "tuple of strings"),
    ],
)
def test_bad_arguments_are_rejected(
    tree: BaseStore, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        tree.list_namespaces(**kwargs)  # type: ignore[arg-type]


def test_bad_match_conditions_are_rejected(tree: BaseStore) -> None:
    with pytest.raises(InvalidStoreInputError, match="match_type"):
        tree.batch([ListNamespacesOp((MatchCondition("infix", ("a",)),))])  # type: ignore[arg-type]
    with pytest.raises(InvalidStoreInputError, match="MatchCondition"):
        tree.batch([ListNamespacesOp((("prefix", ("a",)),))])  # type: ignore[arg-type]

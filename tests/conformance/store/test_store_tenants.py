"""Tenant isolation through ``store.scoped(...)``: no tenant can see, list, search or
change another's data, and attempts to step outside the prefix fail clearly."""

from __future__ import annotations

import pytest

from engine.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    ScopedStore,
    SearchOp,
)


@pytest.fixture
def tenants(store: BaseStore) -> tuple[BaseStore, BaseStore]:
    """Two tenants that wrote the same relative namespaces and keys."""
    acme, globex = store.scoped("tenants", "acme"), store.scoped("tenants", "globex")
    for tenant, name in [(acme, "acme"), (globex, "globex")]:
        tenant.put(
            ("users", "alice"), "prefs", {"owner": name, "food": f"{name} ramen"}
        )
        tenant.put(("users", "bob"), "prefs", {"owner": name, "food": "pizza"})
        tenant.put(("docs",), "readme", {"owner": name, "text": "hello"})
    globex.put(("secret",), "plan", {"owner": "globex", "text": "world domination"})
    return acme, globex


def test_each_tenant_reads_its_own_items(tenants: tuple[BaseStore, BaseStore]) -> None:
    acme, globex = tenants

    acme_item = acme.get(("users", "alice"), "prefs")
    globex_item = globex.get(("users", "alice"), "prefs")

    assert acme_item is not None and acme_item.value["owner"] == "acme"
    assert globex_item is not None and globex_item.value["owner"] == "globex"
    assert acme_item.namespace == ("users", "alice")  # relative: the prefix never shows
    assert acme.get(("secret",), "plan") is None


def test_search_sees_only_the_tenant(tenants: tuple[BaseStore, BaseStore]) -> None:
    acme, _ = tenants

    everything = acme.search((), limit=100)
    assert {item.value["owner"] for item in everything} == {"acme"}
    assert {item.namespace for item in everything} == {
        ("users", "alice"),
        ("users", "bob"),
        ("docs",),
    }
    assert acme.search((), query="domination globex") == []
    assert acme.search((), filter={"owner": "globex"}) == []
    assert [i.value["food"] for i in acme.search(("users",), query="ramen")] == [
        "acme ramen"
    ]


def test_list_namespaces_sees_only_the_tenant(
    tenants: tuple[BaseStore, BaseStore],
) -> None:
    acme, globex = tenants

    assert acme.list_namespaces() == [("docs",), ("users", "alice"), ("users", "bob")]
    assert globex.list_namespaces() == [
        ("docs",),
        ("secret",),
        ("users", "alice"),
        ("users", "bob"),
    ]
    assert acme.list_namespaces(max_depth=1) == [("docs",), ("users",)]
    assert acme.list_namespaces(prefix=("*",)) == [
        ("docs",),
        ("users", "alice"),
        ("users", "bob"),
    ]
    assert acme.list_namespaces(suffix=("secret",)) == []


def test_suffixes_cannot_match_the_tenant_prefix(
    tenants: tuple[BaseStore, BaseStore],
) -> None:
    acme, _ = tenants

    # ("acme", "docs") is how the full namespace ends, but the tenant-relative one is ("docs",).
    assert acme.list_namespaces(suffix=("acme", "docs")) == []
    assert acme.list_namespaces(suffix=("*", "docs")) == []
    assert acme.list_namespaces(suffix=("*", "*", "docs")) == []
    assert acme.list_namespaces(suffix=("*", "bob")) == [("users", "bob")]


def test_writes_and_deletes_stay_in_the_tenant(
    store: BaseStore, tenants: tuple[BaseStore, BaseStore]
) -> None:
    acme, globex = tenants

    acme.delete(("users", "alice"), "prefs")
    acme.put(("docs",), "readme", {"owner": "acme", "text": "changed"})

    assert acme.get(("users", "alice"), "prefs") is None
    assert globex.get(("users", "alice"), "prefs") is not None
    globex_readme = globex.get(("docs",), "readme")
    assert globex_readme is not None and globex_readme.value["text"] == "hello"
    assert store.get(("tenants", "acme", "docs"), "readme") is not None


def test_the_underlying_store_sees_full_namespaces(
    store: BaseStore, tenants: tuple[BaseStore, BaseStore]
) -> None:
    assert store.list_namespaces(max_depth=2) == [
        ("tenants", "acme"),
        ("tenants", "globex"),
    ]
    assert ("tenants", "globex", "secret") in store.list_namespaces()


def test_naming_another_tenant_lands_inside_your_own(
    tenants: tuple[BaseStore, BaseStore],
) -> None:
    acme, _ = tenants

    assert acme.get(("tenants", "globex", "secret"), "plan") is None
    assert acme.search(("tenants", "globex")) == []
    assert acme.list_namespaces(prefix=("tenants",)) == []

    acme.put(("tenants", "globex", "secret"), "plan", {"owner": "acme"})
    assert acme.list_namespaces(prefix=("tenants",)) == [
        ("tenants", "globex", "secret")
    ]


@pytest.mark.parametrize(
    "namespace",
    [("..", "globex"), (".", "x"), ("", "x"), ("acme.globex",), ()],
)
def test_escape_attempts_are_invalid_namespaces(
    tenants: tuple[BaseStore, BaseStore], namespace: tuple[str, ...]
) -> None:
    acme, _ = tenants

    with pytest.raises(InvalidNamespaceError):
        acme.put(namespace, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        acme.get(namespace, "k")


def test_search_and_listing_reject_dotted_prefixes(
    tenants: tuple[BaseStore, BaseStore],
) -> None:
    acme, _ = tenants

    with pytest.raises(InvalidNamespaceError, match="cannot contain '.'"):
        acme.search(("..",))
    with pytest.raises(InvalidNamespaceError, match="cannot contain '.'"):
        acme.list_namespaces(prefix=("..",))
    with pytest.raises(InvalidNamespaceError, match="cannot contain '.'"):
        acme.list_namespaces(suffix=("globex.secret",))


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ((), "cannot be empty"),
        (("*",), "wildcard"),
        (("tenants", "*"), "wildcard"),
        (("a.b",), "cannot contain '.'"),
        (("",), "cannot be empty strings"),
        ((1,), "must be strings"),
    ],
)
def test_bad_tenant_prefixes_are_rejected(
    store: BaseStore, prefix: tuple[object, ...], message: str
) -> None:
    with pytest.raises(InvalidNamespaceError, match=message):
        store.scoped(*prefix)  # type: ignore[arg-type]


def test_tenant_prefixes_with_pattern_characters_stay_isolated(
    store: BaseStore,
) -> None:
    underscore, letter, percent = (
        store.scoped("t_"),
        store.scoped("tx"),
        store.scoped("t%"),
    )
    underscore.put(("d",), "k", {"who": "underscore"})
    letter.put(("d",), "k", {"who": "letter"})
    percent.put(("d",), "k", {"who": "percent"})

    assert [i.value["who"] for i in underscore.search(())] == ["underscore"]
    assert [i.value["who"] for i in percent.search(())] == ["percent"]
    assert underscore.list_namespaces() == [("d",)]
    assert percent.list_namespaces(prefix=("*",)) == [("d",)]


def test_scoping_a_view_nests_the_prefix(store: BaseStore) -> None:
    acme = store.scoped("tenants", "acme")
    alice = acme.scoped("users", "alice")
    alice.put(("memories",), "m1", {"text": "likes tea"})

    assert isinstance(alice, ScopedStore)
    assert alice.prefix == ("tenants", "acme", "users", "alice")
    assert alice.list_namespaces() == [("memories",)]
    assert acme.list_namespaces() == [("users", "alice", "memories")]
    item = acme.get(("users", "alice", "memories"), "m1")
    assert item is not None and item.namespace == ("users", "alice", "memories")


def test_batch_through_a_view_is_rewritten_both_ways(
    tenants: tuple[BaseStore, BaseStore],
) -> None:
    acme, _ = tenants

    results = acme.batch(
        [
            PutOp(("new",), "k", {"v": 1}),
            GetOp(("new",), "k"),
            SearchOp(("new",)),
            ListNamespacesOp((MatchCondition("prefix", ("new",)),)),
        ]
    )

    assert results[1] is not None and results[1].namespace == ("new",)  # type: ignore[union-attr]
    assert [item.namespace for item in results[2]] == [("new",)]  # type: ignore[union-attr]
    assert results[3] == [("new",)]


def test_views_share_ttl_support(store: BaseStore) -> None:
    view = store.scoped("t")

    assert view.supports_ttl == store.supports_ttl
    view.put(("d",), "k", {"v": 1}, ttl=5)
    assert view.get(("d",), "k") is not None

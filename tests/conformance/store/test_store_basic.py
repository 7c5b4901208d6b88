"""put / get / delete / batch, value round trips, and bad input, on every store."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import uuid

import pytest
from pydantic import BaseModel

from engine.errors import SerializationError
from engine.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    InvalidStoreInputError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)


class Color(enum.Enum):
    RED = "red"


class Profile(BaseModel):
    name: str
    tags: list[str] = []


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_put_then_get_returns_the_item(store: BaseStore) -> None:
    before = dt.datetime.now(dt.UTC)
    store.put(("users", "alice"), "prefs", {"food": "ramen", "spicy": 3})

    item = store.get(("users", "alice"), "prefs")

    assert isinstance(item, Item)
    assert item.namespace == ("users", "alice")
    assert item.key == "prefs"
    assert item.value == {"food": "ramen", "spicy": 3}
    assert item.created_at == item.updated_at
    assert item.created_at.tzinfo is not None
    assert (
        before - dt.timedelta(seconds=5)
        < item.created_at
        < before + dt.timedelta(seconds=5)
    )


def test_get_missing_item_is_none(store: BaseStore) -> None:
    store.put(("users", "alice"), "prefs", {"a": 1})

    assert store.get(("users", "alice"), "other") is None
    assert store.get(("users", "bob"), "prefs") is None
    assert store.get(("users",), "prefs") is None


def test_put_replaces_value_and_keeps_created_at(store: BaseStore) -> None:
    store.put(("docs",), "d1", {"v": 1, "old": True})
    first = store.get(("docs",), "d1")
    store.put(("docs",), "d1", {"v": 2})
    second = store.get(("docs",), "d1")

    assert first is not None and second is not None
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at


def test_same_key_in_different_namespaces_is_a_different_item(store: BaseStore) -> None:
    store.put(("a",), "k", {"v": "a"})
    store.put(("a", "b"), "k", {"v": "ab"})
    store.put(("b",), "k", {"v": "b"})

    items = [store.get(ns, "k") for ns in [("a",), ("a", "b"), ("b",)]]
    assert [item.value["v"] if item else None for item in items] == ["a", "ab", "b"]


def test_delete_removes_the_item_and_missing_delete_is_a_no_op(
    store: BaseStore,
) -> None:
    store.put(("docs",), "d1", {"v": 1})
    store.put(("docs",), "d2", {"v": 2})

    store.delete(("docs",), "d1")
    store.delete(("docs",), "never-existed")
    store.delete(("nowhere",), "d1")

    assert store.get(("docs",), "d1") is None
    assert store.get(("docs",), "d2") is not None


def test_values_round_trip_rich_types(store: BaseStore) -> None:
    value = {
        "when": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC),
        "day": dt.date(2024, 5, 1),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "price": decimal.Decimal("9.99"),
        "pair": (1, "two"),
        "tags": {"x", "y"},
        "raw": b"\x00\x01",
        "color": Color.RED,
        "profile": Profile(name="Alice", tags=["vip"]),
        "point": Point(1, 2),
        "by_int": {1: "one", 2: "two"},
        "nested": {"list": [1, 2.5, None, True, "s"], "unicode": "café ☕"},
        "big": 2**70,
        "nan": float("inf"),
    }
    store.put(("rich",), "k", value)

    item = store.get(("rich",), "k")

    assert item is not None
    assert item.value == value
    assert type(item.value["profile"]) is Profile
    assert type(item.value["pair"]) is tuple
    assert type(item.value["point"]) is Point


def test_returned_values_are_copies(store: BaseStore) -> None:
    value = {"list": [1, 2], "nested": {"a": 1}}
    store.put(("docs",), "d", value)
    value["list"].append(3)

    item = store.get(("docs",), "d")
    assert item is not None
    item.value["nested"]["a"] = 99

    again = store.get(("docs",), "d")
    assert again is not None
    assert again.value == {"list": [1, 2], "nested": {"a": 1}}


def test_namespace_may_be_given_as_a_list(store: BaseStore) -> None:
    store.put(["users", "alice"], "k", {"v": 1})  # type: ignore[arg-type]

    item = store.get(("users", "alice"), "k")
    assert item is not None and item.namespace == ("users", "alice")


def test_index_argument_is_ignored_without_an_index(store: BaseStore) -> None:
    store.put(("docs",), "a", {"text": "hello"}, index=False)
    store.put(("docs",), "b", {"text": "hello"}, index=["text"])

    assert {i.key for i in store.search(("docs",), query="hello")} == {"a", "b"}


def test_batch_runs_ops_in_order_with_one_result_each(store: BaseStore) -> None:
    results = store.batch(
        [
            PutOp(("docs",), "a", {"n": 1}),
            GetOp(("docs",), "a"),
            PutOp(("docs",), "a", {"n": 2}),
            GetOp(("docs",), "a"),
            SearchOp(("docs",)),
            ListNamespacesOp(),
            PutOp(("docs",), "a", None),
            GetOp(("docs",), "a"),
        ]
    )

    assert results[0] is None
    assert isinstance(results[1], Item) and results[1].value == {"n": 1}
    assert isinstance(results[3], Item) and results[3].value == {"n": 2}
    assert [i.key for i in results[4]] == ["a"]  # type: ignore[union-attr]
    assert results[5] == [("docs",)]
    assert results[6] is None
    assert results[7] is None
    assert store.batch([]) == []


def test_invalid_op_in_a_batch_applies_nothing(store: BaseStore) -> None:
    with pytest.raises(InvalidStoreInputError):
        store.batch([PutOp(("docs",), "ok", {"v": 1}), PutOp(("docs",), "", {"v": 2})])
    with pytest.raises(SerializationError):
        store.batch(
            [PutOp(("docs",), "ok", {"v": 1}), PutOp(("docs",), "k", {"v": object()})]
        )

    assert store.get(("docs",), "ok") is None


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ((), "cannot be empty"),
        (("users", ""), "cannot be empty strings"),
        (("users.alice",), "cannot contain '.'"),
        (("..", "other"), "cannot contain '.'"),
        (("users", 1), "labels must be strings"),
        ("users", "must be a tuple of strings"),
        (None, "must be a tuple of strings"),
        (("a\x00b",), "NUL"),
    ],
)
def test_put_rejects_bad_namespaces(
    store: BaseStore, namespace: object, message: str
) -> None:
    with pytest.raises(InvalidNamespaceError, match=message):
        store.put(namespace, "k", {"v": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError, match=message):
        store.get(namespace, "k")  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError, match=message):
        store.delete(namespace, "k")  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["", None, 3, ("a",), "a\x00"])
def test_bad_keys_are_rejected(store: BaseStore, key: object) -> None:
    with pytest.raises(InvalidStoreInputError, match="keys"):
        store.put(("docs",), key, {"v": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidStoreInputError, match="keys"):
        store.get(("docs",), key)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1, 2], "must be dicts; got list"),
        ("text", "must be dicts; got str"),
        (Profile(name="a"), "model_dump"),
        ({1: "x"}, "must be strings"),
        ({"__t": "tuple"}, "reserved"),
        ({"s": "a\x00b"}, "NUL"),
    ],
)
def test_bad_values_are_rejected(store: BaseStore, value: object, message: str) -> None:
    with pytest.raises(InvalidStoreInputError, match=message):
        store.put(("docs",), "k", value)  # type: ignore[arg-type]

    assert store.get(("docs",), "k") is None


def test_unserializable_value_names_the_field(store: BaseStore) -> None:
    with pytest.raises(SerializationError, match="field 'handle'.*'k'"):
        store.put(("docs",), "k", {"ok": 1, "handle": object()})


@pytest.mark.parametrize("index", ["text", True, [1]])
def test_bad_index_argument_is_rejected(store: BaseStore, index: object) -> None:
    with pytest.raises(InvalidStoreInputError, match="index"):
        store.put(("docs",), "k", {"v": 1}, index=index)  # type: ignore[arg-type]


def test_item_dict_is_json_friendly(store: BaseStore) -> None:
    store.put(("docs",), "k", {"v": 1})
    item = store.get(("docs",), "k")

    assert item is not None
    data = item.dict()
    assert data["namespace"] == ["docs"]
    assert data["key"] == "k"
    assert data["value"] == {"v": 1}
    assert dt.datetime.fromisoformat(data["created_at"]) == item.created_at

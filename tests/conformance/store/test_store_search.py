"""search: namespace prefixes, filters and operators, term queries, paging and order."""

from __future__ import annotations

import datetime as dt

import pytest

from engine.store.base import BaseStore, InvalidStoreInputError, SearchItem


def keys(items: list[SearchItem]) -> list[str]:
    return [item.key for item in items]


@pytest.fixture
def fruit(store: BaseStore) -> BaseStore:
    """Five items written in this order (so the newest is "e")."""
    store.put(
        ("food", "fruit"),
        "a",
        {"name": "Apple", "price": 3, "color": "red", "ripe": True},
    )
    store.put(
        ("food", "fruit"), "b", {"name": "Banana", "price": 1.5, "color": "yellow"}
    )
    store.put(
        ("food", "fruit", "exotic"), "c", {"name": "Mango", "price": 7, "ripe": False}
    )
    store.put(
        ("food", "veg"), "d", {"name": "Red pepper", "price": "n/a", "color": "red"}
    )
    store.put(("drinks",), "e", {"name": "Apple juice", "price": 2, "ripe": 1})
    return store


# -- prefixes ------------------------------------------------------------------------------


def test_search_covers_the_prefix_and_everything_below(fruit: BaseStore) -> None:
    assert sorted(keys(fruit.search(("food", "fruit")))) == ["a", "b", "c"]
    assert sorted(keys(fruit.search(("food",)))) == ["a", "b", "c", "d"]
    assert keys(fruit.search(("food", "fruit", "exotic"))) == ["c"]
    assert keys(fruit.search(("food", "fr"))) == []
    assert keys(fruit.search(("nothing",))) == []


def test_empty_prefix_searches_everything_newest_first(fruit: BaseStore) -> None:
    items = fruit.search(())

    assert keys(items) == ["e", "d", "c", "b", "a"]
    assert all(item.score is None for item in items)
    assert items[0].namespace == ("drinks",)


def test_prefix_labels_are_literal_not_patterns(store: BaseStore) -> None:
    store.put(("a_",), "1", {})
    store.put(("ab",), "2", {})
    store.put(("a%",), "3", {})
    store.put(("a%b",), "4", {})
    store.put(("a\\",), "5", {})
    store.put(("a\\b",), "6", {})
    store.put(("*",), "7", {})
    store.put(("x",), "8", {})

    assert keys(store.search(("a_",))) == ["1"]
    assert keys(store.search(("a%",))) == ["3"]
    assert keys(store.search(("a\\",))) == ["5"]
    assert keys(store.search(("*",))) == ["7"]


# -- filters -------------------------------------------------------------------------------


def test_filter_matches_top_level_values_exactly(fruit: BaseStore) -> None:
    assert sorted(keys(fruit.search((), filter={"color": "red"}))) == ["a", "d"]
    assert keys(fruit.search((), filter={"color": "red", "price": 3})) == ["a"]
    assert keys(fruit.search((), filter={"color": "Red"})) == []
    assert keys(fruit.search((), filter={"missing": "x"})) == []


def test_filter_numbers_compare_by_value_and_bools_are_not_numbers(
    fruit: BaseStore,
) -> None:
    assert keys(fruit.search((), filter={"price": 3.0})) == ["a"]
    assert keys(fruit.search((), filter={"ripe": True})) == ["a"]
    assert keys(fruit.search((), filter={"ripe": 1})) == ["e"]
    assert keys(fruit.search((), filter={"ripe": False})) == ["c"]


def test_filter_null_matches_only_a_stored_null(store: BaseStore) -> None:
    store.put(("d",), "null", {"v": None})
    store.put(("d",), "missing", {})

    assert keys(store.search((), filter={"v": None})) == ["null"]


def test_filter_nested_objects_and_lists_match_exactly(store: BaseStore) -> None:
    store.put(("d",), "1", {"meta": {"a": 1, "b": [1, 2]}})
    store.put(("d",), "2", {"meta": {"a": 1}})

    assert keys(store.search((), filter={"meta": {"b": [1, 2], "a": 1}})) == ["1"]
    assert keys(store.search((), filter={"meta": {"a": 1}})) == ["2"]
    assert keys(store.search((), filter={"meta": {"a": 1, "b": [2, 1]}})) == []


def test_filter_on_rich_values_uses_their_stored_form(store: BaseStore) -> None:
    when = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    store.put(("d",), "1", {"when": when, "pair": (1, 2)})
    store.put(("d",), "2", {"when": when + dt.timedelta(days=1), "pair": [1, 2]})

    assert keys(store.search((), filter={"when": when})) == ["1"]
    assert keys(store.search((), filter={"pair": (1, 2)})) == ["1"]
    assert keys(store.search((), filter={"pair": [1, 2]})) == ["2"]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"$gt": 2}, ["a", "c"]),
        ({"$gte": 2}, ["a", "c", "e"]),
        ({"$lt": 3}, ["b", "e"]),
        ({"$lte": 3}, ["a", "b", "e"]),
        ({"$gt": 1.5, "$lt": 7}, ["a", "e"]),
        ({"$eq": 3}, ["a"]),
        ({"$ne": 3}, ["b", "c", "d", "e"]),
        ({"$gte": "n"}, ["d"]),
        ({"$lt": "n"}, []),
    ],
)
def test_filter_operators(
    fruit: BaseStore, condition: dict[str, object], expected: list[str]
) -> None:
    assert sorted(keys(fruit.search((), filter={"price": condition}))) == expected


def test_order_operators_on_strings_compare_by_code_point(store: BaseStore) -> None:
    for word in ["apple", "Banana", "cherry", "Éclair"]:
        store.put(("w",), word, {"w": word})

    assert sorted(keys(store.search((), filter={"w": {"$gt": "a"}}))) == [
        "apple",
        "cherry",
        "Éclair",
    ]
    assert keys(store.search((), filter={"w": {"$lt": "a"}})) == ["Banana"]
    assert keys(store.search((), filter={"w": {"$gte": "z"}})) == ["Éclair"]


def test_ne_matches_items_without_the_key(fruit: BaseStore) -> None:
    assert sorted(keys(fruit.search((), filter={"color": {"$ne": "red"}}))) == [
        "b",
        "c",
        "e",
    ]


@pytest.mark.parametrize(
    ("filter", "message"),
    [
        ({"price": {"$in": [1, 2]}}, "unknown operator '\\$in'"),
        ({"price": {"$gt": 1, "other": 2}}, "mixed with operators"),
        ({"price": {"$gt": [1]}}, "finite number or a string"),
        ({"price": {"$gt": True}}, "finite number or a string"),
        ({"price": {"$lt": None}}, "finite number or a string"),
        ({"price": {"$lt": float("nan")}}, "finite number or a string"),
        ({"": 1}, "non-empty strings"),
        ({1: 1}, "non-empty strings"),
        ([("price", 1)], "must be a dict"),
    ],
)
def test_bad_filters_are_rejected(
    fruit: BaseStore, filter: object, message: str
) -> None:
    with pytest.raises(InvalidStoreInputError, match=message):
        fruit.search((), filter=filter)  # type: ignore[arg-type]


# -- queries -------------------------------------------------------------------------------


def test_query_matches_words_case_insensitively_and_excludes_the_rest(
    fruit: BaseStore,
) -> None:
    items = fruit.search((), query="APPLE")

    assert sorted(keys(items)) == ["a", "e"]
    assert all(item.score == 1.0 for item in items)


def test_query_scores_by_fraction_of_words_found_then_newest_first(
    fruit: BaseStore,
) -> None:
    items = fruit.search((), query="red apple juice")

    # e: apple + juice (2/3), newer than a: apple + red (2/3); d: red (1/3)
    assert [(i.key, round(i.score or 0, 4)) for i in items] == [
        ("e", 0.6667),
        ("a", 0.6667),
        ("d", 0.3333),
    ]


def test_query_combines_with_prefix_and_filter(fruit: BaseStore) -> None:
    assert keys(fruit.search(("food",), query="red", filter={"price": {"$gt": 0}})) == [
        "a"
    ]


def test_query_matches_inside_words_and_the_json_text(store: BaseStore) -> None:
    store.put(("d",), "1", {"text": "Unbelievable"})
    store.put(("d",), "2", {"title": "other"})

    assert keys(store.search((), query="BELIEV")) == ["1"]
    assert keys(store.search((), query="title")) == ["2"]


def test_query_repeated_words_count_once(fruit: BaseStore) -> None:
    items = fruit.search((), query="apple apple mango")

    assert {i.key: round(i.score or 0, 4) for i in items} == {
        "a": 0.5,
        "e": 0.5,
        "c": 0.5,
    }


def test_query_without_words_matches_nothing_and_empty_query_is_no_query(
    fruit: BaseStore,
) -> None:
    assert fruit.search((), query="?!") == []
    assert len(fruit.search((), query="")) == 5


def test_query_must_be_a_string(fruit: BaseStore) -> None:
    with pytest.raises(InvalidStoreInputError, match="query must be a string"):
        fruit.search((), query=["apple"])  # type: ignore[arg-type]


def test_query_underscore_and_percent_are_not_wildcards(store: BaseStore) -> None:
    store.put(("d",), "1", {"t": "snake_case"})
    store.put(("d",), "2", {"t": "snakeXcase"})

    assert keys(store.search((), query="snake_case")) == ["1"]


# -- paging and order ----------------------------------------------------------------------


def test_limit_and_offset_page_through_results(fruit: BaseStore) -> None:
    assert keys(fruit.search((), limit=2)) == ["e", "d"]
    assert keys(fruit.search((), limit=2, offset=2)) == ["c", "b"]
    assert keys(fruit.search((), limit=2, offset=4)) == ["a"]
    assert keys(fruit.search((), offset=10)) == []
    assert keys(fruit.search((), limit=0)) == []


def test_default_limit_is_ten(store: BaseStore) -> None:
    for n in range(12):
        store.put(("d",), f"k{n:02}", {"n": n})

    assert len(store.search(("d",))) == 10


def test_updating_an_item_moves_it_to_the_front(fruit: BaseStore) -> None:
    fruit.put(("food", "fruit"), "a", {"name": "Apple", "price": 4})

    assert keys(fruit.search(())) == ["a", "e", "d", "c", "b"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": -1}, "limit must be an integer >= 0"),
        ({"offset": -1}, "offset must be an integer >= 0"),
        ({"limit": 1.5}, "limit must be an integer"),
        ({"limit": True}, "limit must be an integer"),
        ({"offset": "1"}, "offset must be an integer"),
    ],
)
def test_bad_paging_is_rejected(
    fruit: BaseStore, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidStoreInputError, match=message):
        fruit.search((), **kwargs)  # type: ignore[arg-type]


def test_search_rejects_bad_prefix_labels(fruit: BaseStore) -> None:
    with pytest.raises(InvalidStoreInputError, match="cannot contain '.'"):
        fruit.search(("food.fruit",))
    with pytest.raises(InvalidStoreInputError, match="tuple of strings"):
        fruit.search("food")  # type: ignore[arg-type]


def test_search_items_carry_values_and_timestamps(fruit: BaseStore) -> None:
    (item,) = fruit.search(("food", "fruit", "exotic"))
    got = fruit.get(("food", "fruit", "exotic"), "c")

    assert got is not None
    assert item.value == got.value == {"name": "Mango", "price": 7, "ripe": False}
    assert (item.created_at, item.updated_at) == (got.created_at, got.updated_at)
    assert item.dict()["score"] is None

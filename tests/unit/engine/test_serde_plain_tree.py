"""The serializer's level-at-a-time check for large plain values.

``is_plain_tree`` lets a long list or dict skip the node-by-node walk; these
tests hold that it says yes only for what the walk would leave unchanged, so
the stored bytes are the same whichever path runs.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.checkpoint.serde.jsonplus as jsonplus
from engine.checkpoint.serde._plain_tree import MIN_ITEMS, is_plain_tree
from engine.checkpoint.serde.jsonplus import (
    _PLAIN,
    SMALL_ITEMS,
    TAG,
    JsonPlusSerializer,
    _Encoder,
    _small_plain,
)
from tests._support.serde_values import Color, Name, records, traced_peak, tree, walked


def test_records_of_plain_values_are_plain() -> None:
    assert is_plain_tree(records(), _PLAIN, TAG)
    assert is_plain_tree(
        {f"k{i}": [i, None, True, 1.5] for i in range(40)}, _PLAIN, TAG
    )


@pytest.mark.parametrize(
    "extra",
    [
        (1, 2),  # a tuple loads back as a tuple
        Color.RED,
        uuid.UUID(int=7),
        float("nan"),
        float("inf"),
        b"bytes",
        {1: "a non-str key"},
        {TAG: "looks like a tag"},
        Name("a str subclass"),
        {Name("a str subclass key"): 1},
        {"deep": [{"deeper": {"x"}}]},
    ],
    ids=repr,
)
def test_anything_the_walk_would_tag_is_not_plain(extra: Any) -> None:
    assert not is_plain_tree(records(extra), _PLAIN, TAG)


def test_a_dict_that_once_held_a_non_str_key_is_judged_by_the_keys_it_holds() -> None:
    # Such a dict keeps a table that hands its keys back with its values.
    mixed: dict[Any, Any] = {1: "gone", "kept": [1, 2]}
    del mixed[1]
    assert is_plain_tree(records(mixed), _PLAIN, TAG)
    mixed[(1, 2)] = "a tuple key"
    assert not is_plain_tree(records(mixed), _PLAIN, TAG)


def test_big_ints_are_left_to_the_walk_in_its_big_int_pass() -> None:
    rows = records(2**70)
    assert is_plain_tree(rows, _PLAIN, TAG)  # orjson refuses it; the retry walks
    no_int = frozenset({str, bool, type(None)})
    assert not is_plain_tree(rows, no_int, TAG)
    serde = JsonPlusSerializer()
    assert serde.loads(serde.dumps(rows)) == rows


def test_a_list_that_holds_itself_ends_and_is_refused_as_before() -> None:
    rows: list[Any] = records()
    rows.append(rows)
    assert not is_plain_tree(rows, _PLAIN, TAG)
    with pytest.raises(RecursionError):
        JsonPlusSerializer().dumps(rows)


def test_a_refused_container_is_not_checked_again_part_by_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def counted(obj: Any, leaves: frozenset[type], tag: str) -> bool:
        calls.append(len(obj))
        return is_plain_tree(obj, leaves, tag)

    monkeypatch.setattr(jsonplus, "is_plain_tree", counted)
    nested = [records() for _ in range(MIN_ITEMS)]
    nested[-1][-1]["tags"].append((1, 2))
    plain_sibling = records()
    value = {"nested": nested, "plain": plain_sibling}

    encoded = jsonplus._Encoder().encode(value, "")

    # once for "nested" (refused: nothing inside is asked again), once for "plain"
    assert calls == [MIN_ITEMS, len(plain_sibling)]
    assert encoded["plain"] is plain_sibling
    assert JsonPlusSerializer().loads(JsonPlusSerializer().dumps(value)) == value


@settings(max_examples=60, deadline=None)
@given(st.lists(tree, min_size=MIN_ITEMS, max_size=MIN_ITEMS + 4))
def test_stored_bytes_do_not_depend_on_the_path(value: list[Any]) -> None:
    serde = JsonPlusSerializer()
    fast = serde.dumps(value)
    assert fast == walked(value)
    if is_plain_tree(value, _PLAIN, TAG):
        assert _Encoder().encode(value, "") is value


def test_small_plain_values_skip_the_walk() -> None:
    metadata = {
        "source": "loop",
        "step": 3,
        "parents": {},
        "writes": {"tick": ["n"]},
        "next": ["tick"],
    }
    assert _small_plain(metadata)
    assert _small_plain(7) and _small_plain("s") and _small_plain(None)
    for refused in (
        {"x": 1.5},  # floats may be NaN: the walk decides
        {"x": (1, 2)},
        {TAG: "x"},
        {1: "x"},
        [Name("n")],
        list(range(SMALL_ITEMS + 1)),
        {"a": [[0] * (SMALL_ITEMS // 2)] * 3},  # the budget counts nested items too
    ):
        assert not _small_plain(refused), refused


def test_a_small_list_that_holds_itself_is_refused() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert not _small_plain(loop)


@settings(max_examples=200, deadline=None)
@given(tree)
def test_small_values_store_the_same_bytes_either_way(value: Any) -> None:
    try:
        expected = walked(value)
    except Exception as exc:  # the walk refuses it: so does the fast path
        with pytest.raises(type(exc)):
            JsonPlusSerializer().dumps(value)
        return
    assert JsonPlusSerializer().dumps(value) == expected


def _nested(depth: int) -> list[Any]:
    value: list[Any] = ["leaf"]
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_past_the_limit_is_left_to_the_walk() -> None:
    assert is_plain_tree(_nested(60), _PLAIN, TAG)
    assert not is_plain_tree(_nested(70), _PLAIN, TAG)
    looped: list[Any] = ["a"]
    looped.append(looped)
    assert not is_plain_tree(looped, _PLAIN, TAG)


def test_the_check_keeps_little_alive_however_large_the_value() -> None:
    """A level is checked a chunk at a time: the lists the check makes stay small
    (whole levels of 20,000 records' fields were ~1.4 MB at once)."""
    value = [{"id": i, "text": f"item {i}", "tags": ["a", "b"]} for i in range(20_000)]
    plain: list[bool] = []
    peak = traced_peak(lambda: plain.append(is_plain_tree(value, _PLAIN, TAG)))
    assert plain == [True]
    # the list's own items (one get_referents call: 160 KB) plus a few chunks
    assert peak < 320_000, peak

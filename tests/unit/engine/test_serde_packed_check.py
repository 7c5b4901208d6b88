"""The serializer's native check for large plain values (``packs_plain``).

It says yes only for what the walk would leave unchanged, or for a value
holding bytes (which JSON writing refuses, and the serializer then walks);
unsure (None) where MessagePack hides what JSON needs tagged (non-finite
floats, the tag as a key); no for every other type. The stored bytes never
depend on which check answered.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.checkpoint.serde._packed_check as packed_check
from engine.checkpoint.serde._packed_check import PACK_ITEMS, packs_plain
from engine.checkpoint.serde._plain_tree import MIN_ITEMS
from engine.checkpoint.serde.jsonplus import (
    TAG,
    JsonPlusSerializer,
    _Encoder,
    _exact_dumps,
)
from engine.errors import SerializationError
from tests._support.serde_values import (
    Color,
    Level,
    Name,
    Ratio,
    records,
    traced_peak,
    tree,
    walked,
)

pytestmark = pytest.mark.skipif(
    not packed_check.AVAILABLE, reason="ormsgpack is a dependency; checked when present"
)


@dataclasses.dataclass
class Point:
    x: int


def test_records_of_plain_values_are_plain() -> None:
    assert packs_plain(records(), TAG) is True
    assert packs_plain({f"k{i}": [i, None, True, 1.5] for i in range(40)}, TAG)
    assert packs_plain(records(count=PACK_ITEMS * 3 + 5), TAG) is True


@pytest.mark.parametrize(
    "extra",
    [
        (1, 2),
        Color.RED,
        Level.HIGH,
        uuid.UUID(int=7),
        dt.datetime(2026, 1, 1),
        dt.date(2026, 1, 1),
        Point(1),
        {1, 2},
        Name("a str subclass"),
        Ratio(0.5),
        2**70,
        -(2**64),
        {1: "a non-str key"},
        {Name("a str subclass key"): 1},
        {"deep": [{"deeper": {"x"}}]},
        object(),
    ],
    ids=repr,
)
def test_types_the_walk_would_tag_are_refused(extra: Any) -> None:
    assert packs_plain(records(extra), TAG) is False


def _nan_with_payload() -> float:
    return struct.unpack(">d", bytes.fromhex("7ff4000000000001"))[0]


@pytest.mark.parametrize(
    "extra",
    [
        math.nan,
        -math.nan,
        math.inf,
        -math.inf,
        _nan_with_payload(),
        {TAG: "looks like a tag"},
    ],
    ids=repr,
)
def test_what_msgpack_hides_leaves_the_answer_to_the_level_check(extra: Any) -> None:
    assert packs_plain(records(extra), TAG) is None


def test_markers_past_the_ones_looked_at_one_by_one_are_still_found() -> None:
    many_floats: list[Any] = [float(i) + 0.5 for i in range(200)]
    assert packs_plain(many_floats, TAG) is True
    assert packs_plain([*many_floats, math.inf], TAG) is None
    three_letter: list[Any] = [{"abc": "xyz"} for _ in range(200)]  # each packs 0xa3
    assert packs_plain(three_letter, TAG) is True
    assert packs_plain([*three_letter, {TAG: 1}], TAG) is None


def test_a_long_list_is_judged_by_every_slice() -> None:
    rows = records(count=PACK_ITEMS * 2 + 3)
    rows[-1]["tags"].append((1, 2))  # in the last, short slice
    assert packs_plain(rows, TAG) is False
    rows = records(count=PACK_ITEMS * 2 + 3)
    rows[PACK_ITEMS + 1]["score"] = math.nan
    assert packs_plain(rows, TAG) is None


def test_bytes_pass_the_check_and_the_serializer_walks_them() -> None:
    rows = records(b"\x00raw")
    assert packs_plain(rows, TAG) is True  # MessagePack holds bytes as they are
    serde = JsonPlusSerializer()
    stored = serde.dumps(rows)
    assert stored == walked(rows)
    assert serde.loads(stored) == rows
    # The public encode must be JSON-ready: it never takes the packed check's word.
    assert _Encoder().encode(rows, "")[17]["tags"][-1] != b"\x00raw"
    assert serde.encode(rows)[17]["tags"][-1] != b"\x00raw"


def test_bytes_and_a_big_int_together_are_both_tagged() -> None:
    value = {"rows": records(b"raw"), "big": 2**80}
    serde = JsonPlusSerializer()
    assert serde.dumps(value) == walked(value)
    assert serde.loads(serde.dumps(value)) == value


def test_a_value_nothing_can_store_is_refused_as_before() -> None:
    rows = records("\ud800")  # a lone surrogate: not UTF-8
    with pytest.raises(SerializationError):
        JsonPlusSerializer().dumps(rows)


def test_without_ormsgpack_the_level_check_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(packed_check, "ormsgpack", None)
    assert packs_plain(records(), TAG) is None
    rows = records((1, 2))
    assert JsonPlusSerializer().dumps(rows) == walked(rows)


def _holds_bytes(value: Any) -> bool:
    if isinstance(value, bytes):
        return True
    if isinstance(value, dict):
        return any(map(_holds_bytes, value.values()))
    if isinstance(value, list):
        return any(map(_holds_bytes, value))
    return False


@settings(max_examples=150, deadline=None)
@given(st.lists(tree, min_size=MIN_ITEMS, max_size=MIN_ITEMS + 4))
def test_a_yes_is_what_the_walk_leaves_unchanged_or_holds_bytes(
    value: list[Any],
) -> None:
    if packs_plain(value, TAG) is True and not _holds_bytes(value):
        assert _Encoder().encode(value, "") is value
    assert JsonPlusSerializer().dumps(value) == walked(value)


def test_the_check_holds_no_more_bytes_at_once_than_the_write() -> None:
    rows = [{"id": i, "text": "x" * 2000} for i in range(2048)]
    total = len(JsonPlusSerializer().dumps(rows))

    checked = traced_peak(lambda: packs_plain(rows, TAG))
    assert checked < total / 4  # a slice at a time, never the whole value
    assert checked <= traced_peak(lambda: _exact_dumps(rows)) * 1.2

"""Values for the serializer's plainness checks, and what the walk alone stores.

``records`` makes a list of plain records (one of them given an ``extra`` tag);
``tree`` draws values mixing plain JSON with what the walk tags (enums, UUIDs,
tuples, bytes, subclasses, non-finite floats, the tag and non-str keys);
``walked`` serializes with every fast check switched off, the reference the
fast paths must match byte for byte; ``traced_peak`` is the most memory a call
held at once.
"""

from __future__ import annotations

import enum
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

import engine.checkpoint.serde.jsonplus as jsonplus
from engine.checkpoint.serde._plain_tree import MIN_ITEMS
from engine.checkpoint.serde.jsonplus import TAG


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 1


class Name(str):
    pass


class Ratio(float):
    pass


def records(extra: Any = None, at: int = 17, count: int = MIN_ITEMS * 2) -> list[Any]:
    rows: list[Any] = [
        {"id": i, "text": f"item {i}", "tags": ["a", "b"], "score": i / 3}
        for i in range(count)
    ]
    if extra is not None:
        rows[at]["tags"].append(extra)
    return rows


def walked(value: Any) -> bytes:
    """What the node-by-node walk alone stores (every fast check switched off)."""
    saved = jsonplus.is_plain_tree, jsonplus._small_plain, jsonplus.packs_plain
    jsonplus.is_plain_tree = lambda *args: False  # type: ignore[assignment]
    jsonplus._small_plain = lambda *args: False  # type: ignore[assignment]
    jsonplus.packs_plain = lambda *args: False  # type: ignore[assignment]
    try:
        return jsonplus.JsonPlusSerializer().dumps(value)
    finally:
        jsonplus.is_plain_tree, jsonplus._small_plain, jsonplus.packs_plain = saved


def traced_peak(call: Callable[[], Any]) -> int:
    """The most bytes ``call`` held allocated at once (``tracemalloc``)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.sampled_from(
        [Color.RED, Level.HIGH, uuid.UUID(int=1), (1, "t"), b"x", Name("n"), Ratio(2)]
    ),
)
tree = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, min_size=0, max_size=MIN_ITEMS + 2),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.sampled_from([TAG, 3, Name("k")])),
            inner,
            max_size=MIN_ITEMS + 2,
        ),
    ),
    max_leaves=12,
)

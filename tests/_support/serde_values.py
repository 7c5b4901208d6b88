"""Values for the serializer's plainness checks, and what the walk alone stores.

``records`` makes a list of plain records (one of them given an ``extra`` tag);
``walked`` serializes with every fast check switched off, the reference the
fast paths must match byte for byte.
"""

from __future__ import annotations

from typing import Any

import engine.checkpoint.serde.jsonplus as jsonplus
from engine.checkpoint.serde._plain_tree import MIN_ITEMS


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

"""How ``stream()`` shapes the loop's ``(ns, mode, payload)`` chunks (``chunk_shaper``):
one function per requested shape, chosen once per run."""

from __future__ import annotations

from typing import Any

import pytest

from engine.pregel._io import chunk_shaper

SKIP = object()
OWN: tuple[str, ...] = ()
CHILD = ("child:1",)
MODES = frozenset({"updates", "values"})

CHUNKS: list[tuple[tuple[str, ...], str, Any]] = [
    (OWN, "updates", {"a": {"x": 1}}),
    (OWN, "values", {"x": 1}),
    (OWN, "debug", {"step": 1}),  # a mode not asked for
    (CHILD, "updates", {"b": {"y": 2}}),
    (CHILD, "custom", "ignored"),
]


def shaped(single_mode: bool, subgraphs: bool) -> list[Any]:
    shape = chunk_shaper(OWN, MODES, SKIP, single_mode=single_mode, subgraphs=subgraphs)
    return [shape(chunk) for chunk in CHUNKS]


@pytest.mark.parametrize(
    ("single_mode", "subgraphs", "expected"),
    [
        (
            False,
            False,
            [("updates", {"a": {"x": 1}}), ("values", {"x": 1}), SKIP, SKIP, SKIP],
        ),
        (True, False, [{"a": {"x": 1}}, {"x": 1}, SKIP, SKIP, SKIP]),
        (
            False,
            True,
            [
                (OWN, "updates", {"a": {"x": 1}}),
                (OWN, "values", {"x": 1}),
                SKIP,
                (CHILD, "updates", {"b": {"y": 2}}),
                SKIP,
            ],
        ),
        (
            True,
            True,
            [
                (OWN, {"a": {"x": 1}}),
                (OWN, {"x": 1}),
                SKIP,
                (CHILD, {"b": {"y": 2}}),
                SKIP,
            ],
        ),
    ],
)
def test_each_shape(single_mode: bool, subgraphs: bool, expected: list[Any]) -> None:
    assert shaped(single_mode, subgraphs) == expected


def test_skip_is_the_callers_sentinel() -> None:
    """A skipped chunk is the very object given (the caller compares by identity)."""
    results = shaped(False, False)
    assert results[2] is SKIP and results[3] is SKIP

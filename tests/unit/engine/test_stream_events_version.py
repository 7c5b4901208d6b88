"""``stream_events(version=...)``: the default ("v2", like LangGraph's) and "v1" both
yield the engine's typed events; "v3" (LangGraph's transformer protocol) returns a run
stream; extra options other than ``control`` are refused by v1/v2."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine import events as ev
from engine.runtime import RunControl
from engine.stream import AsyncGraphRunStream, GraphRunStream
from tests._support.graphs import chain


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_v1_and_v2_yield_the_typed_events() -> None:
    graph = chain(["a", "b"]).compile()
    default = list(graph.stream_events({"x": 0, "log": []}))
    assert isinstance(default[-1], ev.RunFinished)
    for version in ("v1", "v2"):
        events = list(graph.stream_events({"x": 0, "log": []}, version=version))
        assert kinds(events) == kinds(default)


def test_v3_returns_a_run_stream_at_once() -> None:
    graph = chain(["a"]).compile()
    run = graph.stream_events({"x": 0, "log": []}, version="v3")
    assert isinstance(run, GraphRunStream)  # the reader drives the run
    assert run.output == graph.invoke({"x": 0, "log": []})

    async def consume() -> Any:
        arun = await graph.astream_events({"x": 0, "log": []}, version="v3")
        assert isinstance(arun, AsyncGraphRunStream)
        return await arun.output()

    assert asyncio.run(consume()) == run.output


def test_unknown_versions_and_options_are_refused() -> None:
    graph = chain(["a"]).compile()
    with pytest.raises(ValueError, match="version 'v9'"):
        list(graph.stream_events({"x": 0, "log": []}, version="v9"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword arguments: \\['typo'\\]"):
        list(graph.stream_events({"x": 0, "log": []}, typo=1))


def test_control_is_accepted() -> None:
    graph = chain(["a", "b"]).compile()
    events = list(graph.stream_events({"x": 0, "log": []}, control=RunControl()))
    assert isinstance(events[-1], ev.RunFinished)
    assert events[-1].status == "done"

"""list_summaries(): list() without values or writes; metadata filters in SQL.

Summaries must agree with list() for every argument combination. Metadata
filters keep ``metadata_matches``' semantics (Python equality) on every
backend; on the SQL backends they run in the database, so the SQL condition
alone must already pick exactly the matching rows for plain JSON metadata.
"""

from __future__ import annotations

import enum
import pickle
from typing import Any

import pytest

from engine.checkpoint._sqlcore.filters import metadata_condition
from engine.checkpoint.base import BaseCheckpointSaver, metadata_matches
from engine.checkpoint.postgres._sql import DIALECT as PG_DIALECT
from engine.checkpoint.sqlite._sql import DIALECT as SQLITE_DIALECT
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
    save_chain,
)
from tests._support.savers import SaverSpec
from tests._support.tamper import tamper_blob, tamper_checkpoint, tamper_write


def _summary_view(items) -> list[tuple[Any, ...]]:
    return [(s.config, s.metadata, s.parent_config, s.created_at) for s in items]


def _list_view(items) -> list[tuple[Any, ...]]:
    return [(t.config, t.metadata, t.parent_config, t.checkpoint["ts"]) for t in items]


def test_summaries_agree_with_list(saver: BaseCheckpointSaver) -> None:
    configs = save_chain(saver, "t1", 230)  # more than two pages
    save_chain(saver, "t1", 3, checkpoint_ns="sub:1")
    save_chain(saver, "t2", 4)
    thread = {"configurable": {"thread_id": "t1"}}
    cases: list[tuple[Any, dict[str, Any]]] = [
        (make_config("t1"), {}),
        (thread, {}),
        (None, {}),
        (make_config("t1", checkpoint_ns="sub:1"), {}),
        (configs[7], {}),
        (make_config("t1"), {"limit": 5}),
        (make_config("t1"), {"limit": 0}),
        (make_config("t1"), {"before": configs[150]}),
        (make_config("t1"), {"before": configs[150], "limit": 120}),
        (make_config("t1"), {"filter": {"source": "loop"}, "limit": 3}),
        (make_config("t1"), {"filter": {"source": "input"}}),
        (None, {"filter": {"step": 1}}),
        (thread, {"filter": {"step": 2, "source": "loop"}, "before": configs[50]}),
        (make_config("t1"), {"filter": {"missing": None}, "limit": 150}),
        (make_config("t9"), {}),
    ]

    for config, kwargs in cases:
        listed = _list_view(saver.list(config, **kwargs))
        summaries = _summary_view(saver.list_summaries(config, **kwargs))
        assert summaries == listed, (config, kwargs)
    assert len(list(saver.list_summaries(make_config("t1")))) == 230


def test_summaries_stop_early_when_caller_stops(saver: BaseCheckpointSaver) -> None:
    save_chain(saver, "t1", 150)

    iterator = saver.list_summaries(make_config("t1"))
    first = next(iterator)
    del iterator  # no connection or lock may stay held

    assert first.metadata["step"] == 148
    assert saver.get_tuple(make_config("t1")) is not None


def test_summaries_read_neither_values_nor_writes(
    saver: BaseCheckpointSaver, saver_spec: SaverSpec
) -> None:
    checkpoint = make_checkpoint({"log": ["a"]})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )
    for step in range(2):
        checkpoint, changed = next_checkpoint(checkpoint, append={"log": [step]})
        config = saver.put(config, checkpoint, make_metadata(step, "loop"), changed)
    saver.put_writes(config, [("log", [5])], "task-1")
    expected = _summary_view(saver.list_summaries(make_config("t1")))
    tamper_blob(saver, saver_spec, "t1", "log", "pickle", pickle.dumps(1))
    tamper_write(saver, saver_spec, "t1", "pickle", pickle.dumps(2))

    with pytest.raises(Exception, match="pickle"):
        list(saver.list(make_config("t1")))
    assert _summary_view(saver.list_summaries(make_config("t1"))) == expected

    if saver_spec.shared:  # the SQL savers do not even decode the checkpoints
        tamper_checkpoint(saver, saver_spec, "t1", "json", b"\xff\xfe not json")
        assert _summary_view(saver.list_summaries(make_config("t1"))) == expected


async def test_alist_summaries_matches(asaver) -> None:
    checkpoint = make_checkpoint({"n": 0})
    stored = await asaver.aput(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )

    summaries = [s async for s in asaver.alist_summaries(make_config("t1"))]
    listed = [t async for t in asaver.alist(make_config("t1"))]
    filtered = [
        s
        async for s in asaver.alist_summaries(None, filter={"source": "input"}, limit=1)
    ]

    assert _summary_view(summaries) == _list_view(listed)
    assert summaries[0].config == stored
    assert summaries[0].created_at == checkpoint["ts"]
    assert summaries[0].parent_config is None
    assert [s.config for s in filtered] == [stored]


# -- metadata filters ------------------------------------------------------------------


class Color(enum.StrEnum):
    RED = "red"


# One checkpoint per entry, each in its own thread "m<index>".
STORED: list[dict[str, Any]] = [
    {"s": "x", "n": 1, "b": True, "info": {"user": "ann", "tags": ["a", 1]}},
    {"s": "y", "n": 1.0, "b": False, "info": {"tags": ["a", 1], "user": "ann"}},
    {"s": "1", "n": True, "b": 1, "info": {"user": "ann", "tags": ["a", True]}},
    {"s": "x", "n": 2, "b": 0, "info": {"user": "ann", "tags": ["a", 1], "x": 1}},
    {"s": "x", "n": 0, "b": None, "info": {"user": "bob", "tags": [1, "a"]}},
    {"s": "x y", "n": False, "info": {"user": "ann", "tags": ["a"]}},
    {"s": "", "n": 10**15, "info": {"user": "ann"}, "nested": {"a": {"b": [{"c": 1}]}}},
    {"s": 'q"uo\\te', "n": -2.5, "info": None, "nested": {"a": {"b": [{"c": 2}]}}},
    {"s": "x", "n": "1", "info": [], "a.b": "dot", "é": "ü"},
    {"s": "x", "n": [1], "info": {}, 'k"q': "v"},
    {"s": Color.RED, "n": (1,), "info": {"user": Color.RED}},
    {"s": "red", "n": 2**70, "info": {"user": "red"}},
]

FILTERS: list[dict[str, Any]] = [
    {"s": "x"},
    {"s": "1"},
    {"s": ""},
    {"s": "x y"},
    {"s": 'q"uo\\te'},
    {"s": "red"},
    {"s": Color.RED},
    {"n": 1},
    {"n": 1.0},
    {"n": True},
    {"n": 0},
    {"n": False},
    {"n": 2},
    {"n": -2.5},
    {"n": 10**15},
    {"n": "1"},
    {"n": [1]},
    {"n": (1,)},
    {"n": 2**70},
    {"b": True},
    {"b": 0},
    {"b": None},
    {"missing": None},
    {"info": {"user": "ann", "tags": ["a", 1]}},
    {"info": {"tags": ["a", 1], "user": "ann"}},
    {"info": {"user": "ann"}},
    {"info": {"user": "red"}},
    {"info": {}},
    {"info": []},
    {"info": None},
    {"nested": {"a": {"b": [{"c": 1}]}}},
    {"nested": {"a": {"b": [{"c": 2.0}]}}},
    {"a.b": "dot"},
    {"é": "ü"},
    {'k"q': "v"},
    {"s": "x", "n": 2},
    {"s": "x", "info": {"user": "bob", "tags": [1, "a"]}},
    {"s": "nothing"},
]


@pytest.fixture
def stored_metadata(saver: BaseCheckpointSaver) -> BaseCheckpointSaver:
    for i, extra in enumerate(STORED):
        checkpoint = make_checkpoint({"i": i})
        meta = {**make_metadata(), **extra}
        saver.put(
            make_config(f"m{i}"), checkpoint, meta, checkpoint["channel_versions"]
        )
    return saver


def _expected(filter: dict[str, Any]) -> list[str]:
    return sorted(
        f"m{i}"
        for i, extra in enumerate(STORED)
        if metadata_matches({**make_metadata(), **extra}, filter)
    )


@pytest.mark.parametrize("filter", FILTERS, ids=repr)
def test_metadata_filters_follow_python_equality(stored_metadata, filter) -> None:
    listed = sorted(
        t.config["configurable"]["thread_id"]
        for t in stored_metadata.list(None, filter=filter)
    )
    summarized = sorted(
        s.config["configurable"]["thread_id"]
        for s in stored_metadata.list_summaries(None, filter=filter)
    )

    assert listed == _expected(filter)
    assert summarized == _expected(filter)


def _plain(value: Any) -> bool:
    """Whether a value is plain JSON with nothing the serializer tags."""
    if type(value) in (str, bool, type(None)):
        return True
    if type(value) is int:
        return -(2**63) <= value < 2**63
    if type(value) is float:
        return True
    if type(value) is list:
        return all(map(_plain, value))
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


@pytest.mark.parametrize("filter", FILTERS, ids=repr)
def test_metadata_filters_run_in_sql(
    stored_metadata, saver_spec: SaverSpec, filter
) -> None:
    if not saver_spec.shared:
        pytest.skip("the memory saver has no SQL")
    dialect = SQLITE_DIALECT if saver_spec.kind == "sqlite" else PG_DIALECT
    condition = metadata_condition(dialect, filter)
    expressible = all(
        _plain(v) and not (saver_spec.kind == "sqlite" and '"' in k)
        for k, v in filter.items()
    )
    if condition is None:
        assert not expressible
        return
    sql, params = condition
    rows = saver_spec.execute(
        f"SELECT c.thread_id FROM engine_checkpoints c WHERE {sql}",
        params,
    )
    found = sorted(row[0] for row in rows)

    expected = _expected(filter)
    assert set(expected) <= set(found)  # SQL never drops a match
    plain_rows = {f"m{i}" for i, extra in enumerate(STORED) if _plain(extra)}
    if expressible:  # ... and on plain metadata it picks exactly the matches
        assert set(found) & plain_rows == set(expected) & plain_rows

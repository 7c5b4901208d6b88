"""list(): newest first, filters, before, limit, across threads and namespaces."""

from __future__ import annotations

from engine.checkpoint.base import BaseCheckpointSaver
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    save_chain,
)


def _ids(tuples) -> list[str]:
    return [t.checkpoint["id"] for t in tuples]


def test_list_is_newest_first_with_full_tuples(saver: BaseCheckpointSaver) -> None:
    configs = save_chain(saver, "t1", 5)

    listed = list(saver.list(make_config("t1")))

    assert _ids(listed) == [
        c["configurable"]["checkpoint_id"] for c in reversed(configs)
    ]
    assert [t.checkpoint["channel_values"]["n"] for t in listed] == [3, 2, 1, 0, -1]
    assert listed[0].parent_config == configs[-2]
    assert listed[-1].parent_config is None


def test_list_filters_on_metadata(saver: BaseCheckpointSaver) -> None:
    save_chain(saver, "t1", 4)

    inputs = list(saver.list(make_config("t1"), filter={"source": "input"}))
    step_one = list(saver.list(make_config("t1"), filter={"step": 1, "source": "loop"}))
    nothing = list(saver.list(make_config("t1"), filter={"source": "update"}))
    absent_key = list(saver.list(make_config("t1"), filter={"missing": None}))

    assert [t.metadata["step"] for t in inputs] == [-1]
    assert [t.metadata["step"] for t in step_one] == [1]
    assert nothing == []
    assert len(absent_key) == 4  # a missing key equals None, as in the reference


def test_list_filter_on_nested_and_non_json_values(saver: BaseCheckpointSaver) -> None:
    for i, tag in enumerate([("a", 1), ("b", 2), ("a", 1)]):
        checkpoint = make_checkpoint({"i": i})
        meta = make_metadata(i, "loop", tag=tag, info={"user": "ann" if i else "bob"})
        saver.put(
            make_config(f"t{i}"), checkpoint, meta, checkpoint["channel_versions"]
        )

    by_tuple = list(saver.list(None, filter={"tag": ("a", 1)}))
    by_dict = list(saver.list(None, filter={"info": {"user": "ann"}}))

    assert sorted(t.config["configurable"]["thread_id"] for t in by_tuple) == [
        "t0",
        "t2",
    ]
    assert sorted(t.config["configurable"]["thread_id"] for t in by_dict) == [
        "t1",
        "t2",
    ]


def test_list_before_and_limit(saver: BaseCheckpointSaver) -> None:
    configs = save_chain(saver, "t1", 6)
    ids = [c["configurable"]["checkpoint_id"] for c in configs]

    limited = list(saver.list(make_config("t1"), limit=2))
    before = list(saver.list(make_config("t1"), before=configs[3]))
    before_limited = list(saver.list(make_config("t1"), before=configs[3], limit=1))
    zero = list(saver.list(make_config("t1"), limit=0))

    assert _ids(limited) == [ids[5], ids[4]]
    assert _ids(before) == [ids[2], ids[1], ids[0]]
    assert _ids(before_limited) == [ids[2]]
    assert zero == []


def test_list_limit_counts_matches_not_rows(saver: BaseCheckpointSaver) -> None:
    save_chain(saver, "t1", 250)  # more than one page

    loops = list(saver.list(make_config("t1"), filter={"source": "loop"}, limit=3))
    inputs = list(saver.list(make_config("t1"), filter={"source": "input"}, limit=3))
    everything = list(saver.list(make_config("t1")))

    assert [t.metadata["step"] for t in loops] == [248, 247, 246]
    assert [t.metadata["step"] for t in inputs] == [-1]
    assert len(everything) == 250
    assert _ids(everything) == sorted(_ids(everything), reverse=True)


def test_list_stops_early_when_caller_stops(saver: BaseCheckpointSaver) -> None:
    save_chain(saver, "t1", 150)

    iterator = saver.list(make_config("t1"))
    first = next(iterator)
    del iterator  # no connection or lock may stay held

    assert first.metadata["step"] == 148
    assert saver.get_tuple(make_config("t1")) is not None


def test_list_across_namespaces_and_threads(saver: BaseCheckpointSaver) -> None:
    root = save_chain(saver, "t1", 2)
    child = save_chain(saver, "t1", 2, checkpoint_ns="sub:1")
    other = save_chain(saver, "t2", 1)

    all_t1 = list(saver.list({"configurable": {"thread_id": "t1"}}))
    root_only = list(saver.list(make_config("t1")))
    child_only = list(saver.list(make_config("t1", checkpoint_ns="sub:1")))
    everything = list(saver.list(None))

    assert len(all_t1) == 4
    assert _ids(all_t1) == sorted(_ids(all_t1), reverse=True)
    assert {t.config["configurable"]["checkpoint_ns"] for t in all_t1} == {"", "sub:1"}
    assert _ids(root_only) == [
        c["configurable"]["checkpoint_id"] for c in reversed(root)
    ]
    assert _ids(child_only) == [
        c["configurable"]["checkpoint_id"] for c in reversed(child)
    ]
    assert len(everything) == 5
    assert other[0]["configurable"]["checkpoint_id"] in _ids(everything)


def test_list_by_checkpoint_id(saver: BaseCheckpointSaver) -> None:
    configs = save_chain(saver, "t1", 3)

    one = list(saver.list(configs[1]))

    assert _ids(one) == [configs[1]["configurable"]["checkpoint_id"]]


def test_list_includes_pending_writes(saver: BaseCheckpointSaver) -> None:
    configs = save_chain(saver, "t1", 2)
    saver.put_writes(configs[0], [("n", 5)], "task-1")

    listed = list(saver.list(make_config("t1")))

    assert listed[0].pending_writes == []
    assert listed[1].pending_writes == [("task-1", "n", 5)]

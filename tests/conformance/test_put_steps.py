"""put_steps: several steps (group commit), in order, each entry fenced in turn.

Every backend keeps a batch all or nothing: when an entry fails (a fencing
conflict, a value that cannot be stored, a writes-only entry without a
checkpoint id), neither it nor any other entry of the batch is stored.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from engine.checkpoint._sqlcore import saves
from engine.checkpoint.base import BaseCheckpointSaver, Checkpoint, StepSave
from engine.checkpoint.postgres._sql import DIALECT
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import CheckpointConflictError
from tests._support.builders import (
    fenced,
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)
from tests._support.savers import SaverSpec
from tests._support.sql_ops import flat, insert_rows, statements_of


def _root(saver: BaseCheckpointSaver, thread_id: str = "t1", ns: str = ""):
    checkpoint = make_checkpoint({"n": -1, "log": []})
    config = saver.put(
        fenced(make_config(thread_id, checkpoint_ns=ns), None),
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )
    return checkpoint, config


def _steps(
    start: Checkpoint, config: dict[str, Any], count: int, *, fence: bool = True
) -> tuple[list[StepSave], list[Checkpoint]]:
    """``count`` steps after ``start`` as the runtime batches them: each entry
    fenced on the previous entry's checkpoint, with the task writes that led to
    it saved against that previous checkpoint; ``log`` grows by deltas."""
    steps: list[StepSave] = []
    made: list[Checkpoint] = []
    previous = start
    conf = config["configurable"]
    for step in range(count):
        checkpoint, changed = next_checkpoint(
            previous, {"n": step}, append={"log": [f"item {step}"]}, step=step
        )
        parent = make_config(conf["thread_id"], previous["id"], conf["checkpoint_ns"])
        writes = [("n", step), ("log", [f"item {step}"])]
        steps.append(
            (
                fenced(parent, previous["id"]) if fence else parent,
                [(f"task-{step}", f"~pull, node{step}", writes)],
                checkpoint,
                make_metadata(step, "loop"),
                changed,
            )
        )
        made.append(checkpoint)
        previous = checkpoint
    return steps, made


def _ids(saver: BaseCheckpointSaver, thread_id: str = "t1", ns: str = "") -> list:
    return [
        t.config["configurable"]["checkpoint_id"]
        for t in saver.list(make_config(thread_id, checkpoint_ns=ns))
    ]


def test_put_steps_saves_five_steps_and_reads_them_back(saver) -> None:
    root, config = _root(saver)
    steps, made = _steps(root, config, 5)

    stored = saver.put_steps(steps)

    assert [c["configurable"]["checkpoint_id"] for c in stored] == [
        c["id"] for c in made
    ]
    assert _ids(saver) == [c["id"] for c in reversed([root, *made])]
    for step, (checkpoint, saved) in enumerate(zip(made, stored, strict=True)):
        loaded = saver.get_tuple(saved)
        assert loaded is not None
        assert loaded.checkpoint["channel_values"] == {
            "n": step,
            "log": [f"item {i}" for i in range(step + 1)],
        }
        assert loaded.checkpoint["ts"] == checkpoint["ts"]
        assert loaded.metadata == make_metadata(step, "loop")
        parent = root if step == 0 else made[step - 1]
        assert loaded.parent_config == make_config("t1", parent["id"])
        parent_tuple = saver.get_tuple(make_config("t1", parent["id"]))
        assert parent_tuple is not None
        assert parent_tuple.pending_writes == [
            (f"task-{step}", "n", step),
            (f"task-{step}", "log", [f"item {step}"]),
        ]
    latest = saver.get_tuple(make_config("t1"))
    assert latest is not None and latest.pending_writes == []


def test_put_steps_equals_saving_one_by_one(saver) -> None:
    root, config = _root(saver, "batched")
    steps, _ = _steps(root, config, 4)
    saver.put_steps(steps)
    other_root, other_config = _root(saver, "single")
    singles, _ = _steps(other_root, other_config, 4)
    for conf, task_writes, checkpoint, metadata, versions in singles:
        saver.put_step(conf, task_writes, checkpoint, metadata, versions)

    def shape(thread_id: str) -> list:
        return [
            (
                t.checkpoint["channel_values"],
                t.metadata,
                t.pending_writes,
                t.parent_config is None,
            )
            for t in saver.list(make_config(thread_id))
        ]

    assert shape("batched") == shape("single")


def test_a_conflict_in_the_middle_keeps_nothing_of_the_batch(saver) -> None:
    root, config = _root(saver)
    steps, made = _steps(root, config, 5)
    conf, task_writes, checkpoint, metadata, versions = steps[2]
    # the third entry expects a head the thread will not have (another writer's)
    steps[2] = (fenced(conf, root["id"]), task_writes, checkpoint, metadata, versions)
    before = saver.stored_bytes("t1")

    with pytest.raises(CheckpointConflictError) as caught:
        saver.put_steps(steps)

    assert made[1]["id"] in str(caught.value)  # the head it found
    for checkpoint in made:
        assert saver.get_tuple(make_config("t1", checkpoint["id"])) is None
    assert _ids(saver) == [root["id"]]
    root_tuple = saver.get_tuple(make_config("t1", root["id"]))
    assert root_tuple is not None and root_tuple.pending_writes == []
    assert saver.stored_bytes("t1") == before


def test_a_batch_behind_the_stored_head_conflicts_at_its_first_entry(saver) -> None:
    root, config = _root(saver)
    winner, changed = next_checkpoint(root, {"n": 100})
    saver.put(fenced(config, root["id"]), winner, make_metadata(0, "loop"), changed)
    steps, made = _steps(root, config, 3)

    with pytest.raises(CheckpointConflictError):
        saver.put_steps(steps)

    assert _ids(saver) == [winner["id"], root["id"]]


def test_an_unstorable_value_in_the_middle_keeps_nothing(saver) -> None:
    root, config = _root(saver)
    steps, made = _steps(root, config, 3)
    conf, task_writes, checkpoint, metadata, versions = steps[1]
    checkpoint["channel_values"]["n"] = object()

    with pytest.raises(Exception, match="Cannot store"):
        saver.put_steps(steps)

    assert _ids(saver) == [root["id"]]


def test_writes_only_entries(saver) -> None:
    root, config = _root(saver)
    steps, made = _steps(root, config, 2)
    root_config = make_config("t1", root["id"])
    first_config = make_config("t1", made[0]["id"])
    batch: list[StepSave] = [
        # a task that finished early in step 0, saved on its own
        (root_config, [("task-early", "~pull, early", [("n", 10)])], None, None, {}),
        steps[0],
        # writes of step 1's tasks, then a special write that replaces another
        (
            first_config,
            [("task-x", "~pull, x", [("__error__", "boom 1")])],
            None,
            None,
            {},
        ),
        (
            first_config,
            [("task-x", "~pull, x", [("__error__", "boom 2")])],
            None,
            None,
            {},
        ),
        (first_config, [("task-y", "~pull, y", [("log", ["y"])])], None, None, {}),
        (first_config, [("task-y", "~pull, y", [("log", ["retry"])])], None, None, {}),
        steps[1],
    ]

    stored = saver.put_steps(batch)

    assert [s is None for s in stored] == [True, False, True, True, True, True, False]
    root_tuple = saver.get_tuple(root_config)
    first = saver.get_tuple(first_config)
    assert root_tuple is not None and first is not None
    assert root_tuple.pending_writes == [
        ("task-early", "n", 10),
        ("task-0", "n", 0),
        ("task-0", "log", ["item 0"]),
    ]
    assert first.pending_writes == [
        ("task-1", "n", 1),
        ("task-1", "log", ["item 1"]),
        ("task-x", "__error__", "boom 2"),  # special writes: the last one
        ("task-y", "log", ["y"]),  # regular writes: the first one
    ]
    assert _ids(saver) == [made[1]["id"], made[0]["id"], root["id"]]


def test_a_batch_of_writes_only(saver) -> None:
    _, config = _root(saver)

    stored = saver.put_steps(
        [
            (config, [("task-a", "~pull, a", [("n", 1)])], None, None, {}),
            (config, [("task-b", "~pull, b", [("n", 2)])], None, None, {}),
        ]
    )

    loaded = saver.get_tuple(config)
    assert stored == [None, None]
    assert loaded is not None
    assert loaded.pending_writes == [("task-a", "n", 1), ("task-b", "n", 2)]


def test_writes_only_entry_without_checkpoint_id_fails_and_keeps_nothing(
    saver,
) -> None:
    root, config = _root(saver)
    steps, _ = _steps(root, config, 1)

    with pytest.raises(ValueError, match="checkpoint_id"):
        saver.put_steps(
            [
                steps[0],
                (make_config("t1"), [("task-a", "", [("n", 1)])], None, None, {}),
            ]
        )

    assert _ids(saver) == [root["id"]]


def test_first_checkpoints_of_threads_and_namespaces_in_one_batch(saver) -> None:
    batch: list[StepSave] = []
    firsts = {}
    for thread_id, ns in [("t2", ""), ("t1", ""), ("t1", "sub:1")]:
        checkpoint = make_checkpoint({"n": -1, "log": []})
        firsts[(thread_id, ns)] = checkpoint
        batch.append(
            (
                fenced(make_config(thread_id, checkpoint_ns=ns), None),
                [("ignored", "", [("n", 5)])],  # no parent: nothing to write against
                checkpoint,
                make_metadata(),
                checkpoint["channel_versions"],
            )
        )
    for (thread_id, ns), checkpoint in list(firsts.items()):
        more, _ = _steps(checkpoint, make_config(thread_id, checkpoint_ns=ns), 2)
        batch.extend(more)

    stored = saver.put_steps(batch)

    assert len(stored) == 9 and all(s is not None for s in stored)
    for thread_id, ns in firsts:
        assert len(_ids(saver, thread_id, ns)) == 3
        first = saver.get_tuple(
            make_config(thread_id, firsts[(thread_id, ns)]["id"], ns)
        )
        assert first is not None and [w[0] for w in first.pending_writes] == [
            "task-0",
            "task-0",
        ]
        latest = saver.get_tuple(make_config(thread_id, checkpoint_ns=ns))
        assert latest is not None
        assert latest.checkpoint["channel_values"]["log"] == ["item 0", "item 1"]


def test_unfenced_entries_fork_without_checks(saver) -> None:
    root, config = _root(saver)
    steps, made = _steps(root, config, 2)
    saver.put_steps(steps)
    fork, fork_changed = next_checkpoint(root, {"n": "fork"}, step=0)

    stored = saver.put_steps(
        [(config, [], fork, make_metadata(0, "fork"), fork_changed)]
    )

    loaded = saver.get_tuple(stored[0])
    assert loaded is not None and loaded.checkpoint["channel_values"]["n"] == "fork"
    assert loaded.parent_config == make_config("t1", root["id"])


def test_empty_batch(saver) -> None:
    assert saver.put_steps([]) == []


async def test_aput_steps_matches_put_steps(asaver) -> None:
    root = make_checkpoint({"n": -1, "log": []})
    config = await asaver.aput(
        fenced(make_config("t1"), None),
        root,
        make_metadata(),
        root["channel_versions"],
    )
    steps, made = _steps(root, config, 5)
    steps.insert(
        2,
        (
            make_config("t1", made[1]["id"]),
            [("task-z", "~pull, z", [("n", 99)])],
            None,
            None,
            {},
        ),
    )

    stored = await asaver.aput_steps(steps)

    assert [s is None for s in stored] == [False, False, True, False, False, False]
    latest = await asaver.aget_tuple(make_config("t1"))
    assert latest is not None
    assert latest.checkpoint["id"] == made[-1]["id"]
    assert latest.checkpoint["channel_values"]["log"] == [f"item {i}" for i in range(5)]
    second = await asaver.aget_tuple(make_config("t1", made[1]["id"]))
    assert second is not None
    assert [w[0] for w in second.pending_writes] == ["task-2", "task-2", "task-z"]

    conf, task_writes, checkpoint, metadata, versions = steps[-1]
    stale, stale_changed = next_checkpoint(made[-1], {"n": "late"}, step=9)
    with pytest.raises(CheckpointConflictError):
        await asaver.aput_steps(
            [
                (
                    fenced(make_config("t1", made[-1]["id"]), made[-1]["id"]),
                    [],
                    stale,
                    make_metadata(9, "loop"),
                    stale_changed,
                ),
                (conf, task_writes, checkpoint, metadata, versions),  # head moved
            ]
        )
    assert (await asaver.aget_tuple(make_config("t1"))).checkpoint["id"] == made[-1][
        "id"
    ]


def test_repeated_conflicting_batches_do_not_disturb_later_ones(saver) -> None:
    # Postgres prepares statements after a few uses; a conflict aborts the
    # pipelined transaction and must not leave the connection confused.
    root, config = _root(saver)
    head = root
    for round_ in range(8):
        steps, made = _steps(head, make_config("t1", head["id"]), 3)
        if round_:
            stale = list(steps)
            conf, task_writes, checkpoint, metadata, versions = stale[1]
            stale[1] = (
                fenced(conf, root["id"]),
                task_writes,
                checkpoint,
                metadata,
                versions,
            )
            with pytest.raises(CheckpointConflictError):
                saver.put_steps(stale)
        saver.put_steps(steps)
        head = made[-1]

    assert len(_ids(saver)) == 1 + 8 * 3


def _statements(steps: list[StepSave]) -> list[Any]:
    """Drive put_steps' operation for Postgres without a database: what it yields."""
    return statements_of(saves.put_steps(DIALECT, JsonPlusSerializer(), steps))


def _round_trips(yielded: list[Any]) -> int:
    """Round trips of the pipelining driver: one per yield that fetches rows,
    plus the commit."""
    fetching = [
        s for s in yielded if isinstance(s, tuple) or getattr(s, "fetch", False)
    ]
    return len(fetching) + 1


def _blob_inserts(yielded: list[Any]) -> list[list[tuple[Any, ...]]]:
    """The rows of each statement inserting values, in order."""
    found = (insert_rows(s, DIALECT["insert_blob"]) for s in yielded)
    return [rows for rows in found if rows is not None]


def test_postgres_batch_is_one_round_trip_without_delta_lookups() -> None:
    root = make_checkpoint({"n": -1})
    config = make_config("t1", root["id"])
    steps: list[StepSave] = []
    previous = root
    for step in range(5):
        checkpoint, changed = next_checkpoint(previous, {"n": step}, step=step)
        steps.append(
            (
                fenced(make_config("t1", previous["id"]), previous["id"]),
                [(f"task-{step}", "~pull, a", [("n", step)])],
                checkpoint,
                make_metadata(step, "loop"),
                changed,
            )
        )
        steps.append((config, [("task-w", "~pull, w", [("n", 0)])], None, None, {}))
        previous = checkpoint

    yielded = _statements(steps)

    assert _round_trips(yielded) == 1
    checks = [s for s in yielded if "engine_checkpoint_expect_head" in s.sql]
    # The first entry is checked in the database, which locks the thread; each
    # later one expects the checkpoint the entry before it inserts, so the head
    # is known and its check left out. The inserts then go one statement a table.
    assert [c.params for c in checks] == [("t1", "", root["id"])]
    inserts = [s for s in yielded if s.sql.lstrip().upper().startswith("INSERT")]
    tables = ("insert_write_keep", "insert_blob", "insert_checkpoint")
    rows = [
        next(
            (name, found)
            for name in tables
            if (found := insert_rows(s, DIALECT[name])) is not None
        )
        for s in inserts
    ]
    assert [(name, len(found)) for name, found in rows] == [
        ("insert_write_keep", 5),
        ("insert_blob", 5),
        ("insert_checkpoint", 5),
    ]


def test_postgres_batch_checks_in_the_database_an_entry_off_the_chain() -> None:
    root = make_checkpoint({"n": -1})
    steps, made = _steps(root, make_config("t1", root["id"]), 3)
    conf, task_writes, checkpoint, metadata, versions = steps[2]
    steps[2] = (fenced(conf, root["id"]), task_writes, checkpoint, metadata, versions)

    yielded = _statements(steps)

    checks = [s for s in yielded if "engine_checkpoint_expect_head" in s.sql]
    assert [c.params[2] for c in checks] == [root["id"], root["id"]]
    # the entries before it are inserted before the database checks it
    at = next(i for i, s in enumerate(yielded) if s is checks[1])
    assert DIALECT["insert_checkpoint"] in [s.sql for s in yielded[:at]]


def test_postgres_batch_reads_delta_bases_once() -> None:
    root = make_checkpoint({"n": -1, "log": []})
    steps, _ = _steps(root, make_config("t1", root["id"]), 5)

    yielded = _statements(steps)

    # one read of the base older than the batch; later bases are the batch's own
    assert _round_trips(yielded) == 2


def test_a_batch_across_a_thread_and_its_copy(saver) -> None:
    root, config = _root(saver)
    saver.copy_thread("t1", "t2")  # same versions in both threads
    steps, _ = _steps(root, config, 2)
    copied, _ = _steps(root, make_config("t2", root["id"]), 3)

    saver.put_steps([steps[0], copied[0], steps[1], copied[1], copied[2]])

    for thread_id, count in (("t1", 2), ("t2", 3)):
        latest = saver.get_tuple(make_config(thread_id))
        assert latest is not None
        assert latest.checkpoint["channel_values"]["log"] == [
            f"item {i}" for i in range(count)
        ]


def test_postgres_batch_led_by_writes_checks_its_first_checkpoint_first() -> None:
    # a resumed run's last batch: the resume's writes, then the step's checkpoint
    root = make_checkpoint({"n": -1})
    steps, _ = _steps(root, make_config("t1", root["id"]), 1)
    writes_only: StepSave = (
        make_config("t1", root["id"]),
        [("resume", "~pull, a", [("n", 0)])],
        None,
        None,
        {},
    )

    yielded = _statements([writes_only, *steps])

    sent = flat(yielded)
    checks = [s for s in sent if "engine_checkpoint_expect_head" in s.sql]
    assert [c.params[-1] for c in checks] == [root["id"]]
    assert sent.index(checks[0]) == 0  # before any insert, no thread lock of its own
    assert not [s for s in sent if s.sql == DIALECT.lock_thread]


def _large_steps(
    count: int, size: int, line: int = 1000
) -> tuple[list[StepSave], list[Checkpoint]]:
    """``count`` fenced steps after a root, each setting ``doc`` to a new list of
    about ``size`` characters (lines of ``line``), written by its task (a value
    and a write each)."""
    root = make_checkpoint({"doc": []})
    steps: list[StepSave] = []
    made: list[Checkpoint] = [root]
    for step in range(count):
        previous = made[-1]
        value = [chr(ord("a") + step) * line] * max(1, size // line)
        checkpoint, changed = next_checkpoint(previous, {"doc": value}, step=step)
        steps.append(
            (
                fenced(make_config("t1", previous["id"]), previous["id"]),
                [(f"task-{step}", "~pull, a", [("doc", value)])],
                checkpoint,
                make_metadata(step, "loop"),
                changed,
            )
        )
        made.append(checkpoint)
    return steps, made


def test_postgres_batch_of_large_values_sends_each_before_serializing_the_next() -> (
    None
):
    # few long lines: each value is one row (a long list would go in parts)
    steps, _ = _large_steps(3, saves.FLUSH_BYTES, line=8000)

    yielded = _statements(steps)

    blob_inserts = _blob_inserts(yielded)
    assert [len(rows) for rows in blob_inserts] == [1, 1, 1]
    # after each of the first two, the pipeline is drained (its rows are let go)
    drains = [i for i, s in enumerate(yielded) if s.sql == DIALECT.drain]
    assert len(drains) == 2
    assert _round_trips(yielded) == 3


def test_postgres_batch_sends_gathered_rows_before_serializing_a_large_value() -> None:
    """A value that cannot go in parts (a few long lines) is serialized only after
    the rows gathered before it were sent and let go of."""
    yielded: list[Any] = []
    serialized: list[tuple[int, int, str]] = []  # (statements before, 1, event)

    class Watching(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            if isinstance(obj, list) and obj and len(obj[0]) == 8000:
                serialized.append((len(yielded), 1, f"serialize {obj[0][0]}"))
            return super().dumps_typed(obj)

    steps, _ = _large_steps(3, saves.FLUSH_BYTES, line=8000)
    statements_of(saves.put_steps(DIALECT, Watching(), steps), into=yielded)
    drains = [
        (at + 1, 0, "drain")
        for at, s in enumerate(yielded)
        if not isinstance(s, tuple) and s.sql == DIALECT.drain
    ]
    events = [event for *_, event in sorted(serialized + drains)]

    # each step's value and its write are serialized after the step before was sent
    assert [e for e in events if e == "drain" or e.startswith("serialize")] == [
        "serialize a",
        "serialize a",
        "drain",
        "serialize b",
        "serialize b",
        "drain",
        "serialize c",
        "serialize c",
    ]


def test_postgres_batch_of_small_values_stays_one_insert_a_table() -> None:
    steps, _ = _large_steps(3, 1000)

    yielded = _statements(steps)

    assert _round_trips(yielded) == 1
    assert [len(rows) for rows in _blob_inserts(yielded)] == [3]


def test_a_batch_of_large_values_never_holds_them_all_serialized(
    saver_spec: SaverSpec,
) -> None:
    """Four steps of a 1 MiB value each (its write too): the SQL savers send an
    entry's rows before serializing the next, so the batch's peak stays near one
    entry's payloads, not four (the in-memory saver keeps them all anyway)."""
    if not saver_spec.shared:
        pytest.skip("the memory saver keeps every payload it stores")
    mib = 1 << 20
    steps, made = _large_steps(4, mib)
    with saver_spec.open() as opened:
        root = made[0]
        opened.put(
            fenced(make_config("t1"), None),
            root,
            make_metadata(),
            root["channel_versions"],
        )
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            opened.put_steps(steps)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()

        assert _ids(opened) == [c["id"] for c in reversed(made)]
        loaded = opened.get_tuple(make_config("t1"))
        assert loaded is not None
        assert loaded.checkpoint["channel_values"]["doc"] == ["d" * 1000] * (
            mib // 1000
        )
    # one entry: its value and its write (1 MiB each), their serializing, and a
    # driver's copy; not four entries' (8 MiB)
    assert peak < 5 * mib, f"peak {peak / mib:.1f} MiB"

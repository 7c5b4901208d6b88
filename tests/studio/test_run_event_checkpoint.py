"""``RunEvent.checkpoint_id``: the index an old step's waterfall is found by."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User

from studio.models import Run, RunEvent, Thread, root_checkpoint_id
from studio.services import run_log, waterfall

pytestmark = pytest.mark.django_db

_fill = __import__(
    "studio.migrations.0005_run_event_checkpoint", fromlist=["fill_checkpoint_ids"]
).fill_checkpoint_ids


def _run() -> Run:
    owner = User.objects.create_user("ada")
    thread = Thread.objects.create(graph="purchase", owner=owner)
    return Run.objects.create(thread=thread, graph="purchase")


def _step(number: int, ns: list[str] | None = None) -> dict[str, Any]:
    return {
        "step": number,
        "ns": ns or [],
        "checkpoint_id": f"c{number}",
        "started": 10.0 * number,
        "finished": 10.0 * number + 1,
        "waits": {},
    }


def _task(number: int) -> dict[str, Any]:
    return {
        "task_id": f"t{number}",
        "node": f"node{number}",
        "step": number,
        "ns": [],
        "started": 10.0 * number,
        "finished": 10.0 * number + 0.5,
        "duration": 0.5,
    }


def test_root_step_and_checkpoint_events_name_their_checkpoint() -> None:
    assert root_checkpoint_id("step", _step(3)) == "c3"
    assert root_checkpoint_id("checkpoint", {"checkpoint_id": "c3", "ns": []}) == "c3"
    assert root_checkpoint_id("step", _step(3, ns=["sub:1"])) is None  # a subgraph's
    assert root_checkpoint_id("task.end", {"checkpoint_id": "c3"}) is None
    assert root_checkpoint_id("step", ["not", "a", "dict"]) is None


def test_every_way_of_writing_an_event_fills_the_column() -> None:
    run = _run()
    created = run_log.append(run, "step", _step(1))
    writer = run_log.EventWriter(run)
    writer.add("step", _step(2))
    writer.add("checkpoint", {"checkpoint_id": "c2", "ns": [], "seconds": 0.1})
    writer.add("step", _step(3, ns=["sub:1"]))
    writer.flush()

    stored = list(
        RunEvent.objects.order_by("id").values_list("checkpoint_id", flat=True)
    )
    assert created.checkpoint_id == "c1"
    assert stored == ["c1", "c2", "c2", None]


def test_the_migration_fills_events_written_before_it() -> None:
    run = _run()
    run_log.append(run, "step", _step(1))
    run_log.append(run, "task.end", _task(1))
    RunEvent.objects.update(checkpoint_id=None)  # as rows written before the column

    _fill(apps, None)

    assert list(
        RunEvent.objects.order_by("id").values_list("kind", "checkpoint_id")
    ) == [("step", "c1"), ("task.end", None)]


def test_an_old_step_s_waterfall_is_found_among_many_later_ones() -> None:
    run = _run()
    writer = run_log.EventWriter(run)
    for number in range(1, 301):
        writer.add("task.end", _task(number))
        writer.add("step", _step(number))
        writer.add(
            "checkpoint", {"checkpoint_id": f"c{number}", "ns": [], "seconds": 0.25}
        )
    writer.flush()

    step = waterfall.for_checkpoint(run.thread_id, run.run_id, "c7")

    assert step is not None
    assert (step.step, step.checkpoint_id) == (7, "c7")
    assert [bar.node for bar in step.bars] == ["node7"]
    assert step.save == pytest.approx(0.25)
    assert waterfall.for_checkpoint(run.thread_id, run.run_id, "c999") is None

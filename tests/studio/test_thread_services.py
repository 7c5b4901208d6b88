"""Thread services on real runs: bounded timeline reads, blame, branch compare, waterfalls."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from studio.errors import CheckpointNotFound, InvalidInput, NotFound, ThreadNotFound
from studio.models import RunEvent
from studio.services import blame, compare, threads, time_travel, waterfall
from studio.services.registered_graphs import runnable
from tests._support.studio import serve_graphs
from tests._support.threads import GRAPHS, checkpoint_id, checkpoints, drain, run_now

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {
    "request_id": "R-3",
    "approval_version": 1,
    "amount_minor": 250_000,
    "vendor": "Acme",
}


_graphs = serve_graphs(GRAPHS)


def ids(graph: str, thread_id: str) -> list[str]:
    return [checkpoint_id(s) for s in checkpoints(graph, thread_id)]


class CountingSaver:
    """Wraps the saver's ``list`` to count the checkpoints it hands out."""

    def __init__(self, saver: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loaded = 0
        self.limits: list[int | None] = []
        original = saver.list

        def counting(config: Any, **kwargs: Any) -> Any:
            self.limits.append(kwargs.get("limit"))
            for item in original(config, **kwargs):
                self.loaded += 1
                yield item

        monkeypatch.setattr(saver, "list", counting)


# -- the timeline reads one page, whatever the history's length -----------------------


def test_thread_page_reads_a_bounded_number_of_checkpoints(
    ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    graph = runnable("notes")
    config = {"configurable": {"thread_id": thread_id}}
    for i in range(60):
        config = graph.update_state(config, {"title": f"t{i}"}, as_node="draft")
    counter = CountingSaver(graph.checkpointer, monkeypatch)

    page = threads.thread_page(ada, thread_id)

    assert len(page.timeline.rows) == threads.PAGE_SIZE
    assert page.timeline.older == page.timeline.rows[-1].checkpoint_id
    assert counter.limits and all(
        limit is not None and limit <= threads.PAGE_SIZE + 1 for limit in counter.limits
    )
    assert (
        counter.loaded <= threads.PAGE_SIZE + 1 + 2
    )  # the page, the step and its parent


def test_thread_page_of_an_unknown_or_invisible_thread_is_not_found(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    bob = User.objects.create_user("bob")

    with pytest.raises(ThreadNotFound):
        threads.thread_page(bob, thread_id)
    with pytest.raises(ThreadNotFound):
        threads.thread_page(ada, "nope")
    with pytest.raises(CheckpointNotFound):
        threads.thread_page(
            ada, thread_id, checkpoint_id="1f000000-0000-6000-8000-0000000"
        )
    with pytest.raises(CheckpointNotFound):
        threads.step_panel(ada, thread_id, "../../etc")


def test_step_panel_shows_send_fan_out_tasks_and_merged_evidence(ada: User) -> None:
    thread_id = run_now(ada, "research", {"question": "pricing and latency"}).thread_id
    after_research = next(
        s for s in checkpoints("research", thread_id) if s.metadata["step"] == 2
    )

    panel = threads.step_panel(ada, thread_id, checkpoint_id(after_research))

    assert [kv.key for kv in panel.writes] == ["research", "research"]
    paths = {row.path: row.op for row in panel.diff}
    assert all(
        op == "added" for path, op in paths.items() if path.startswith("evidence.")
    )
    assert len([p for p in paths if p.startswith("evidence.")]) == 4
    assert panel.nodes_ran == ("research",)
    assert panel.nodes_next == ("write",)


def test_step_panel_diffs_messages_by_id(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    run_now(ada, "notes", thread_id=thread_id, command={"resume": "yes"})
    head = ids("notes", thread_id)[0]

    panel = threads.step_panel(ada, thread_id, head)

    ops = {row.path: row.op for row in panel.diff}
    assert ops["messages[id=m1]"] == "message_replaced"
    assert ops["messages[id=m2]"] == "message_added"
    assert ops["log"] == "appended"
    assert ops["tags.stage.name"] == "changed"
    assert ops["done"] == "added"
    long_message = next(r for r in panel.diff if r.path == "messages[id=m2]")
    assert long_message.new is not None and long_message.new.long


def test_step_panels_of_the_input_and_the_first_step_show_the_input(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    first, given = ids("notes", thread_id)[-2:]

    for checkpoint in (given, first):
        panel = threads.step_panel(ada, thread_id, checkpoint)
        assert [(kv.key, kv.value.short) for kv in panel.writes] == [
            ("__start__", '{"title": "hello"}')
        ]
    assert threads.step_panel(ada, thread_id, first).nodes_ran == ("__start__",)


# -- blame ---------------------------------------------------------------------------------


def test_blame_names_both_parallel_writers_of_an_append_key(ada: User) -> None:
    thread_id = run_now(ada, "purchase", REQUEST).thread_id
    head = ids("purchase", thread_id)[0]

    view = blame.blame(ada, thread_id, head, "checks")

    assert view.kind == "append"
    assert [e.step for e in view.entries] == [2]
    assert sorted(view.entries[0].nodes) == ["budget", "compliance"]
    assert len(view.entries[0].written) == 2
    assert view.more == ""


def test_blame_follows_the_chain_back_to_the_input(ada: User) -> None:
    thread_id = run_now(ada, "purchase", {**REQUEST, "vendor": "  Acme  "}).thread_id
    head = ids("purchase", thread_id)[0]

    vendor = blame.blame(ada, thread_id, head, "vendor")
    amount = blame.blame(ada, thread_id, head, "amount_minor")

    assert [(e.step, e.nodes) for e in vendor.entries] == [
        (1, ("normalize",)),
        (0, ("__start__",)),
    ]
    assert vendor.entries[0].value.short == '"Acme"'
    assert vendor.entries[1].written[0].short == '"  Acme  "'
    assert [(e.step, e.source) for e in amount.entries] == [(0, "loop")]
    assert amount.entries[0].written[0].short == "250000"


def test_blame_sees_a_fork_edit_as_a_write_by_its_node(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "first"}).thread_id
    head = ids("notes", thread_id)[0]
    outcome = time_travel.fork(
        ada, thread_id, head, {"as_node": "review", "state.title": "second"}
    )

    view = blame.blame(ada, thread_id, outcome.checkpoint_id, "title")

    assert [(e.step, e.source, e.nodes) for e in view.entries] == [
        (2, "update", ("review",)),
        (0, "loop", ("__start__",)),
    ]
    assert view.entries[0].written[0].short == '"second"'


def test_step_panel_of_a_fork_edit_shows_the_values_written(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "first"}).thread_id
    head = ids("notes", thread_id)[0]
    outcome = time_travel.fork(
        ada, thread_id, head, {"as_node": "review", "state.log": '["extra"]'}
    )

    panel = threads.step_panel(ada, thread_id, outcome.checkpoint_id)

    assert [(kv.key, kv.value.short) for kv in panel.writes] == [
        ("review", '{"log": ["extra"]}')
    ]
    assert [(row.path, row.op) for row in panel.diff] == [("log", "appended")]


def test_blame_walk_stops_and_offers_to_continue(
    ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    graph = runnable("notes")
    config = {"configurable": {"thread_id": thread_id}}
    for i in range(6):
        config = graph.update_state(config, {"title": f"t{i}"}, as_node="draft")
    head = checkpoint_id(graph.get_state(config))
    monkeypatch.setattr(blame, "MAX_ENTRIES", 4)

    first = blame.blame(ada, thread_id, head, "title")
    rest = blame.blame(ada, thread_id, head, "title", start=first.more)

    assert [e.value.short for e in first.entries] == ['"t5"', '"t4"', '"t3"', '"t2"']
    assert first.more
    assert [e.value.short for e in rest.entries] == ['"t1"', '"t0"', '"t"']
    assert rest.more == ""


def test_blame_of_an_unknown_key_is_not_found(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id

    with pytest.raises(NotFound):
        blame.blame(ada, thread_id, ids("notes", thread_id)[0], "nope")


# -- branch compare ----------------------------------------------------------------------------


def test_compare_marks_the_keys_that_differ_between_two_branches(ada: User) -> None:
    thread_id = run_now(ada, "open_purchase", REQUEST).thread_id
    normalized = next(
        checkpoint_id(s)
        for s in checkpoints("open_purchase", thread_id)
        if s.metadata["step"] == 1
    )
    main_head = ids("open_purchase", thread_id)[0]
    time_travel.fork(
        ada,
        thread_id,
        normalized,
        {"as_node": "normalize", "state.amount_minor": "20000000", "run": "on"},
    )
    drain()
    branch_head = ids("open_purchase", thread_id)[0]

    view = compare.compare(ada, thread_id, main_head, branch_head)

    differing = {row.key for row in view.rows if not row.same}
    assert differing == {"amount_minor", "budget_ok", "checks"}
    checks = next(row for row in view.rows if row.key == "checks")
    assert checks.changes  # element-wise differences, with paths
    labels = dict(view.choices)
    assert any(label.startswith("main head") for label in labels.values())
    assert any(label.startswith("branch 1 head") for label in labels.values())


def test_compare_shows_a_key_missing_on_one_side_as_added(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    head, _, oldest = ids("notes", thread_id)

    view = compare.compare(ada, thread_id, oldest, head)

    count = next(row for row in view.rows if row.key == "count")
    assert count.left.short == "—"
    assert [(c.path, c.op) for c in count.changes] == [("count", "added")]


def test_compare_needs_two_checkpoints(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id

    with pytest.raises(InvalidInput):
        compare.compare(ada, thread_id, "", ids("notes", thread_id)[0])


# -- waterfalls ----------------------------------------------------------------------------------


def test_waterfall_of_a_parallel_step_has_a_bar_per_task_and_the_save(
    ada: User,
) -> None:
    thread_id = run_now(ada, "purchase", REQUEST).thread_id
    head = checkpoints("purchase", thread_id)[0]

    step = waterfall.for_checkpoint(
        thread_id, head.metadata["run_id"], checkpoint_id(head)
    )

    assert step is not None
    assert step.step == 2
    assert sorted(bar.node for bar in step.bars) == ["budget", "compliance"]
    assert all(0 <= bar.x <= 1000 and bar.width >= 2 for bar in step.bars)
    assert step.save is not None and step.save >= 0
    assert step.wall >= max(bar.duration for bar in step.bars)


def test_waterfall_of_a_run_lists_its_steps_in_order(ada: User) -> None:
    run = run_now(ada, "research", {"question": "pricing and latency"})

    view = waterfall.for_run(ada, run.thread_id)

    assert view.run_id == run.run_id
    assert [s.step for s in view.steps] == [0, 1, 2, 3]
    research = next(s for s in view.steps if s.step == 2)
    assert [b.node for b in research.bars] == ["research", "research"]


def test_waterfall_without_events_is_none(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    RunEvent.objects.filter(thread_id=thread_id).delete()
    head = checkpoints("notes", thread_id)[0]

    assert (
        waterfall.for_checkpoint(
            thread_id, head.metadata["run_id"], checkpoint_id(head)
        )
        is None
    )
    assert waterfall.for_run(ada, thread_id).steps == ()

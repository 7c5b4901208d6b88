"""The fork tree from run and edit segments (studio.services.fork_tree.build): pure."""

from __future__ import annotations

from studio.services.fork_tree import Segment, build


def seg(
    first: str, last: str, start: str = "", how: str = "run", steps=(0, 3)
) -> Segment:
    return Segment(
        first, last, steps[0], steps[1], start_from=start, how=how, who="ada"
    )


def test_build_without_segments_or_branches_is_none() -> None:
    assert build([]) is None
    assert build([seg("a1", "a5")]) is None


def test_build_runs_that_continue_the_head_are_one_line() -> None:
    segments = [
        seg("a1", "a3"),
        seg("b1", "b4"),
        seg("c1", "c2", start="b4", how="replay"),
    ]

    assert build(segments) is None


def test_build_replay_from_the_middle_opens_a_branch() -> None:
    tree = build(
        [seg("a1", "a5"), seg("b1", "b3", start="a3", how="replay", steps=(2, 4))]
    )

    assert tree is not None
    assert (tree.label, tree.head_id, tree.how) == ("main", "a5", "main")
    (branch,) = tree.children
    assert branch.label == "branch 1"
    assert branch.fork_id == "a3"
    assert branch.fork_step == 2  # a replay starts with a copy at the fork's step
    assert (branch.root_id, branch.head_id, branch.head_step) == ("b1", "b3", 4)
    assert branch.how == "replay"
    assert branch.who == "ada"


def test_build_edit_branch_forks_one_step_before_its_checkpoint() -> None:
    tree = build(
        [seg("a1", "a5"), seg("e1", "e1", start="a2", how="edit", steps=(3, 3))]
    )

    assert tree is not None
    (branch,) = tree.children
    assert (branch.how, branch.fork_step, branch.head_id) == (
        "fork with edits",
        2,
        "e1",
    )


def test_build_runs_after_an_edit_continue_its_branch() -> None:
    tree = build(
        [
            seg("a1", "a5"),
            seg("e1", "e1", start="a2", how="edit"),
            seg("f1", "f4"),  # continues from the head: the edit
        ]
    )

    assert tree is not None
    (branch,) = tree.children
    assert (branch.root_id, branch.head_id) == ("e1", "f4")


def test_build_nests_a_branch_off_a_branch() -> None:
    tree = build(
        [
            seg("a1", "a5"),
            seg("b1", "b5", start="a2", how="replay"),
            seg("c1", "c3", start="b3", how="replay"),
            seg("d1", "d2", start="a4", how="replay"),
        ]
    )

    assert tree is not None
    assert [c.root_id for c in tree.children] == ["b1", "d1"]
    assert [c.label for c in tree.children] == ["branch 1", "branch 3"]
    (nested,) = tree.children[0].children
    assert (nested.label, nested.fork_id, nested.head_id) == ("branch 2", "b3", "c3")


def test_build_attaches_a_start_it_does_not_know_to_the_main_line() -> None:
    tree = build([seg("a1", "a5"), seg("b1", "b2", start="zz-unknown", how="replay")])

    assert tree is not None
    assert tree.children[0].fork_id == "zz-unknown"


def test_build_marks_the_branch_holding_the_selected_checkpoint() -> None:
    segments = [seg("a1", "a5"), seg("b1", "b3", start="a3", how="replay")]

    tree = build(segments, selected="b2")

    assert tree is not None
    assert tree.current is False
    assert tree.children[0].current is True
    assert build(segments, selected="a4").current is True  # type: ignore[union-attr]


def test_build_orders_segments_by_checkpoint_time_not_input_order() -> None:
    tree = build([seg("b1", "b3", start="a3", how="replay"), seg("a1", "a5")])

    assert tree is not None
    assert tree.root_id == "a1"
    assert tree.children[0].root_id == "b1"

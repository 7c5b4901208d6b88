"""A thread's fork tree, from what the studio recorded: runs, their checkpoints, fork edits.

Walking checkpoint parent links would read the whole history (the SQLite
saver cannot filter on metadata in SQL), so the tree is built from studio
tables instead, in a few indexed queries:

- every run is a *segment*: its first and last root checkpoint (from its
  ``checkpoint`` events) and where it started (``Run.checkpoint_id``, or the
  thread's head when empty);
- every "fork with edits" is a one-checkpoint segment (its ``AuditEntry``).

Segments are ordered in time (checkpoint ids are time-ordered and one run at
a time runs per thread). A segment that starts at the previous segment's last
checkpoint continues that branch; one that starts anywhere else opens a new
branch under the branch holding its start. :func:`build` is pure.

A thread whose runs never started from a chosen checkpoint and that has no
fork edits has no branches: no event is read then.

:func:`read` gives a :class:`ForkTree`: the tree to draw, and what the
branch-aware timeline needs (which branch made a checkpoint, a branch's newest
checkpoint, the branches for its switcher). :func:`grow` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db.models import Max, Min

from studio.models import AuditEntry, Run, RunEvent, Thread
from studio.presenters import BranchView

__all__ = (
    "FORK_ACTION",
    "ForkTree",
    "Segment",
    "build",
    "edit_values",
    "fork_tree",
    "grow",
    "read",
)

FORK_ACTION = "thread.fork"
"""``AuditEntry.action`` of a fork with edits (``detail``: from, checkpoint_id, step)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """Checkpoints made by one run or one edit, in one line."""

    first_id: str
    last_id: str
    first_step: int | None
    last_step: int | None
    start_from: str = ""
    """The checkpoint it started from; "" = the thread's head at the time."""
    how: str = "run"
    """run / replay / edit."""
    who: str = ""
    when: datetime | None = None

    def holds(self, checkpoint_id: str) -> bool:
        return self.first_id <= checkpoint_id <= self.last_id


@dataclass
class _Branch:
    root: Segment
    fork_id: str = ""
    segments: list[Segment] = field(default_factory=list)
    children: list[_Branch] = field(default_factory=list)
    parent: _Branch | None = None

    def holds(self, checkpoint_id: str) -> bool:
        return any(s.holds(checkpoint_id) for s in self.segments)


@dataclass(frozen=True)
class ForkTree:
    """A thread's branches: to draw the tree, and to choose the timeline's branch.

    A branch is named by its root, the first checkpoint it made (stable, while
    its head moves on as runs continue it).
    """

    main: _Branch
    branches: tuple[_Branch, ...]
    labels: dict[int, str]

    def view(self, current: str = "") -> BranchView:
        """The tree; ``current`` is the root of the branch being viewed."""
        return _view(self.main, self.labels, "", current)

    def holder(self, checkpoint_id: str) -> str:
        """The root of the branch that made ``checkpoint_id`` ("" when none did)."""
        for branch in self.branches:
            if checkpoint_id and branch.holds(checkpoint_id):
                return branch.root.first_id
        return ""

    def label(self, root_id: str) -> str:
        """The branch's label ("main", "branch 1"...), "" for an unknown root."""
        for branch in self.branches:
            if branch.root.first_id == root_id:
                return self.labels[id(branch)]
        return ""

    def head(self, root_id: str) -> str:
        """The newest checkpoint of the branch rooted at ``root_id`` ("" if unknown)."""
        for branch in self.branches:
            if branch.root.first_id == root_id:
                return branch.segments[-1].last_id
        return ""

    def flat(self, current: str = "") -> tuple[BranchView, ...]:
        """Every branch (children left out), main first, in the tree's order."""
        found: list[BranchView] = []

        def walk(view: BranchView) -> None:
            found.append(replace(view, children=()))
            for child in view.children:
                walk(child)

        walk(self.view(current))
        return tuple(found)


def grow(segments: Iterable[Segment]) -> ForkTree | None:
    """The branches the segments make, or None when there is only the main line."""
    ordered = sorted(segments, key=lambda s: s.first_id)
    if not ordered:
        return None
    main = _Branch(root=ordered[0], segments=[ordered[0]])
    branches = [main]
    owner = {id(ordered[0]): main}
    previous = ordered[0]
    for segment in ordered[1:]:
        start = segment.start_from
        if not start or start == previous.last_id:
            branch = owner[id(previous)]
            branch.segments.append(segment)
        else:
            parent = next((b for b in branches if b.holds(start)), main)
            branch = _Branch(
                root=segment, fork_id=start, segments=[segment], parent=parent
            )
            parent.children.append(branch)
            branches.append(branch)
        owner[id(segment)] = branch
        previous = segment
    if len(branches) == 1:
        return None
    labels = {id(b): f"branch {i}" for i, b in enumerate(branches) if i}
    labels[id(main)] = "main"
    return ForkTree(main=main, branches=tuple(branches), labels=labels)


def build(segments: Iterable[Segment], selected: str = "") -> BranchView | None:
    """The tree (main line at the root), or None when there is no branch.

    ``selected``: the branch holding this checkpoint is marked ``current``.
    """
    tree = grow(segments)
    return None if tree is None else _view(tree.main, tree.labels, selected, "")


def _view(
    branch: _Branch, labels: dict[int, str], selected: str, current: str
) -> BranchView:
    root, last = branch.root, branch.segments[-1]
    fork_step: int | None = None
    if branch.fork_id and root.first_step is not None:
        # a replay's first checkpoint is a copy at the fork's step; an edit is one later
        fork_step = root.first_step - 1 if root.how == "edit" else root.first_step
    return BranchView(
        label=labels[id(branch)],
        root_id=root.first_id,
        head_id=last.last_id,
        head_step=last.last_step,
        fork_id=branch.fork_id,
        fork_step=fork_step,
        how={"edit": "fork with edits", "replay": "replay"}.get(root.how, "run")
        if branch.fork_id
        else "main",
        who=root.who,
        when=root.when,
        children=tuple(
            _view(child, labels, selected, current)
            for child in sorted(branch.children, key=lambda b: b.root.first_id)
        ),
        current=(bool(selected) and branch.holds(selected))
        or (bool(current) and root.first_id == current),
        parent_label=labels[id(branch.parent)] if branch.parent is not None else "",
    )


# -- from the database ----------------------------------------------------------------


def edit_values(thread_id: str, checkpoint_id: str) -> dict[str, Any] | None:
    """The values a studio "fork with edits" wrote to make ``checkpoint_id``, if it did.

    The checkpoint's metadata names only the keys; the audit entry keeps the values.
    """
    detail = (
        AuditEntry.objects.filter(
            thread_id=thread_id,
            action=FORK_ACTION,
            detail__checkpoint_id=checkpoint_id,
        )
        .values_list("detail", flat=True)
        .first()
    )
    values = (detail or {}).get("values")
    return values if isinstance(values, dict) else None


def fork_tree(thread: Thread, selected: str = "") -> BranchView | None:
    """The thread's fork tree, or None when it has no branches (cheap in that case)."""
    tree = read(thread)
    return None if tree is None else _view(tree.main, tree.labels, selected, "")


def read(thread: Thread) -> ForkTree | None:
    """The thread's branches, or None when it has none (cheap in that case)."""
    runs = list(
        Run.objects.filter(thread=thread)
        .order_by("created_at")
        .values("run_id", "checkpoint_id", "created_at", "created_by__username")
    )
    edits = list(
        AuditEntry.objects.filter(thread_id=thread.thread_id, action=FORK_ACTION)
        .order_by("created_at")
        .values("detail", "created_at", "actor__username")
    )
    if not edits and not any(r["checkpoint_id"] for r in runs):
        return None
    return grow([*_run_segments(thread, runs), *_edit_segments(edits)])


def _run_segments(thread: Thread, runs: Sequence[Mapping[str, Any]]) -> list[Segment]:
    bounds = (
        RunEvent.objects.filter(thread=thread, kind="checkpoint", payload__ns=[])
        .values("run_id")
        .annotate(first=Min("id"), last=Max("id"))
    )
    ends = {row["run_id"]: (row["first"], row["last"]) for row in bounds}
    payloads = dict(
        RunEvent.objects.filter(
            id__in=[i for pair in ends.values() for i in pair]
        ).values_list("id", "payload")
    )
    segments = []
    for run in runs:
        pair = ends.get(run["run_id"])
        if pair is None:
            continue
        first, last = payloads[pair[0]], payloads[pair[1]]
        segments.append(
            Segment(
                first_id=str(first.get("checkpoint_id")),
                last_id=str(last.get("checkpoint_id")),
                first_step=first.get("step"),
                last_step=last.get("step"),
                start_from=run["checkpoint_id"] or "",
                how="replay" if run["checkpoint_id"] else "run",
                who=run["created_by__username"] or "",
                when=run["created_at"],
            )
        )
    return segments


def _edit_segments(edits: Sequence[Mapping[str, Any]]) -> list[Segment]:
    segments = []
    for edit in edits:
        detail = edit["detail"] or {}
        new_id = str(detail.get("checkpoint_id") or "")
        if not new_id:
            continue
        step = detail.get("step")
        segments.append(
            Segment(
                first_id=new_id,
                last_id=new_id,
                first_step=step,
                last_step=step,
                start_from=str(detail.get("from") or ""),
                how="edit",
                who=edit["actor__username"] or "",
                when=edit["created_at"],
            )
        )
    return segments

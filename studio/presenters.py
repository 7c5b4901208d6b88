"""Plain data for the thread templates: frozen dataclasses of str, numbers and tuples.

Services build these from engine objects and database rows; templates get
nothing else (no engine objects, no querysets, nothing that does I/O while
rendering). State values arrive here already summarized as
:class:`~studio.presentation.diff.ValueText` (text, never markup: templates escape it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from studio.presentation.diff import MISSING, Change, PathPart, ValueText, summarize

__all__ = (
    "ActivityView",
    "BlameEntry",
    "BlameView",
    "BranchView",
    "CompareRow",
    "CompareView",
    "DiffRow",
    "ForkField",
    "ForkFormView",
    "InterruptView",
    "KeyValue",
    "NodeState",
    "StepPanel",
    "TaskView",
    "ThreadListPage",
    "ThreadRow",
    "ThreadSummary",
    "Timeline",
    "TimelineRow",
    "WaterfallBar",
    "WaterfallStep",
    "WaterfallView",
    "json_path",
    "present_changes",
    "short_id",
    "thread_label",
)

OP_LABELS = {
    "added": "added",
    "removed": "removed",
    "changed": "changed",
    "appended": "appended",
    "message_added": "message added",
    "message_replaced": "message replaced",
    "message_removed": "message removed",
}


def short_id(checkpoint_id: str) -> str:
    """The distinctive part of a checkpoint id (uuid6: the time prefix repeats)."""
    return checkpoint_id[-12:] if len(checkpoint_id) > 12 else checkpoint_id


# -- threads list ------------------------------------------------------------------


def thread_label(title: str, graph: str, thread_id: str) -> str:
    """What a thread is called: its title, else its graph and the start of its id."""
    return title or f"{graph or 'thread'} · {thread_id[:8]}"


@dataclass(frozen=True, slots=True)
class ThreadRow:
    thread_id: str
    graph: str
    status: str
    """running / interrupted / done / failed / new."""
    owner: str
    created_at: datetime
    updated_at: datetime
    title: str = ""
    """From the input of its runs ("" until a run gave it one: see ``label``)."""

    @property
    def label(self) -> str:
        return thread_label(self.title, self.graph, self.thread_id)


@dataclass(frozen=True, slots=True)
class ThreadListPage:
    rows: tuple[ThreadRow, ...]
    graphs: tuple[str, ...]
    """Graph names to filter by."""
    statuses: tuple[str, ...]
    graph: str
    """The graph filter ("" for all)."""
    status: str
    """The status filter ("" for all)."""
    q: str
    """The search words ("" for none)."""
    number: int
    num_pages: int
    total: int
    previous_page: int | None
    next_page: int | None


# -- one thread ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    thread_id: str
    graph: str
    status: str
    owner: str
    created_at: datetime
    updated_at: datetime
    title: str = ""
    active_run: str = ""
    """Id of a pending or running run ("" when none): the page polls while set."""

    @property
    def label(self) -> str:
        return thread_label(self.title, self.graph, self.thread_id)


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One checkpoint in the timeline (newest first)."""

    checkpoint_id: str
    step: int
    source: str
    """input / loop / update / fork."""
    time: datetime | None
    nodes: tuple[str, ...]
    """Nodes whose writes made this checkpoint."""
    changed: tuple[str, ...]
    """State keys whose value changed at this checkpoint."""
    parent_id: str
    interrupted: bool = False
    """The step after this checkpoint paused on an interrupt."""
    resumed: bool = False
    failed: bool = False
    """A task of the step after this checkpoint failed."""
    selected: bool = False
    branch: str = ""
    """The branch that made this checkpoint ("main", "branch 1"; "" without branches)."""
    inherited: bool = False
    """Made by an earlier branch this one forked from (shown, told apart)."""

    @property
    def short_id(self) -> str:
        return short_id(self.checkpoint_id)

    @property
    def branch_start(self) -> bool:
        return self.source in ("fork", "update")


@dataclass(frozen=True, slots=True)
class Timeline:
    """One branch's checkpoints, newest first, a page at a time."""

    thread_id: str
    rows: tuple[TimelineRow, ...]
    before: str
    """The cursor this page was read with ("" for the newest page)."""
    older: str
    """Cursor of the next (older) page, "" when this is the last."""
    poll: bool = False
    """Re-fetch while a run is active (newest page only)."""
    branches: tuple[BranchView, ...] = ()
    """The thread's branches for the switcher (none when it has one line)."""
    branch: str = ""
    """Root checkpoint of the branch shown ("" without branches)."""
    pinned: bool = False
    """The branch was chosen (``?branch=``): refreshes keep it. Otherwise the
    timeline follows the branch of the thread's newest checkpoint."""

    @property
    def selected(self) -> str:
        return next((r.checkpoint_id for r in self.rows if r.selected), "")

    @property
    def shown(self) -> BranchView | None:
        return next((b for b in self.branches if b.root_id == self.branch), None)

    @property
    def link_query(self) -> str:
        """``?before=...&branch=...`` for step links: they keep the page and branch."""
        return _query(before=self.before, branch=self.branch)

    @property
    def refresh_query(self) -> str:
        """``?branch=...`` when the branch was chosen: live refreshes keep it."""
        return _query(branch=self.branch if self.pinned else "")


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: ValueText


@dataclass(frozen=True, slots=True)
class DiffRow:
    path: str
    op: str
    label: str
    old: ValueText | None
    new: ValueText | None
    crumbs: tuple[str, ...] = ()
    """The path as a breadcrumb: ``("items", "[0]", "qty")``."""
    json_path: str = ""
    """The path as JSONPath from the state: ``$.items[0].qty``."""


@dataclass(frozen=True, slots=True)
class InterruptView:
    interrupt_id: str
    value: ValueText
    fields: tuple[KeyValue, ...] = ()
    """A dict payload, key by key (shown as a table)."""


@dataclass(frozen=True, slots=True)
class TaskView:
    task_id: str
    name: str
    result: ValueText | None
    error: str = ""
    interrupts: tuple[InterruptView, ...] = ()


@dataclass(frozen=True, slots=True)
class WaterfallBar:
    """One task of a step; x/width are in 0..1000 of the step's span (SVG units)."""

    task_id: str
    node: str
    duration: float
    wait: float
    x: float
    width: float
    wait_x: float
    wait_width: float
    error: bool = False
    interrupted: bool = False

    @property
    def duration_ms(self) -> float:
        return self.duration * 1000

    @property
    def wait_ms(self) -> float:
        return self.wait * 1000


@dataclass(frozen=True, slots=True)
class WaterfallStep:
    step: int
    checkpoint_id: str
    wall: float
    """Seconds from the first task start to the barrier."""
    save: float | None
    """Seconds spent saving the checkpoint (None when unknown)."""
    bars: tuple[WaterfallBar, ...]
    save_x: float = 0.0
    save_width: float = 0.0

    @property
    def wall_ms(self) -> float:
        return self.wall * 1000

    @property
    def save_ms(self) -> float | None:
        return None if self.save is None else self.save * 1000

    @property
    def slowest(self) -> str:
        return max(self.bars, key=lambda b: b.duration).node if self.bars else ""


@dataclass(frozen=True, slots=True)
class WaterfallView:
    thread_id: str
    run_id: str
    runs: tuple[tuple[str, str], ...]
    """(run id, label) of the thread's runs, newest first."""
    steps: tuple[WaterfallStep, ...]


@dataclass(frozen=True, slots=True)
class StepPanel:
    """One checkpoint: what made it, what changed, what runs next."""

    thread_id: str
    graph: str
    checkpoint_id: str
    step: int
    source: str
    time: datetime | None
    parent_id: str
    writes: tuple[KeyValue, ...]
    """Node -> its update, for the step that made this checkpoint."""
    diff: tuple[DiffRow, ...]
    diff_cut: bool
    tasks: tuple[TaskView, ...]
    """Tasks of the next step, with results/errors/interrupts when they ran."""
    state: tuple[KeyValue, ...]
    state_keys: tuple[str, ...]
    nodes_ran: tuple[str, ...]
    nodes_next: tuple[str, ...]
    nodes_interrupted: tuple[str, ...]
    nodes_failed: tuple[str, ...] = ()
    waterfall: WaterfallStep | None = None
    before: str = ""
    """The timeline cursor to keep in links."""
    read_only: bool = False
    """The viewer may read but not change the thread (a reviewer): no time-travel actions."""
    follow: bool = False
    """Shown by default as the thread's newest step: when a run finishes, the page
    swaps in the new newest step (else it refreshes this one)."""
    branch: str = ""
    """The timeline's branch (its root checkpoint), kept in links ("" for none)."""

    @property
    def short_id(self) -> str:
        return short_id(self.checkpoint_id)

    @property
    def link_query(self) -> str:
        """``?before=...&branch=...``: links to other steps keep the timeline's page."""
        return _query(before=self.before, branch=self.branch)

    @property
    def interrupted(self) -> bool:
        return bool(self.nodes_interrupted)

    @property
    def highlight(self) -> str:
        """The nodes to mark on the graph drawing, as JSON (read by threads.js)."""
        return json.dumps(
            {
                "ran": list(self.nodes_ran),
                "next": list(self.nodes_next),
                "interrupted": list(self.nodes_interrupted),
                "failed": list(self.nodes_failed),
            }
        )

    @property
    def can_replay(self) -> bool:
        return bool(self.nodes_next)


# -- live activity ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node of the thread's graph and its state in the active run."""

    node: str
    state: str
    """"" (idle) / running / done / interrupted / failed."""


@dataclass(frozen=True, slots=True)
class ActivityView:
    """The Activity panel: the newest run events, and where the WebSocket resumes."""

    thread_id: str
    events: tuple[dict[str, Any], ...]
    """``studio.services.activity.event_view`` dicts, newest first (in run order)."""
    last_event_id: int
    """The socket asks for the events after this one (0: all)."""
    older: bool
    """The thread has older events than those shown."""
    nodes: tuple[NodeState, ...]
    outcome: dict[str, Any] | None = None
    """The newest ``run.status`` event (pinned at the top), None before any run."""


# -- fork tree ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BranchView:
    """A line of checkpoints; ``children`` branch off it."""

    label: str
    root_id: str
    """First checkpoint of the branch."""
    head_id: str
    """Last checkpoint of the branch."""
    head_step: int | None
    fork_id: str = ""
    """The checkpoint it branched from ("" for the main line)."""
    fork_step: int | None = None
    how: str = ""
    """replay / fork with edits / main."""
    who: str = ""
    when: datetime | None = None
    children: tuple[BranchView, ...] = ()
    current: bool = False
    """Holds the selected checkpoint, or is the branch the timeline shows."""
    parent_label: str = ""
    """The branch it forked from ("" for the main line)."""

    @property
    def head_short(self) -> str:
        return short_id(self.head_id)


# -- blame and compare -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlameEntry:
    checkpoint_id: str
    step: int
    source: str
    nodes: tuple[str, ...]
    """Nodes that wrote the key in that step ("" entries when unknown)."""
    written: tuple[ValueText, ...]
    """What each node wrote to the key (for reducers: the update, not the result)."""
    value: ValueText
    """The key's value after the write."""
    time: datetime | None

    @property
    def short_id(self) -> str:
        return short_id(self.checkpoint_id)


@dataclass(frozen=True, slots=True)
class BlameView:
    thread_id: str
    checkpoint_id: str
    step: int
    key: str
    keys: tuple[str, ...]
    kind: str
    """value / append / messages / reducer."""
    current: ValueText
    entries: tuple[BlameEntry, ...]
    """Newest first: entries[0] is the write that gave the current value."""
    more: str = ""
    """Cursor to continue the walk further back ("" when the root was reached)."""
    scanned: int = 0

    @property
    def short_id(self) -> str:
        return short_id(self.checkpoint_id)


@dataclass(frozen=True, slots=True)
class CompareRow:
    key: str
    left: ValueText
    right: ValueText
    same: bool
    changes: tuple[DiffRow, ...] = ()


@dataclass(frozen=True, slots=True)
class CompareView:
    thread_id: str
    left_id: str
    right_id: str
    left_step: int
    right_step: int
    rows: tuple[CompareRow, ...]
    choices: tuple[tuple[str, str], ...] = ()
    """(checkpoint id, label) offered in the pickers: branch heads and recent ones."""

    @property
    def differing(self) -> int:
        return sum(1 for row in self.rows if not row.same)


# -- fork with edits ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ForkField:
    key: str
    widget: str
    """text / number / choice / json (as ``studio.input_fields``)."""
    value: str
    """The text in the field."""
    kind: str
    """value / append / messages / reducer: what submitting it does."""
    help: str
    type_hint: str = ""
    step: str = ""
    choices: tuple[tuple[str, str], ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"state.{self.key}"

    @property
    def multiline(self) -> bool:
        return "\n" in self.value or len(self.value) > 60

    @property
    def dom_id(self) -> str:
        return "fork-" + "".join(
            c if c.isalnum() or c in "-_" else "-" for c in self.key
        )


@dataclass(frozen=True, slots=True)
class ForkFormView:
    thread_id: str
    checkpoint_id: str
    step: int
    fields: tuple[ForkField, ...]
    nodes: tuple[str, ...]
    as_node: str
    run: bool = False
    errors: tuple[str, ...] = ()
    schema_kind: str = ""
    locked_keys: frozenset[str] = frozenset()
    """Keys the graph's governance protects: shown read-only (the server refuses them too)."""
    locked_nodes: frozenset[str] = frozenset()
    """Nodes only the reviewer console may write as: not offered (and refused)."""

    @property
    def offered_nodes(self) -> tuple[str, ...]:
        return tuple(node for node in self.nodes if node not in self.locked_nodes)

    @property
    def short_id(self) -> str:
        return short_id(self.checkpoint_id)


# -- helpers ---------------------------------------------------------------------------


def _query(**params: str) -> str:
    """``?a=1&b=2`` of the non-empty ``params`` ("" when all are empty)."""
    given = {key: value for key, value in params.items() if value}
    return f"?{urlencode(given)}" if given else ""


def present_changes(changes: Iterable[Change]) -> tuple[DiffRow, ...]:
    """Diff rows: appended items become one row whose ``new`` is the list of items."""
    return tuple(
        DiffRow(
            path=change.path,
            op=change.op,
            label=OP_LABELS.get(change.op, change.op),
            old=None if change.old is MISSING else summarize(change.old),
            new=None if change.new is MISSING else summarize(change.new),
            crumbs=tuple(_crumb(part) for part in change.parts or (change.path,)),
            json_path=json_path(change.parts or (change.path,)),
        )
        for change in changes
    )


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_path(parts: Iterable[PathPart]) -> str:
    """JSONPath of a value in the state: ``$.items[0].qty``, ``$['a.b']``,
    ``$.messages[?(@.id=='m1')]``."""
    text = "$"
    for part in parts:
        if isinstance(part, tuple):
            text += f"[?(@.{part[0]}=={_quoted(part[1])})]"
        elif isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.match(part):
            text += f".{part}"
        else:
            text += f"[{_quoted(part)}]"
    return text


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _crumb(part: PathPart) -> str:
    if isinstance(part, tuple):
        return f"{part[0]}={part[1]}"
    if isinstance(part, int):
        return f"[{part}]"
    return part

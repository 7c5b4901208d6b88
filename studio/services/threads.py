"""Thread pages: the threads list (titles, search), a thread's timeline and one step's panel.

Every function takes the requesting user and checks access with
``access.visible_thread`` (another user's thread is ThreadNotFound: 404, never
403). Reads are bounded: the timeline reads one page of one branch's line
(``ThreadHistory.lineage``: parent links from the branch's newest checkpoint,
or from ``before``), the branches come from the studio's own tables
(``fork_tree.read``), and diffs are computed only for the step shown. Results
are presenters (plain data), never engine objects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils.safestring import SafeString

from engine.constants import START
from studio import graph_registry as registry
from studio.errors import GraphUnavailable, InvalidInput
from studio.models import Run, Thread
from studio.presentation.diff import diff_state, plain, summarize
from studio.presenters import (
    ActivityView,
    BranchView,
    InterruptView,
    KeyValue,
    StepPanel,
    TaskView,
    ThreadListPage,
    ThreadRow,
    ThreadSummary,
    Timeline,
    TimelineRow,
    present_changes,
)
from studio.services import activity, fork_tree, registered_graphs, waterfall
from studio.services.access import can_change, visible_thread, visible_threads
from studio.services.checkpoints import (
    ThreadHistory,
    checkpoint_id_of,
    parent_id_of,
    pending_flags,
    timestamp,
    writers,
)
from studio.services.runs import ACTIVE
from studio.services.transcript import Transcript, transcript_of

__all__ = (
    "PAGE_SIZE",
    "STATUSES",
    "THREADS_PER_PAGE",
    "ThreadPage",
    "list_threads",
    "newest_panel",
    "step_panel",
    "thread_page",
    "timeline",
)

PAGE_SIZE = 20
"""Checkpoints per timeline page."""
THREADS_PER_PAGE = 25
SEARCH_LENGTH = 200
"""Characters of ``q`` that are used."""
SEARCH_WORDS = 8
"""Words of ``q`` that are used (each must match)."""
STATUSES = ("running", "interrupted", "done", "failed", "new")
_STATUS_FILTERS = {
    "running": Q(status=Thread.Status.BUSY),
    "interrupted": Q(status=Thread.Status.INTERRUPTED),
    "failed": Q(status=Thread.Status.ERROR),
    "done": Q(status=Thread.Status.IDLE, has_state=True),
    "new": Q(status=Thread.Status.IDLE, has_state=False),
}


@dataclass(frozen=True, slots=True)
class ThreadPage:
    """Everything the thread page shows."""

    thread: ThreadSummary
    timeline: Timeline
    panel: StepPanel | None
    tree: BranchView | None
    svg: SafeString | None
    activity: ActivityView
    svg_problem: str = ""
    transcript: Transcript | None = None
    """A chat graph's conversation (``studio.services.transcript``), else None."""


# -- the threads list ------------------------------------------------------------------


def list_threads(
    user: Any, *, graph: str = "", status: str = "", q: str = "", page: Any = 1
) -> ThreadListPage:
    """The user's threads (all of them for superusers), newest activity first.

    ``q`` searches: every word of it must appear, in any case, in the thread's
    title, its id or its metadata (as JSON text: keys and values, such as a
    purchase's ``request_id``). The words are matched inside the threads the
    other filters leave (the user's own through the owner index, then graph and
    status): there is no full-text index, so a search reads those rows.

    Raises:
        InvalidInput: ``status`` is not one of :data:`STATUSES`.
    """
    if status and status not in _STATUS_FILTERS:
        raise InvalidInput(
            f"Unknown status {status!r}; use one of: {', '.join(STATUSES)}."
        )
    threads = visible_threads(user)
    if graph:
        threads = threads.filter(graph=graph)
    if status:
        threads = threads.filter(_STATUS_FILTERS[status])
    q = " ".join(q.split())[:SEARCH_LENGTH]
    if q:
        threads = _search(threads, q)
    threads = threads.select_related("owner").order_by("-updated_at", "thread_id")
    paginator = Paginator(threads, THREADS_PER_PAGE)
    current = paginator.get_page(page)
    return ThreadListPage(
        rows=tuple(_row(thread) for thread in current.object_list),
        graphs=tuple(registry.graph_specs()),
        statuses=STATUSES,
        graph=graph,
        status=status,
        q=q,
        number=current.number,
        num_pages=paginator.num_pages,
        total=paginator.count,
        previous_page=current.previous_page_number()
        if current.has_previous()
        else None,
        next_page=current.next_page_number() if current.has_next() else None,
    )


def _search(threads: QuerySet[Thread], q: str) -> QuerySet[Thread]:
    """Threads whose title, id or metadata text contains every word of ``q``."""
    threads = threads.annotate(metadata_text=Cast("metadata", TextField()))
    for word in q.split()[:SEARCH_WORDS]:
        threads = threads.filter(
            Q(title__icontains=word)
            | Q(thread_id__icontains=word)
            | Q(metadata_text__icontains=word)
        )
    return threads


def _row(thread: Thread) -> ThreadRow:
    return ThreadRow(**_shown(thread))


def _shown(thread: Thread) -> dict[str, Any]:
    """What a thread's list row and its page header both show."""
    return {
        "thread_id": thread.thread_id,
        "graph": thread.graph,
        "status": thread.display_status,
        "owner": thread.owner.get_username() if thread.owner else "",
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
        "title": thread.title,
    }


# -- one thread -------------------------------------------------------------------------


def thread_page(
    user: Any,
    thread_id: str,
    *,
    checkpoint_id: str = "",
    before: str = "",
    branch: str = "",
) -> ThreadPage:
    """The thread page: one branch's timeline, the selected step (default: the
    branch's newest), the fork tree, the SVG, and the Activity panel its WebSocket
    continues.

    The timeline shows one branch (:func:`timeline`): ``branch`` (a branch's root
    checkpoint), else the branch that made ``checkpoint_id``, else the branch of
    the thread's newest checkpoint.

    The events are read before the thread's status, and the status before the
    checkpoints: whatever happens after a read reaches the page over the socket
    (a run's last event is appended after its thread is settled), so the page never
    shows a state older than the events it says it has.
    """
    thread = visible_thread(user, thread_id)
    history = ThreadHistory(thread)
    if checkpoint_id:
        history.saved(checkpoint_id)  # 404 before anything else
    feed = activity.activity(thread.thread_id, history.nodes)
    thread.refresh_from_db(fields=("status", "has_state", "updated_at", "title"))
    conversation = transcript_of(thread, user, upto_event=feed.last_event_id)
    summary = _summary(thread)
    tree = fork_tree.read(thread)
    line = _timeline(
        history, summary, tree, branch=branch, before=before, selected=checkpoint_id
    )
    selected = checkpoint_id or (line.rows[0].checkpoint_id if line.rows else "")
    if selected and not checkpoint_id:
        line = _timeline_with(line, selected)
    panel = (
        _panel(
            history,
            selected,
            before,
            follow=not (checkpoint_id or before or line.pinned),
            read_only=not can_change(user, thread),
            branch=line.branch if line.branches else "",
        )
        if selected
        else None
    )
    svg, problem = _drawing(thread.graph)
    return ThreadPage(
        thread=summary,
        timeline=line,
        panel=panel,
        tree=tree.view(line.branch) if tree is not None else None,
        svg=svg,
        activity=feed,
        svg_problem=problem,
        transcript=conversation,
    )


def timeline(
    user: Any, thread_id: str, *, before: str = "", selected: str = "", branch: str = ""
) -> Timeline:
    """One page of one branch's checkpoints (newest first, older than ``before``).

    The branch is ``branch`` (its root checkpoint), else the one that made
    ``selected``, else the branch of the thread's newest checkpoint: after a
    replay, the replay's branch, without the main line's later steps.
    """
    thread = visible_thread(user, thread_id)
    return _timeline(
        ThreadHistory(thread),
        _summary(thread),
        fork_tree.read(thread),
        branch=branch,
        before=before,
        selected=selected,
    )


def step_panel(
    user: Any, thread_id: str, checkpoint_id: str, *, before: str = "", branch: str = ""
) -> StepPanel:
    """One checkpoint: the writes that made it, its diff, the next step's tasks.

    ``branch``: the timeline's branch, kept in the panel's links.
    """
    thread = visible_thread(user, thread_id)
    return _panel(
        ThreadHistory(thread),
        checkpoint_id,
        before,
        read_only=not can_change(user, thread),
        branch=branch,
    )


def newest_panel(user: Any, thread_id: str) -> StepPanel | None:
    """The step panel of the thread's newest checkpoint (None without checkpoints).

    What the thread page shows by default, and swaps in when a run finishes.
    """
    thread = visible_thread(user, thread_id)
    history = ThreadHistory(thread)
    newest = history.page(limit=1)
    if not newest:
        return None
    return _panel(
        history,
        checkpoint_id_of(newest[0].config),
        "",
        follow=True,
        read_only=not can_change(user, thread),
    )


def _summary(thread: Thread) -> ThreadSummary:
    active = (
        Run.objects.filter(thread=thread, status__in=ACTIVE)
        .order_by("created_at")
        .values_list("run_id", flat=True)
        .first()
    )
    return ThreadSummary(**_shown(thread), active_run=active or "")


def _timeline(
    history: ThreadHistory,
    summary: ThreadSummary,
    tree: fork_tree.ForkTree | None,
    *,
    branch: str,
    before: str,
    selected: str,
) -> Timeline:
    root, tip, pinned = _branch_shown(history, tree, branch, selected)
    if before:
        start = parent_id_of(history.saved(before))
        saved = history.lineage(start, limit=PAGE_SIZE + 1) if start else []
    else:
        saved = history.lineage(tip, limit=PAGE_SIZE + 1) if tip else []
    shown = saved[:PAGE_SIZE]
    label = tree.label(root) if tree is not None else ""
    rows = []
    for item in shown:
        interrupted, resumed, failed = pending_flags(item)
        checkpoint_id = str(item.config["configurable"]["checkpoint_id"])
        made_by = tree.label(tree.holder(checkpoint_id)) if tree is not None else ""
        rows.append(
            TimelineRow(
                checkpoint_id=checkpoint_id,
                step=int(item.metadata.get("step", -1)),
                source=str(item.metadata.get("source", "")),
                time=timestamp(item.checkpoint.get("ts")),
                nodes=_nodes(item),
                changed=history.changed_keys(item),
                parent_id=parent_id_of(item),
                interrupted=interrupted,
                resumed=resumed,
                failed=failed,
                selected=checkpoint_id == selected,
                branch=made_by,
                inherited=bool(label and made_by and made_by != label),
            )
        )
    older = rows[-1].checkpoint_id if len(saved) > PAGE_SIZE else ""
    return Timeline(
        thread_id=summary.thread_id,
        rows=tuple(rows),
        before=before,
        older=older,
        poll=bool(summary.active_run) and not before,
        branches=tree.flat(root) if tree is not None else (),
        branch=root,
        pinned=pinned,
    )


def _branch_shown(
    history: ThreadHistory,
    tree: fork_tree.ForkTree | None,
    branch: str,
    selected: str,
) -> tuple[str, str, bool]:
    """(root, tip, pinned): the branch the timeline shows and where its line starts.

    ``branch`` when it names one (pinned); else the branch that made ``selected``;
    else the branch of the thread's newest checkpoint. Without branches, or for a
    checkpoint no branch recorded (an API ``update_state``), the line starts at
    the selected checkpoint or the newest one.
    """
    head = history.head()
    newest = checkpoint_id_of(head.config) if head is not None else ""
    if tree is None:
        return "", newest, False
    if branch and tree.head(branch):
        return branch, tree.head(branch), True
    anchor = selected or newest
    root = tree.holder(anchor)
    if not root:
        return "", anchor, False
    return root, tree.head(root), False


def _nodes(saved: Any) -> tuple[str, ...]:
    """Nodes that wrote a checkpoint; step 0's writer is the (hidden) start node."""
    nodes = tuple(writers(saved.metadata))
    metadata = saved.metadata or {}
    if not nodes and metadata.get("source") == "loop" and metadata.get("step") == 0:
        return (START,)
    return nodes


def _timeline_with(line: Timeline, selected: str) -> Timeline:
    rows = tuple(
        replace(row, selected=row.checkpoint_id == selected) for row in line.rows
    )
    return replace(line, rows=rows)


def _panel(
    history: ThreadHistory,
    checkpoint_id: str,
    before: str,
    *,
    follow: bool = False,
    read_only: bool = False,
    branch: str = "",
) -> StepPanel:
    snapshot = history.snapshot(checkpoint_id)
    parent_id = parent_id_of(snapshot)
    parent = history.snapshot(parent_id) if parent_id else None
    values = history.snapshot_values(snapshot)
    changes, cut = diff_state(
        history.snapshot_values(parent) if parent is not None else None,
        values,
        history.kinds,
    )
    written = _written(snapshot, parent, history)
    tasks = tuple(_task(task) for task in snapshot.tasks)
    metadata = snapshot.metadata or {}
    return StepPanel(
        thread_id=history.thread.thread_id,
        graph=history.thread.graph,
        checkpoint_id=checkpoint_id,
        step=int(metadata.get("step", -1)),
        source=str(metadata.get("source", "")),
        time=timestamp(snapshot.created_at),
        parent_id=parent_id,
        writes=tuple(KeyValue(node, summarize(update)) for node, update in written),
        diff=present_changes(changes),
        diff_cut=cut,
        tasks=tasks,
        state=tuple(KeyValue(key, summarize(value)) for key, value in values.items()),
        state_keys=history.state_keys,
        nodes_ran=tuple(dict.fromkeys(node for node, _ in written)),
        nodes_next=tuple(snapshot.next),
        nodes_interrupted=tuple(t.name for t in tasks if t.interrupts),
        nodes_failed=tuple(t.name for t in tasks if t.error),
        waterfall=waterfall.for_checkpoint(
            history.thread.thread_id, str(metadata.get("run_id") or ""), checkpoint_id
        ),
        before=before,
        follow=follow,
        read_only=read_only,
        branch=branch,
    )


def _written(
    snapshot: Any, parent: Any, history: ThreadHistory
) -> list[tuple[str, Any]]:
    """(node, update) of the step that made ``snapshot``.

    A loop step's updates are the results of the parent's tasks (its metadata
    names only the keys each node wrote); the first step after an input
    applies the input (the parent's start channel); a studio fork with edits
    kept its values in the audit log (other state updates show the keys'
    values after the update).
    """
    recorded = writers(snapshot.metadata)
    source = (snapshot.metadata or {}).get("source")
    parent_source = (
        (parent.metadata or {}).get("source") if parent is not None else None
    )
    if source == "input" or (source == "loop" and parent_source == "input"):
        holder = snapshot if source == "input" else parent
        given = _input_of(history, checkpoint_id_of(holder.config))
        if given is not None:
            return [(START, given)]
    if source == "update" and len(recorded) == 1:
        node, keys = next(iter(recorded.items()))
        made = fork_tree.edit_values(
            history.thread.thread_id, checkpoint_id_of(snapshot.config)
        )
        if made is None and isinstance(keys, list):
            values = history.snapshot_values(snapshot)
            made = {key: values[key] for key in keys if key in values}
        if made is not None:
            return [(node, made)]
    if source == "loop" and parent is not None:
        ran = [
            (str(task.name), task.result)
            for task in parent.tasks
            if task.result is not None and (not recorded or task.name in recorded)
        ]
        if ran:
            return ran
    return list(recorded.items())


def _input_of(history: ThreadHistory, checkpoint_id: str) -> Any:
    """The run input an input checkpoint holds (in its start channel)."""
    saved = history.saved(checkpoint_id)
    return (saved.checkpoint.get("channel_values") or {}).get(START)


def _task(task: Any) -> TaskView:
    return TaskView(
        task_id=str(task.id),
        name=str(task.name),
        result=summarize(task.result) if task.result is not None else None,
        error=str(task.error) if task.error is not None else "",
        interrupts=tuple(
            InterruptView(
                interrupt_id=str(getattr(item, "id", "")),
                value=summarize(getattr(item, "value", item)),
                fields=_fields_of(getattr(item, "value", None)),
            )
            for item in task.interrupts
        ),
    )


def _fields_of(value: Any) -> tuple[KeyValue, ...]:
    value = plain(value)
    if not isinstance(value, dict):
        return ()
    return tuple(KeyValue(str(k), summarize(v, limit=120)) for k, v in value.items())


def _drawing(graph: str) -> tuple[SafeString | None, str]:
    """The graph's SVG (nodes ``node-<name>``), or why it cannot be drawn."""
    try:
        return registered_graphs.draw_svg(graph), ""
    except GraphUnavailable as exc:
        return None, exc.message

"""The pure super-step algorithm: which tasks run next, and how their writes apply.

No I/O, no clock, no threads: functions over a checkpoint dict and a mapping of
channels. The loop (``_loop.py``) is the only caller that also talks to a saver.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from engine._internal._constants import (
    INTERRUPT,
    NO_WRITES,
    NS_END,
    NS_SEP,
    PULL,
    PUSH,
    RESERVED_WRITES,
    TASKS,
)
from engine._internal._ids import id_bytes, task_id_for, task_id_of
from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel
from engine.checkpoint.base import Checkpoint
from engine.constants import TAG_HIDDEN
from engine.types import Send

if TYPE_CHECKING:
    from engine.pregel._read import PregelNode

__all__ = (
    "PregelExecutableTask",
    "PregelTaskWrites",
    "apply_writes",
    "prepare_next_tasks",
    "read_channels",
    "should_interrupt",
    "task_path_str",
)

GetNextVersion = Callable[[], Any]


class PregelTaskWrites(NamedTuple):
    """The writes of one task, as ``apply_writes`` needs them."""

    path: tuple[Any, ...]
    name: str
    writes: Sequence[tuple[str, Any]]
    triggers: Sequence[str]


class PregelExecutableTask:
    """One task of a super-step: a node to run on an input, and its writes."""

    __slots__ = (
        "cache_key",
        "finished",
        "id",
        "input",
        "name",
        "node",
        "ns",
        "path",
        "retry_policy",
        "send",
        "started",
        "triggers",
        "writes",
    )

    def __init__(
        self,
        *,
        name: str,
        input: Any,
        node: PregelNode,
        triggers: Sequence[str],
        id: str,
        path: tuple[Any, ...],
        ns: str,
        send: Send | None = None,
    ) -> None:
        self.name = name
        self.input = input
        self.node = node
        self.triggers = triggers
        self.id = id
        self.path = path
        self.ns = ns
        self.send = send
        self.writes: list[tuple[str, Any]] = []
        self.retry_policy = node.retry_policy
        self.cache_key: Any = None
        self.started = 0.0
        self.finished = 0.0

    def __repr__(self) -> str:
        return f"PregelExecutableTask(name={self.name!r}, id={self.id!r}, path={self.path!r})"


def task_path_str(path: tuple[Any, ...] | str | int) -> str:
    """A sortable string for a task path (numbers zero-padded)."""
    if isinstance(path, str):
        return path
    if isinstance(path, int):
        return f"{path:010d}"
    return "~".join(task_path_str(part) for part in path)


def read_channels(
    channels: Mapping[str, BaseChannel[Any, Any, Any]], keys: Sequence[str]
) -> dict[str, Any]:
    """Values of the available channels among ``keys``."""
    values: dict[str, Any] = {}
    for key in keys:
        value = channels[key].peek()
        if value is not MISSING:
            values[key] = value
    return values


def _triggered(
    node: PregelNode,
    channels: Mapping[str, BaseChannel[Any, Any, Any]],
    versions: Mapping[str, Any],
    seen: Mapping[str, Any] | None,
    null_version: Any,
) -> bool:
    if seen is None:
        for chan in node.triggers:
            if chan in versions and channels[chan].is_available():
                return True
        return False
    for chan in node.triggers:
        version = versions.get(chan)
        if version is None:
            continue
        if version > seen.get(chan, null_version) and channels[chan].is_available():
            return True
    return False


def null_version_of(checkpoint: Checkpoint) -> Any:
    """The version that compares below every version in this checkpoint."""
    for version in checkpoint["channel_versions"].values():
        return type(version)()
    return None


def task_ns(parent_ns: str, name: str, task_id: str) -> str:
    """Checkpoint namespace of a task: ``parent|name:task_id``."""
    own = f"{name}{NS_END}{task_id}"
    return f"{parent_ns}{NS_SEP}{own}" if parent_ns else own


def prepare_next_tasks(
    checkpoint: Checkpoint,
    nodes: Mapping[str, PregelNode],
    channels: Mapping[str, BaseChannel[Any, Any, Any]],
    step: int,
    *,
    checkpoint_ns: str = "",
    updated_channels: set[str] | None = None,
    trigger_to_nodes: Mapping[str, Sequence[str]] | None = None,
    for_execution: bool = True,
    stop: int | None = None,
) -> dict[str, PregelExecutableTask]:
    """The tasks of the next super-step, keyed by task id.

    Send packets waiting in the ``TASKS`` channel become push tasks; nodes whose
    trigger channels advanced since they last ran become pull tasks. When the
    channels updated by the previous step are known, only the nodes subscribed to
    them are considered, so planning cost follows what changed, not graph size.
    ``stop`` (where the run's recursion limit ends it) lets pull tasks read
    managed values (``RemainingSteps``...); without it they are left out.
    """
    tasks: dict[str, PregelExecutableTask] = {}
    checkpoint_id = checkpoint["id"]
    step_str = str(step)
    tasks_channel = channels.get(TASKS)
    if tasks_channel is not None and tasks_channel.is_available():
        for index, packet in enumerate(tasks_channel.get()):
            task = prepare_push_task(
                packet, index, checkpoint_id, checkpoint_ns, step_str, nodes
            )
            if task is not None:
                tasks[task.id] = task

    if updated_channels is not None and trigger_to_nodes is not None:
        candidates: Iterable[str]
        if len(updated_channels) == 1:
            (only,) = updated_channels
            candidates = trigger_to_nodes.get(only, ())
        else:
            triggered: set[str] = set()
            for chan in updated_channels:
                if names := trigger_to_nodes.get(chan):
                    triggered.update(names)
            candidates = sorted(triggered)
    elif not checkpoint["channel_versions"]:
        candidates = ()
    else:
        candidates = nodes.keys()

    versions = checkpoint["channel_versions"]
    versions_seen = checkpoint["versions_seen"]
    null_version = null_version_of(checkpoint)
    prefix: bytes | None = None  # the start of every pull task's id_bytes
    for name in candidates:
        node = nodes[name]
        if not _triggered(
            node, channels, versions, versions_seen.get(name), null_version
        ):
            continue
        triggers = node.sorted_triggers
        if prefix is None:
            prefix = id_bytes(checkpoint_id, checkpoint_ns, step_str)
        # task_id_for(checkpoint_id, checkpoint_ns, step_str, name, PULL, *triggers)
        task_id = task_id_of(prefix + node.id_suffix(name))
        value = node.read_input(channels, step, stop)
        if value is MISSING:
            continue
        tasks[task_id] = PregelExecutableTask(
            name=name,
            input=value,
            node=node,
            triggers=triggers,
            id=task_id,
            path=(PULL, name),
            ns=task_ns(checkpoint_ns, name, task_id),
        )
    return tasks


def next_names(
    tasks: Mapping[str, PregelExecutableTask], node_index: Mapping[str, int]
) -> list[str]:
    """A step's task names as a full plan lists them: Sends, then nodes in graph order.

    An incremental plan (``updated_channels``) finds the same tasks but orders
    pull tasks by name; what a checkpoint records as ``next`` must read the same
    as ``get_state`` (and LangGraph) shows it.
    """
    names = [task.name for task in tasks.values()]
    if len(names) < 2:
        return names
    pull = [task.name for task in tasks.values() if task.path[0] == PULL]
    if len(pull) < 2:
        return names  # a plan lists Sends first, then pull tasks
    pull.sort(key=lambda name: node_index.get(name, len(node_index)))
    return names[: len(names) - len(pull)] + pull


def prepare_push_task(
    packet: Any,
    index: int,
    checkpoint_id: str,
    checkpoint_ns: str,
    step_str: str,
    nodes: Mapping[str, PregelNode],
) -> PregelExecutableTask | None:
    """A task for the ``index``-th Send packet of the step (None for unknown nodes)."""
    if not isinstance(packet, Send):
        return None
    node = nodes.get(packet.node)
    if node is None:
        return None
    task_id = task_id_for(
        checkpoint_id, checkpoint_ns, step_str, packet.node, PUSH, index
    )
    return PregelExecutableTask(
        name=packet.node,
        input=node.map_send_input(packet.arg),
        node=node,
        triggers=(PUSH,),
        id=task_id,
        path=(PUSH, index),
        ns=task_ns(checkpoint_ns, packet.node, task_id),
        send=packet,
    )


def apply_writes(
    checkpoint: Checkpoint,
    channels: Mapping[str, BaseChannel[Any, Any, Any]],
    tasks: Iterable[PregelTaskWrites | PregelExecutableTask],
    get_next_version: GetNextVersion | None,
    trigger_to_nodes: Mapping[str, Sequence[str]],
    *,
    live_ephemeral: set[str] | None = None,
    finishers: Sequence[str] | None = None,
    bumped: set[str] | None = None,
) -> set[str]:
    """Apply one super-step's writes, bump versions, return the updated channels.

    Mutates ``checkpoint`` and ``channels``. Tasks are applied in path order, so
    the result never depends on the order in which tasks finished.

    Args:
        live_ephemeral: channels that clear when a step does not write them and
            currently hold a value; kept up to date here. ``None`` checks every
            channel, as a plain Pregel does.
        finishers: channels with ``finish()`` behaviour (deferred nodes); ``None``
            means every channel.
        bumped: collects every channel whose version changed (for savers).

    Returns:
        Names of the channels that changed and hold a value.
    """
    ordered = (
        sorted(tasks, key=_path_key)
        if not isinstance(tasks, list) or len(tasks) > 1
        else tasks
    )
    bump_step = False
    versions = checkpoint["channel_versions"]
    versions_seen = checkpoint["versions_seen"]
    for task in ordered:
        triggers = task.triggers
        if triggers:
            bump_step = True
            # A new dict, never the old one changed: a snapshot taken before
            # (a save still queued) shares each node's dict (``_snapshot``).
            before = versions_seen.get(task.name)
            seen = {} if before is None else dict(before)
            for chan in triggers:
                if chan in versions:
                    seen[chan] = versions[chan]
            versions_seen[task.name] = seen

    next_version: Any = get_next_version() if get_next_version is not None else None

    if bump_step:
        consumed: set[str] = set()
        for task in ordered:
            for chan in task.triggers:
                if chan not in consumed and chan in channels:
                    consumed.add(chan)
                    if channels[chan].consume() and next_version is not None:
                        versions[chan] = next_version
                        if bumped is not None:
                            bumped.add(chan)

    pending: defaultdict[str, list[Any]] = defaultdict(list)
    for task in ordered:
        for chan, value in task.writes:
            if chan in RESERVED_WRITES or chan == NO_WRITES:
                continue
            if chan in channels:
                pending[chan].append(value)

    updated: set[str] = set()
    for chan, values in pending.items():
        channel = channels[chan]
        if channel.update(values) and next_version is not None:
            versions[chan] = next_version
            if bumped is not None:
                bumped.add(chan)
            if channel.is_available():
                updated.add(chan)
                if live_ephemeral is not None and channel.clears_when_idle:
                    live_ephemeral.add(chan)

    if bump_step:
        idle = (
            [c for c in channels if c not in updated]
            if live_ephemeral is None
            else [c for c in live_ephemeral if c not in updated]
        )
        for chan in idle:
            channel = channels[chan]
            if (
                channel.is_available()
                and channel.update(())
                and next_version is not None
            ):
                versions[chan] = next_version
                if bumped is not None:
                    bumped.add(chan)
                if channel.is_available():
                    updated.add(chan)
            if live_ephemeral is not None and not channel.is_available():
                live_ephemeral.discard(chan)

    if bump_step and updated.isdisjoint(trigger_to_nodes):
        for chan in channels if finishers is None else finishers:
            channel = channels[chan]
            if channel.finish() and next_version is not None:
                versions[chan] = next_version
                if bumped is not None:
                    bumped.add(chan)
                if channel.is_available():
                    updated.add(chan)
    return updated


def _path_key(task: PregelTaskWrites | PregelExecutableTask) -> str:
    return task_path_str(task.path)


def should_interrupt(
    checkpoint: Checkpoint,
    interrupt_nodes: Sequence[str] | str,
    tasks: Iterable[PregelExecutableTask],
) -> list[PregelExecutableTask]:
    """Tasks that hit a static breakpoint (``interrupt_before``/``after``).

    A breakpoint fires only when some channel changed since the last breakpoint,
    so resuming from one does not stop at it again.
    """
    null_version = null_version_of(checkpoint)
    seen = checkpoint["versions_seen"].get(INTERRUPT, {})
    changed = any(
        version > seen.get(chan, null_version)
        for chan, version in checkpoint["channel_versions"].items()
    )
    if not changed:
        return []
    return [
        task
        for task in tasks
        if (
            TAG_HIDDEN not in task.node.tags
            if interrupt_nodes == "*"
            else task.name in interrupt_nodes
        )
    ]


def increment(current: int | None) -> int:
    """Channel versions when no checkpointer is used: plain integers."""
    return 1 if current is None else current + 1

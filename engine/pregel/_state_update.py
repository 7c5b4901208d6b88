"""Time travel, the writing half: write state as if a node returned it.

``update_state`` runs only the chosen node's writers (its edges fire), creating
a new checkpoint whose parent is the addressed one, so updating a past
checkpoint forks the thread; ``bulk_update_state`` writes one checkpoint per
super-step of updates. Reading snapshots is in ``_state_read``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
    END,
    INPUT,
    INTERRUPT,
    START,
)
from engine._internal._ids import new_checkpoint_id, task_id_for, utc_now_iso
from engine._internal._typing import MISSING, RunnableConfig
from engine.channels.base import BaseChannel
from engine.channels.delta import DeltaChannel
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointTuple,
    empty_checkpoint,
)
from engine.errors import (
    ErrorCode,
    InvalidUpdateError,
    error_message,
)
from engine.pregel._algo import (
    PregelExecutableTask,
    PregelTaskWrites,
    apply_writes,
    prepare_next_tasks,
)
from engine.pregel._delta import (
    COUNTERS_KEY,
    advance_counters,
    aupdate_writes_to_store,
    awith_delta_values,
    delta_channel_names,
    reset_counters,
    update_writes_to_store,
    with_delta_values,
)
from engine.pregel._lease import ahold_for_update, hold_for_update
from engine.pregel._persist import _fenced as fenced
from engine.types import StateUpdate

if TYPE_CHECKING:
    from engine.pregel.main import Pregel
from engine.pregel._state_read import (
    COPY,
    checkpoint_channels,
    copy_for_read,
    public_config,
    raise_if_addressed,
    saver_or_raise,
    snapshot_from,
)

__all__ = (
    "abulk_update_state",
    "aupdate_state",
    "bulk_update_state",
    "infer_as_node",
    "update_state",
)


def infer_as_node(graph: Pregel, checkpoint: Checkpoint) -> str | None:
    """The node ``update_state`` writes as when ``as_node`` is omitted (LangGraph's rule).

    The only node of a one-node graph; the input node before anything ran; the
    node whose writes the checkpoint saw last, when exactly one did; else None
    (the update is then refused as ambiguous). Public as ``engine.pregel.infer_as_node``
    so callers (the studio's governance check) apply the same rule before writing.
    """
    if len(graph.nodes) == 1:
        return next(iter(graph.nodes))
    seen = checkpoint["versions_seen"]
    last: list[tuple[Any, str]] = sorted(
        (version, name)
        for name, versions in seen.items()
        if name in graph.nodes
        for version in versions.values()
    )
    if not last:
        if (
            isinstance(graph.input_channels, str)
            and graph.input_channels in graph.nodes
        ):
            return graph.input_channels
        return None
    if len(last) == 1 or last[-1][0] != last[-2][0]:
        return last[-1][1]
    return None


class _UpdatePlan:
    """An update computed against a loaded checkpoint, ready to save."""

    __slots__ = (
        "checkpoint",
        "metadata",
        "new_versions",
        "parent_config",
        "task_writes",
        "then",
    )

    def __init__(self) -> None:
        self.checkpoint: Checkpoint = empty_checkpoint()
        self.metadata: dict[str, Any] = {}
        self.new_versions: dict[str, Any] = {}
        self.parent_config: RunnableConfig = {}
        self.task_writes: list[tuple[str, Sequence[tuple[str, Any]]]] = []
        self.then: list[StateUpdate] = []
        """Updates to apply to the saved checkpoint next (a copy's)."""


def _as_updates(superstep: Sequence[Any]) -> list[StateUpdate]:
    return [
        item if isinstance(item, StateUpdate) else StateUpdate(*item)
        for item in superstep
    ]


def plan_update(
    graph: Pregel,
    saver: BaseCheckpointSaver,
    config: RunnableConfig,
    saved: CheckpointTuple | None,
    updates: Sequence[StateUpdate],
) -> _UpdatePlan:
    """One super-step of updates: each runs its node's writers; one new checkpoint.

    Several updates are applied together, as the tasks of one step are (a key
    without a reducer accepts one of them). ``as_node`` may also be ``END``
    (values ``None``: finish the pending tasks), ``"__input__"`` (write as the
    input) or ``"__copy__"`` (copy the checkpoint as a sibling: a fork point);
    each of those is a super-step on its own.
    """
    if len(updates) > 1:
        for update in updates:
            if update.as_node is None:
                raise InvalidUpdateError(
                    "as_node is required when applying multiple updates"
                )
            if update.as_node in (END, INPUT, COPY):
                raise InvalidUpdateError(
                    f"as_node={update.as_node!r} cannot be combined with other "
                    "updates in one super-step"
                )
    elif updates[0].as_node == COPY:
        return _plan_copy(graph, config, saved, updates[0].values)
    conf = config.get(CONF, {})
    thread_id = conf.get(CONFIG_KEY_THREAD_ID)
    ns = conf.get(CONFIG_KEY_CHECKPOINT_NS, "") or ""
    if saved is None:
        raise_if_addressed(config)
        checkpoint = empty_checkpoint()
        step = -1
        parent_conf: dict[str, Any] = {
            CONFIG_KEY_THREAD_ID: thread_id,
            CONFIG_KEY_CHECKPOINT_NS: ns,
        }
        parents: dict[str, Any] = {}
    else:
        checkpoint = copy_for_read(saved.checkpoint)
        graph.migrate_checkpoint(checkpoint)
        step = saved.metadata.get("step", -1)
        parent_conf = {
            CONFIG_KEY_THREAD_ID: thread_id,
            CONFIG_KEY_CHECKPOINT_NS: ns,
            CONFIG_KEY_CHECKPOINT_ID: saved.checkpoint["id"],
        }
        parents = dict(saved.metadata.get("parents", {}))
    channels = checkpoint_channels(
        graph, saved.checkpoint if saved is not None else checkpoint
    )
    previous_versions = dict(checkpoint["channel_versions"])
    plan = _UpdatePlan()
    plan.parent_config = {CONF: parent_conf}
    max_version = max(previous_versions.values()) if previous_versions else None

    def next_version() -> Any:
        return saver.get_next_version(max_version)

    values, as_node, _ = updates[0]
    if len(updates) == 1 and as_node is None:
        as_node = infer_as_node(graph, checkpoint)
        if as_node is None:
            raise InvalidUpdateError(
                error_message(
                    "Ambiguous update, specify as_node: several nodes wrote the state in "
                    "the last step.",
                    ErrorCode.INVALID_CONCURRENT_GRAPH_UPDATE,
                )
            )
        updates = [updates[0]._replace(as_node=as_node)]
    writes: list[PregelTaskWrites | PregelExecutableTask]
    written: dict[str, list[str]] | None = {}
    source, new_step = "update", step + 1
    if as_node == END:
        if values is not None:
            raise InvalidUpdateError("Cannot apply values when as_node is END")
        # finish the thread: mark every pending task as seen, write nothing
        tasks = prepare_next_tasks(
            checkpoint,
            graph.nodes,
            channels,
            step + 1,
            checkpoint_ns=ns,
            for_execution=False,
        )
        writes = list(tasks.values())
        written = None
    elif as_node == INPUT or (as_node == START and START not in graph.nodes):
        input_writes = graph.map_input(values)
        if not input_writes:
            raise InvalidUpdateError(
                f"Received no input writes for {graph.input_channels!r}"
            )
        writes = [PregelTaskWrites((), INPUT, input_writes, ())]
        written = {str(as_node): list(values) if isinstance(values, dict) else []}
        # as LangGraph: an input checkpoint (step -1 when it starts the thread)
        source, new_step = "input", step + 1 if saved is not None else -1
    else:
        writes = []
        by_node: dict[str, list[str]] = {}
        written = by_node
        prepared = _prepared_task_ids(graph, checkpoint, channels, step, ns)
        for index, (values, as_node, task_id) in enumerate(updates):
            task = _run_writers(
                graph,
                channels,
                checkpoint["id"],
                ns,
                index,
                values,
                str(as_node),
                task_id or _next_id(prepared, str(as_node)),
            )
            writes.append(task)
            plan.task_writes.append((task.id, list(task.writes)))
            keys = by_node.setdefault(task.name, [])
            keys.extend(
                k for k in (values if isinstance(values, dict) else ()) if k not in keys
            )
    bumped: set[str] = set()
    apply_writes(
        checkpoint,
        channels,
        writes,
        next_version,
        graph.trigger_to_nodes,
        bumped=bumped,
    )
    new_values = dict(checkpoint["channel_values"])
    for chan in bumped:
        channel = channels[chan]
        # an update's checkpoint stores its delta channels' values (a snapshot)
        value = (
            channel.peek()
            if isinstance(channel, DeltaChannel)
            else channel.checkpoint()
        )
        if value is MISSING:
            new_values.pop(chan, None)
        else:
            new_values[chan] = value
    checkpoint["channel_values"] = new_values
    checkpoint["id"] = new_checkpoint_id(new_step)
    checkpoint["ts"] = utc_now_iso()
    if graph.schema_version is not None:
        checkpoint["schema_version"] = graph.schema_version
    upcoming = prepare_next_tasks(
        checkpoint,
        graph.nodes,
        channels,
        new_step + 1,
        checkpoint_ns=ns,
        for_execution=False,
    )
    checkpoint["updated_channels"] = _planning_channels(graph, bumped, upcoming)
    plan.checkpoint = checkpoint
    plan.new_versions = {
        c: checkpoint["channel_versions"][c]
        for c in bumped
        if c in checkpoint["channel_versions"]
    }
    plan.metadata = {
        "source": source,
        "step": new_step,
        "parents": parents,
        "writes": written,
        "next": [task.name for task in upcoming.values()],
    }
    if names := delta_channel_names(graph.channels):
        counters = advance_counters(
            saved.metadata.get(COUNTERS_KEY) if saved is not None else None,
            names,
            bumped,
        )
        reset_counters(plan.metadata, counters, bumped)
    return plan


def _planning_channels(
    graph: Pregel,
    bumped: set[str],
    upcoming: dict[str, PregelExecutableTask],
) -> list[str]:
    """``updated_channels`` of an update's checkpoint: what the next run plans from.

    A run plans its first step from the nodes these channels trigger (not from
    every node). The channels the update changed are not enough: a task the
    parent checkpoint had pending and the update did not run is still pending,
    though its trigger did not change here. Listing its triggers keeps that plan
    equal to ``next`` (and to what ``get_state`` shows).
    """
    planned = set(bumped)
    for task in upcoming.values():
        planned.update(t for t in task.triggers if t in graph.channels)
    return sorted(planned)


def _prepared_task_ids(
    graph: Pregel,
    checkpoint: Checkpoint,
    channels: dict[str, BaseChannel[Any, Any, Any]],
    step: int,
    ns: str,
) -> dict[str, list[str]]:
    """Ids of the tasks the checkpoint has pending, per node, in plan order.

    An update as one of those nodes takes its task's id, so history shows the
    update as that task's result.
    """
    tasks = prepare_next_tasks(
        checkpoint,
        graph.nodes,
        channels,
        step + 1,
        checkpoint_ns=ns,
        for_execution=False,
    )
    ids: dict[str, list[str]] = {}
    for task in tasks.values():
        ids.setdefault(task.name, []).append(task.id)
    return ids


def _next_id(prepared: dict[str, list[str]], as_node: str) -> str | None:
    pending = prepared.get(as_node)
    return pending.pop(0) if pending else None


def _run_writers(
    graph: Pregel,
    channels: dict[str, BaseChannel[Any, Any, Any]],
    checkpoint_id: str,
    ns: str,
    index: int,
    values: Any,
    as_node: str,
    task_id: str | None,
) -> PregelExecutableTask:
    """Run ``as_node``'s writers on ``values`` (as if the node returned them)."""
    node = graph.nodes.get(as_node)
    if node is None:
        raise InvalidUpdateError(
            error_message(
                f"Node {as_node!r} does not exist (nodes: {sorted(graph.nodes)})",
                ErrorCode.INVALID_GRAPH,
            )
        )
    if not node.writers:
        raise InvalidUpdateError(f"Node {as_node!r} has no writers")
    task = PregelExecutableTask(
        name=as_node,
        input=values,
        node=node,
        triggers=(INTERRUPT,),
        id=task_id
        or task_id_for(
            checkpoint_id, ns, "update", as_node, *([index] if index else [])
        ),
        path=(INTERRUPT, index),
        ns=ns,
    )

    def read_fresh(keys: Sequence[str]) -> dict[str, Any]:
        return graph.read_fresh(channels, task, keys)

    graph.validate_update(as_node, values)
    for writer in node.writers:
        writer(task, values, read_fresh)
    return task


def _plan_copy(
    graph: Pregel,
    config: RunnableConfig,
    saved: CheckpointTuple | None,
    then: Any,
) -> _UpdatePlan:
    """``as_node="__copy__"``: the checkpoint again, as a sibling with a new id.

    The copy has the same parent, values and next tasks, none of the original's
    pending writes, and becomes the thread's newest checkpoint: a fork point to
    run or update from. ``then`` may list ``(values, as_node)`` updates to apply
    to the copy right away (a pending task's update takes its task id).
    """
    if saved is None:
        raise InvalidUpdateError("Cannot copy a non-existent checkpoint")
    plan = _UpdatePlan()
    checkpoint = copy_for_read(saved.checkpoint)
    checkpoint["channel_values"] = dict(checkpoint["channel_values"])
    checkpoint["updated_channels"] = saved.checkpoint.get("updated_channels")
    if "schema_version" in saved.checkpoint:
        checkpoint["schema_version"] = saved.checkpoint["schema_version"]
    step = saved.metadata.get("step", -1)
    checkpoint["id"] = new_checkpoint_id(step + 1)
    checkpoint["ts"] = utc_now_iso()
    conf = saved.config.get(CONF, {})
    parent = public_config(saved.parent_config)
    plan.parent_config = parent or {
        CONF: {
            CONFIG_KEY_THREAD_ID: conf.get(CONFIG_KEY_THREAD_ID),
            CONFIG_KEY_CHECKPOINT_NS: conf.get(CONFIG_KEY_CHECKPOINT_NS, ""),
        }
    }
    plan.checkpoint = checkpoint
    next_names = saved.metadata.get("next")
    if not isinstance(next_names, list):
        next_names = list(snapshot_from(graph, saved, live=False).next)
    plan.metadata = {
        "source": "fork",
        "step": step + 1,
        "parents": dict(saved.metadata.get("parents", {})),
        "next": list(next_names),
    }
    if isinstance(then, (list, tuple)) and then:
        for item in then:
            if not isinstance(item, Sequence) or isinstance(item, (str, bytes)):
                raise InvalidUpdateError(
                    f"Invalid update item: {item!r} when copying checkpoint"
                )
        plan.then = [StateUpdate(item[0], item[1]) for item in then]
    return plan


def _save_plan(
    saver: BaseCheckpointSaver,
    plan: _UpdatePlan,
    saved: CheckpointTuple | None,
    fence: dict[str, Any] | None,
) -> RunnableConfig:
    parent = plan.parent_config if fence is None else fenced(plan.parent_config, fence)
    for tid, writes in plan.task_writes:
        if saved is not None and writes:
            saver.put_writes(parent, writes, tid)
    return saver.put(
        parent,
        plan.checkpoint,
        plan.metadata,  # type: ignore[arg-type]
        plan.new_versions,
    )


async def _asave_plan(
    saver: BaseCheckpointSaver,
    plan: _UpdatePlan,
    saved: CheckpointTuple | None,
    fence: dict[str, Any] | None,
) -> RunnableConfig:
    parent = plan.parent_config if fence is None else fenced(plan.parent_config, fence)
    for tid, writes in plan.task_writes:
        if saved is not None and writes:
            await saver.aput_writes(parent, writes, tid)
    return await saver.aput(
        parent,
        plan.checkpoint,
        plan.metadata,  # type: ignore[arg-type]
        plan.new_versions,
    )


def _check_supersteps(supersteps: Sequence[Sequence[Any]]) -> list[list[StateUpdate]]:
    if len(supersteps) == 0:
        raise ValueError("No supersteps provided")
    if any(len(updates) == 0 for updates in supersteps):
        raise ValueError("No updates provided")
    return [_as_updates(updates) for updates in supersteps]


def _following(config: RunnableConfig, saved_config: RunnableConfig) -> RunnableConfig:
    """The config the next super-step reads: the caller's, at the new checkpoint."""
    return {**config, CONF: {**config.get(CONF, {}), **saved_config[CONF]}}


def bulk_update_state(
    graph: Pregel,
    config: RunnableConfig,
    supersteps: Sequence[Sequence[StateUpdate]],
) -> RunnableConfig:
    """Apply super-steps of updates in order, one checkpoint each; the last one's config."""
    steps = _check_supersteps(supersteps)
    merged, _ = graph._resolve(config)
    saver = saver_or_raise(graph, merged)
    current, result = merged, merged
    with hold_for_update(saver, merged) as fence:
        while steps:
            updates = steps.pop(0)
            saved = with_delta_values(graph.channels, saver.get_tuple(current), saver)
            plan = plan_update(graph, saver, current, saved, updates)
            plan.task_writes = update_writes_to_store(
                graph.channels, saver, saved, plan.task_writes
            )
            result = _save_plan(saver, plan, saved, fence)
            current = _following(current, result)
            if plan.then:
                steps.insert(0, plan.then)
    return result


async def abulk_update_state(
    graph: Pregel,
    config: RunnableConfig,
    supersteps: Sequence[Sequence[StateUpdate]],
) -> RunnableConfig:
    steps = _check_supersteps(supersteps)
    merged, _ = graph._resolve(config)
    saver = saver_or_raise(graph, merged)
    current, result = merged, merged
    async with ahold_for_update(saver, merged) as fence:
        while steps:
            updates = steps.pop(0)
            saved = await awith_delta_values(
                graph.channels, await saver.aget_tuple(current), saver
            )
            plan = plan_update(graph, saver, current, saved, updates)
            plan.task_writes = await aupdate_writes_to_store(
                graph.channels, saver, saved, plan.task_writes
            )
            result = await _asave_plan(saver, plan, saved, fence)
            current = _following(current, result)
            if plan.then:
                steps.insert(0, plan.then)
    return result


def update_state(
    graph: Pregel,
    config: RunnableConfig,
    values: Any,
    *,
    as_node: str | None = None,
    task_id: str | None = None,
) -> RunnableConfig:
    return bulk_update_state(graph, config, [[StateUpdate(values, as_node, task_id)]])


async def aupdate_state(
    graph: Pregel,
    config: RunnableConfig,
    values: Any,
    *,
    as_node: str | None = None,
    task_id: str | None = None,
) -> RunnableConfig:
    return await abulk_update_state(
        graph, config, [[StateUpdate(values, as_node, task_id)]]
    )

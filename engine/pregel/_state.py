"""Time travel on a compiled graph: read snapshots and history, write state as a node.

Snapshots are built lazily from saved checkpoints; nothing here runs a node.
``update_state`` runs only the chosen node's writers (its edges fire), creating a
new checkpoint whose parent is the addressed one, so updating a past checkpoint
forks the thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_THREAD_ID,
    END,
    ERROR,
    INPUT,
    INTERRUPT,
    NO_WRITES,
    NULL_TASK_ID,
    RESUME,
    START,
)
from engine._internal._ids import new_checkpoint_id, task_id_for
from engine._internal._typing import MISSING, RunnableConfig
from engine.channels.base import BaseChannel
from engine.channels.delta import DeltaChannel
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointSummary,
    CheckpointTuple,
    empty_checkpoint,
    require_thread_id,
)
from engine.constants import TAG_HIDDEN
from engine.errors import (
    CheckpointNotFoundError,
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
from engine.types import Interrupt, PregelTask, StateSnapshot, StateUpdate

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = (
    "abulk_update_state",
    "bulk_update_state",
    "get_state",
    "get_state_history",
    "update_state",
)

_SPECIAL = frozenset({ERROR, INTERRUPT, RESUME, NO_WRITES})
COPY = "__copy__"
"""``as_node`` that copies the addressed checkpoint as a new one (a fork point)."""


def _saver_or_raise(graph: Pregel, config: RunnableConfig) -> BaseCheckpointSaver:
    saver = graph._saver(config)
    if saver is None:
        raise ValueError(
            error_message(
                "No checkpointer set: compile the graph with checkpointer=... to read or "
                "change its state.",
                ErrorCode.MISSING_CHECKPOINTER,
            )
        )
    require_thread_id(config, "Reading or changing state")
    return saver


def _channels(
    graph: Pregel, checkpoint: Checkpoint
) -> dict[str, BaseChannel[Any, Any, Any]]:
    values = checkpoint["channel_values"]
    return {
        name: spec.from_checkpoint(values.get(name, MISSING))
        for name, spec in graph.channels.items()
    }


def _read(graph: Pregel, channels: dict[str, BaseChannel[Any, Any, Any]]) -> Any:
    keys = graph.stream_channels_asis
    if isinstance(keys, str):
        value = channels[keys].peek()
        return None if value is MISSING else value
    out: dict[str, Any] = {}
    for key in keys:
        value = channels[key].peek()
        if value is not MISSING:
            out[key] = value
    return out


def _public_config(
    config: RunnableConfig | None, metadata: Any = None
) -> RunnableConfig | None:
    """Thread, namespace and checkpoint id; for a subgraph's checkpoint also the
    ``checkpoint_map`` of its parents' checkpoints (as LangGraph gives)."""
    if config is None:
        return None
    conf = config.get(CONF, {})
    if not conf.get(CONFIG_KEY_CHECKPOINT_ID):
        return None
    public: dict[str, Any] = {
        CONFIG_KEY_THREAD_ID: conf.get(CONFIG_KEY_THREAD_ID),
        CONFIG_KEY_CHECKPOINT_NS: conf.get(CONFIG_KEY_CHECKPOINT_NS, ""),
        CONFIG_KEY_CHECKPOINT_ID: conf[CONFIG_KEY_CHECKPOINT_ID],
    }
    if metadata and (parents := metadata.get("parents")):
        public[CONFIG_KEY_CHECKPOINT_MAP] = {
            **parents,
            public[CONFIG_KEY_CHECKPOINT_NS]: public[CONFIG_KEY_CHECKPOINT_ID],
        }
    return {CONF: public}


def snapshot_from(
    graph: Pregel,
    saved: CheckpointTuple,
    *,
    live: bool,
    saver: BaseCheckpointSaver | None = None,
) -> StateSnapshot:
    """A :class:`StateSnapshot` of a saved checkpoint.

    ``live`` (``get_state``) shows current status: values include finished tasks'
    writes, ``next`` only tasks still to run, ``interrupts`` only open ones.
    Otherwise (history) it is the record of the step that followed.
    """
    checkpoint = saved.checkpoint
    graph.migrate_checkpoint(checkpoint)
    channels = _channels(graph, checkpoint)
    step = saved.metadata.get("step", -1) + 1
    ns = saved.config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS, "")
    pending = saved.pending_writes or []
    null_writes = [
        (c, v) for t, c, v in pending if t == NULL_TASK_ID and c not in _SPECIAL
    ]
    if null_writes:
        apply_writes(
            _copy_for_read(checkpoint),
            channels,
            [PregelTaskWrites((), INPUT, null_writes, ())],
            lambda: None,
            graph.trigger_to_nodes,
        )
    tasks = prepare_next_tasks(
        checkpoint,
        graph.nodes,
        channels,
        step,
        checkpoint_ns=ns,
        for_execution=False,
    )
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, chan, value in pending:
        by_task.setdefault(task_id, []).append((chan, value))
    subgraph_names = {name for name, _ in graph.get_subgraphs()}
    pregel_tasks: list[PregelTask] = []
    done: list[PregelExecutableTask] = []
    for task in tasks.values():
        writes = by_task.get(task.id, [])
        error = next((v for c, v in writes if c == ERROR), None)
        interrupts: tuple[Interrupt, ...] = tuple(
            next((v for c, v in writes if c == INTERRUPT), ()) or ()
        )
        regular = [(c, v) for c, v in writes if c not in _SPECIAL or c == NO_WRITES]
        if regular:
            task.writes.extend(regular)
            done.append(task)
        result = graph.task_update(task) if regular else None
        if (
            result is None
            and TAG_HIDDEN in task.node.tags
            and isinstance(task.input, dict)
        ):
            # the input step's writes are not stored: its result is the saved input
            result = {
                k: v for k, v in task.input.items() if k in graph.output_channel_set
            } or None
        if live and regular:
            interrupts = ()
        state: Any = None
        if task.name in subgraph_names:
            state = {
                CONF: {
                    CONFIG_KEY_THREAD_ID: saved.config.get(CONF, {}).get(
                        CONFIG_KEY_THREAD_ID
                    ),
                    CONFIG_KEY_CHECKPOINT_NS: task.ns,
                }
            }
        pregel_tasks.append(
            PregelTask(
                id=task.id,
                name=task.name,
                path=task.path,
                error=_as_error(error),
                interrupts=interrupts,
                state=state,
                result=result,
            )
        )
    if live and done:
        apply_writes(
            _copy_for_read(checkpoint),
            channels,
            done,
            lambda: None,
            graph.trigger_to_nodes,
        )
    next_names = tuple(t.name for t in tasks.values() if not (live and t.writes))
    return StateSnapshot(
        values=graph.map_output(_read(graph, channels)),
        next=next_names,
        config=_public_config(saved.config, saved.metadata) or saved.config,
        metadata=dict(saved.metadata),
        created_at=checkpoint.get("ts"),
        parent_config=_public_config(saved.parent_config, saved.metadata),
        tasks=tuple(pregel_tasks),
        interrupts=tuple(i for t in pregel_tasks for i in t.interrupts),
    )


def _copy_for_read(checkpoint: Checkpoint) -> Checkpoint:
    return Checkpoint(
        v=checkpoint.get("v", 4),
        id=checkpoint["id"],
        ts=checkpoint.get("ts", ""),
        channel_values=checkpoint["channel_values"],
        channel_versions=dict(checkpoint["channel_versions"]),
        versions_seen={k: dict(v) for k, v in checkpoint["versions_seen"].items()},
        updated_channels=None,
    )


class StoredError(Exception):
    """A task failure read back from storage (its type name and message)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def _as_error(value: Any) -> Exception | None:
    if value is None:
        return None
    if isinstance(value, Exception):
        return value
    if isinstance(value, dict):
        return StoredError(
            str(value.get("error", "Error")), str(value.get("message", ""))
        )
    return StoredError("Error", str(value))


def _empty_snapshot(config: RunnableConfig) -> StateSnapshot:
    return StateSnapshot(
        values={},
        next=(),
        config=config,
        metadata=None,
        created_at=None,
        parent_config=None,
        tasks=(),
        interrupts=(),
    )


def get_state(
    graph: Pregel, config: RunnableConfig, *, subgraphs: bool = False
) -> StateSnapshot:
    merged, _ = graph._resolve(config)
    saver = _saver_or_raise(graph, merged)
    saved = with_delta_values(graph.channels, saver.get_tuple(merged), saver)
    if saved is None:
        _raise_if_addressed(merged)
        return _empty_snapshot(config)
    snapshot = snapshot_from(
        graph,
        saved,
        live=not merged.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID),
        saver=saver,
    )
    if subgraphs:
        snapshot = _with_subgraph_states(graph, snapshot, merged, saver)
    return snapshot


def _with_subgraph_states(
    graph: Pregel,
    snapshot: StateSnapshot,
    config: RunnableConfig,
    saver: BaseCheckpointSaver,
) -> StateSnapshot:
    subgraphs = dict(graph.get_subgraphs())
    tasks = []
    for task in snapshot.tasks:
        sub = subgraphs.get(task.name)
        if sub is not None and isinstance(task.state, dict):
            child_config = {
                CONF: {
                    **config.get(CONF, {}),
                    **task.state[CONF],
                    CONFIG_KEY_CHECKPOINTER: saver,
                },
            }
            child_config[CONF].pop(CONFIG_KEY_CHECKPOINT_ID, None)
            state = get_state(sub, child_config, subgraphs=True)
            if state.metadata is not None:
                task = task._replace(state=state)
        tasks.append(task)
    return snapshot._replace(tasks=tuple(tasks))


def _raise_if_addressed(config: RunnableConfig) -> None:
    checkpoint_id = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID)
    if checkpoint_id:
        raise CheckpointNotFoundError(
            error_message(
                f"Checkpoint {checkpoint_id!r} does not exist on thread "
                f"{config.get(CONF, {}).get(CONFIG_KEY_THREAD_ID)!r}",
                ErrorCode.CHECKPOINT_NOT_FOUND,
            )
        )


async def aget_state(
    graph: Pregel, config: RunnableConfig, *, subgraphs: bool = False
) -> StateSnapshot:
    merged, _ = graph._resolve(config)
    saver = _saver_or_raise(graph, merged)
    saved = await awith_delta_values(
        graph.channels, await saver.aget_tuple(merged), saver
    )
    if saved is None:
        _raise_if_addressed(merged)
        return _empty_snapshot(config)
    snapshot = snapshot_from(
        graph,
        saved,
        live=not merged.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_ID),
        saver=saver,
    )
    if subgraphs:
        snapshot = _with_subgraph_states(graph, snapshot, merged, saver)
    return snapshot


def _history_config(config: RunnableConfig) -> RunnableConfig:
    conf = dict(config.get(CONF, {}))
    conf.setdefault(CONFIG_KEY_CHECKPOINT_NS, "")
    return {CONF: conf}


def get_state_history(
    graph: Pregel,
    config: RunnableConfig,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
) -> Iterator[StateSnapshot]:
    merged, _ = graph._resolve(config)
    saver = _saver_or_raise(graph, merged)
    history_config = _history_config(merged)
    summaries = saver.list_summaries(
        history_config, filter=filter, before=before, limit=limit
    )
    page: list[CheckpointSummary] = []
    page_before = before
    for summary in summaries:
        page.append(summary)
        if len(page) == HISTORY_PAGE:
            loader = _PageLoader(
                graph, saver, history_config, filter, page_before, len(page)
            )
            yield from (_LazySnapshot.of(s, loader) for s in page)
            page_before, page = page[-1].config, []
    if page:
        loader = _PageLoader(
            graph, saver, history_config, filter, page_before, len(page)
        )
        yield from (_LazySnapshot.of(s, loader) for s in page)


HISTORY_PAGE = 50
"""History snapshots load their values a page at a time, on first use."""


class _PageLoader:
    """Loads one page of history (values, writes) the first time a snapshot needs it."""

    __slots__ = ("before", "config", "filter", "graph", "limit", "saver", "tuples")

    def __init__(
        self,
        graph: Pregel,
        saver: BaseCheckpointSaver,
        config: RunnableConfig,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int,
    ) -> None:
        self.graph = graph
        self.saver = saver
        self.config = config
        self.filter = filter
        self.before = before
        self.limit = limit
        self.tuples: dict[str, CheckpointTuple] | None = None

    def snapshot(self, config: RunnableConfig) -> StateSnapshot:
        checkpoint_id = config[CONF][CONFIG_KEY_CHECKPOINT_ID]
        if self.tuples is None:
            self.tuples = {
                t.checkpoint["id"]: t
                for t in self.saver.list(
                    self.config,
                    filter=self.filter,
                    before=self.before,
                    limit=self.limit,
                )
            }
        saved = self.tuples.get(checkpoint_id)
        if saved is None:  # deleted meanwhile, or a page boundary moved: load it alone
            saved = self.saver.get_tuple(
                {
                    CONF: {
                        **self.config.get(CONF, {}),
                        CONFIG_KEY_CHECKPOINT_ID: checkpoint_id,
                    }
                }
            )
        if saved is None:
            raise KeyError(f"checkpoint {checkpoint_id} is no longer stored")
        saved = with_delta_values(self.graph.channels, saved, self.saver)
        assert saved is not None
        return snapshot_from(self.graph, saved, live=False, saver=self.saver)


class _LazySnapshot(StateSnapshot):
    """A history entry: config, metadata and ``next`` at once; values and tasks when used.

    Behaves as a :class:`StateSnapshot` (fields, indexing, unpacking, equality);
    the first access to ``values``, ``tasks`` or ``interrupts`` loads its page.
    """

    _loader: _PageLoader
    _full: StateSnapshot | None

    @classmethod
    def of(cls, summary: CheckpointSummary, loader: _PageLoader) -> _LazySnapshot:
        metadata = dict(summary.metadata)
        known_next = metadata.get("next")
        snapshot = cls(
            values=None,
            next=tuple(known_next) if isinstance(known_next, list) else (),
            config=_public_config(summary.config, summary.metadata) or summary.config,
            metadata=metadata,
            created_at=summary.created_at,
            parent_config=_public_config(summary.parent_config, summary.metadata),
            tasks=(),
            interrupts=(),
        )
        snapshot._loader = loader
        snapshot._full = None
        snapshot._has_next = isinstance(known_next, list)  # type: ignore[attr-defined]
        return snapshot

    def _load(self) -> StateSnapshot:
        if self._full is None:
            self._full = self._loader.snapshot(_field(self, 2))
        return self._full

    @property
    def values(self) -> Any:
        return self._load().values

    @property
    def next(self) -> tuple[str, ...]:
        if self._has_next:  # type: ignore[attr-defined]
            known: tuple[str, ...] = _field(self, 1)
            return known
        return self._load().next

    @property
    def tasks(self) -> tuple[PregelTask, ...]:
        return self._load().tasks

    @property
    def interrupts(self) -> tuple[Interrupt, ...]:
        return self._load().interrupts

    def __iter__(self) -> Iterator[Any]:
        return iter(self._load())

    def __getitem__(self, index: Any) -> Any:
        return self._load()[index]

    def __len__(self) -> int:
        return len(StateSnapshot._fields)

    def __eq__(self, other: object) -> bool:
        return (
            tuple(self._load()) == tuple(other)
            if isinstance(other, tuple)
            else NotImplemented
        )

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._load())

    def _asdict(self) -> dict[str, Any]:
        return self._load()._asdict()

    def _replace(self, **changes: Any) -> StateSnapshot:  # type: ignore[override]
        return self._load()._replace(**changes)


def _field(snapshot: tuple[Any, ...], index: int) -> Any:
    """The stored tuple item (bypassing the lazy properties)."""
    return tuple.__getitem__(snapshot, index)


async def aget_state_history(
    graph: Pregel,
    config: RunnableConfig,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
) -> AsyncIterator[StateSnapshot]:
    merged, _ = graph._resolve(config)
    saver = _saver_or_raise(graph, merged)
    async for saved in saver.alist(
        _history_config(merged), filter=filter, before=before, limit=limit
    ):
        rebuilt = await awith_delta_values(graph.channels, saved, saver)
        assert rebuilt is not None
        yield snapshot_from(graph, rebuilt, live=False, saver=saver)


def infer_as_node(graph: Pregel, checkpoint: Checkpoint) -> str | None:
    """The node whose writes are newest, when that is unambiguous."""
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
        _raise_if_addressed(config)
        checkpoint = empty_checkpoint()
        step = -1
        parent_conf: dict[str, Any] = {
            CONFIG_KEY_THREAD_ID: thread_id,
            CONFIG_KEY_CHECKPOINT_NS: ns,
        }
        parents: dict[str, Any] = {}
    else:
        checkpoint = _copy_for_read(saved.checkpoint)
        graph.migrate_checkpoint(checkpoint)
        step = saved.metadata.get("step", -1)
        parent_conf = {
            CONFIG_KEY_THREAD_ID: thread_id,
            CONFIG_KEY_CHECKPOINT_NS: ns,
            CONFIG_KEY_CHECKPOINT_ID: saved.checkpoint["id"],
        }
        parents = dict(saved.metadata.get("parents", {}))
    channels = _channels(graph, saved.checkpoint if saved is not None else checkpoint)
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
    checkpoint["ts"] = datetime.now(UTC).isoformat()
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
    checkpoint = _copy_for_read(saved.checkpoint)
    checkpoint["channel_values"] = dict(checkpoint["channel_values"])
    checkpoint["updated_channels"] = saved.checkpoint.get("updated_channels")
    if "schema_version" in saved.checkpoint:
        checkpoint["schema_version"] = saved.checkpoint["schema_version"]
    step = saved.metadata.get("step", -1)
    checkpoint["id"] = new_checkpoint_id(step + 1)
    checkpoint["ts"] = datetime.now(UTC).isoformat()
    conf = saved.config.get(CONF, {})
    parent = _public_config(saved.parent_config)
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
    saver: BaseCheckpointSaver, plan: _UpdatePlan, saved: CheckpointTuple | None
) -> RunnableConfig:
    for tid, writes in plan.task_writes:
        if saved is not None and writes:
            saver.put_writes(plan.parent_config, writes, tid)
    return saver.put(
        plan.parent_config,
        plan.checkpoint,
        plan.metadata,  # type: ignore[arg-type]
        plan.new_versions,
    )


async def _asave_plan(
    saver: BaseCheckpointSaver, plan: _UpdatePlan, saved: CheckpointTuple | None
) -> RunnableConfig:
    for tid, writes in plan.task_writes:
        if saved is not None and writes:
            await saver.aput_writes(plan.parent_config, writes, tid)
    return await saver.aput(
        plan.parent_config,
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
    saver = _saver_or_raise(graph, merged)
    current, result = merged, merged
    while steps:
        updates = steps.pop(0)
        saved = with_delta_values(graph.channels, saver.get_tuple(current), saver)
        plan = plan_update(graph, saver, current, saved, updates)
        plan.task_writes = update_writes_to_store(
            graph.channels, saver, saved, plan.task_writes
        )
        result = _save_plan(saver, plan, saved)
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
    saver = _saver_or_raise(graph, merged)
    current, result = merged, merged
    while steps:
        updates = steps.pop(0)
        saved = await awith_delta_values(
            graph.channels, await saver.aget_tuple(current), saver
        )
        plan = plan_update(graph, saver, current, saved, updates)
        plan.task_writes = await aupdate_writes_to_store(
            graph.channels, saver, saved, plan.task_writes
        )
        result = await _asave_plan(saver, plan, saved)
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

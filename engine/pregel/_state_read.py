"""Time travel, the reading half: a thread's state snapshots and history.

Snapshots are built lazily from saved checkpoints; nothing here runs a node.
Writing state as a node (``update_state``) is in ``_state_update``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_THREAD_ID,
    ERROR,
    INPUT,
    INTERRUPT,
    NO_WRITES,
    NULL_TASK_ID,
    RESUME,
)
from engine._internal._typing import MISSING, RunnableConfig
from engine.channels.base import BaseChannel
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointSummary,
    CheckpointTuple,
    require_thread_id,
)
from engine.constants import TAG_HIDDEN
from engine.errors import (
    CheckpointNotFoundError,
    ErrorCode,
    error_message,
)
from engine.pregel._algo import (
    PregelExecutableTask,
    PregelTaskWrites,
    apply_writes,
    prepare_next_tasks,
)
from engine.pregel._delta import (
    awith_delta_values,
    with_delta_values,
)
from engine.types import Interrupt, PregelTask, StateSnapshot

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = (
    "COPY",
    "aget_state",
    "aget_state_history",
    "checkpoint_channels",
    "copy_for_read",
    "get_state",
    "get_state_history",
    "public_config",
    "raise_if_addressed",
    "saver_or_raise",
    "snapshot_from",
)

_SPECIAL = frozenset({ERROR, INTERRUPT, RESUME, NO_WRITES})
COPY = "__copy__"
"""``as_node`` that copies the addressed checkpoint as a new one (a fork point)."""


def saver_or_raise(graph: Pregel, config: RunnableConfig) -> BaseCheckpointSaver:
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


def checkpoint_channels(
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


def public_config(
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
    channels = checkpoint_channels(graph, checkpoint)
    step = saved.metadata.get("step", -1) + 1
    ns = saved.config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS, "")
    pending = saved.pending_writes or []
    null_writes = [
        (c, v) for t, c, v in pending if t == NULL_TASK_ID and c not in _SPECIAL
    ]
    if null_writes:
        apply_writes(
            copy_for_read(checkpoint),
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
            copy_for_read(checkpoint),
            channels,
            done,
            lambda: None,
            graph.trigger_to_nodes,
        )
    next_names = tuple(t.name for t in tasks.values() if not (live and t.writes))
    return StateSnapshot(
        values=graph.map_output(_read(graph, channels)),
        next=next_names,
        config=public_config(saved.config, saved.metadata) or saved.config,
        metadata=dict(saved.metadata),
        created_at=checkpoint.get("ts"),
        parent_config=public_config(saved.parent_config, saved.metadata),
        tasks=tuple(pregel_tasks),
        interrupts=tuple(i for t in pregel_tasks for i in t.interrupts),
    )


def copy_for_read(checkpoint: Checkpoint) -> Checkpoint:
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
    saver = saver_or_raise(graph, merged)
    saved = with_delta_values(graph.channels, saver.get_tuple(merged), saver)
    if saved is None:
        raise_if_addressed(merged)
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


def raise_if_addressed(config: RunnableConfig) -> None:
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
    saver = saver_or_raise(graph, merged)
    saved = await awith_delta_values(
        graph.channels, await saver.aget_tuple(merged), saver
    )
    if saved is None:
        raise_if_addressed(merged)
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
    saver = saver_or_raise(graph, merged)
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
            config=public_config(summary.config, summary.metadata) or summary.config,
            metadata=metadata,
            created_at=summary.created_at,
            parent_config=public_config(summary.parent_config, summary.metadata),
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
    saver = saver_or_raise(graph, merged)
    async for saved in saver.alist(
        _history_config(merged), filter=filter, before=before, limit=limit
    ):
        rebuilt = await awith_delta_values(graph.channels, saved, saver)
        assert rebuilt is not None
        yield snapshot_from(graph, rebuilt, live=False, saver=saver)

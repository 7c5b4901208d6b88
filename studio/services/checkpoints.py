"""One thread's checkpoints, read through its graph: the engine reads of the thread pages.

:class:`ThreadHistory` wraps the compiled graph of a thread and its
checkpointer. Reads are always bounded: a page of the saver's ``list()``
(newest first, ``before`` cursor, ``limit``), a page of one branch's line
(``lineage``: parent links from a checkpoint), one checkpoint by id, or one
snapshot. Nothing here loads a thread's whole history.

Checkpoint ids come from URLs: an id that is not shaped like one, or not on the
thread, is :class:`~studio.errors.CheckpointNotFound` (404).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import Any

from engine.checkpoint.base import CheckpointTuple
from engine.checkpoint.serde.types import ERROR, INTERRUPT, RESUME
from engine.constants import START
from engine.graph.message import add_messages
from engine.types import StateSnapshot
from studio.errors import CheckpointNotFound, NotFound
from studio.models import Thread
from studio.presentation.diff import Kind
from studio.services.registered_graphs import runnable
from studio.services.saver import get_saver

__all__ = (
    "ThreadHistory",
    "channel_kind",
    "checkpoint_id_of",
    "parent_id_of",
    "pending_flags",
    "timestamp",
    "writers",
)

_CHECKPOINT_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._:-]{0,63}$")


def channel_kind(channel: Any) -> Kind:
    """How a state channel merges writes: its reducer, as a diff kind."""
    reducer = getattr(channel, "operator", None)
    if reducer is None:
        return "value"
    reducer = getattr(reducer, "func", reducer)  # functools.partial(add_messages, ...)
    if reducer is operator.add:
        return "append"
    if reducer is add_messages or getattr(reducer, "__name__", "") == "add_messages":
        return "messages"
    return "reducer"


def checkpoint_id_of(config: Any) -> str:
    return str(((config or {}).get("configurable") or {}).get("checkpoint_id") or "")


def parent_id_of(saved: CheckpointTuple | StateSnapshot) -> str:
    """The parent checkpoint's id ("" for the first checkpoint)."""
    return checkpoint_id_of(saved.parent_config)


def timestamp(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def writers(metadata: Any) -> dict[str, Any]:
    """Node -> update of the step that made a checkpoint (``metadata["writes"]``)."""
    writes = (metadata or {}).get("writes")
    return dict(writes) if isinstance(writes, dict) else {}


def pending_flags(saved: CheckpointTuple) -> tuple[bool, bool, bool]:
    """(interrupted, resumed, failed) for the step after ``saved``, from its pending writes."""
    channels = {channel for _, channel, _ in saved.pending_writes or ()}
    return INTERRUPT in channels, RESUME in channels, ERROR in channels


class ThreadHistory:
    """Bounded reads of one thread's root-namespace checkpoints.

    Raises (on construction):
        GraphNotFound: the thread's graph is no longer registered.
        NotFound: the thread has no graph yet (created through the API, never run).
    """

    def __init__(self, thread: Thread) -> None:
        if not thread.graph:
            raise NotFound(
                f"Thread {thread.thread_id!r} has no history yet: it was created "
                "through the API, and its first run will say which graph it follows.",
                thread_id=thread.thread_id,
            )
        self.thread = thread
        self.graph = runnable(thread.graph)
        self.saver = get_saver()  # the one the graph is bound to

    # -- the graph's shape ------------------------------------------------------------

    @cached_property
    def state_keys(self) -> tuple[str, ...]:
        info = getattr(self.graph, "state_info", None)
        if info is not None and info.keys:
            return tuple(info.keys)
        keys = self.graph.stream_channels
        return (keys,) if isinstance(keys, str) else tuple(keys or ())

    @cached_property
    def kinds(self) -> dict[str, Kind]:
        channels = self.graph.channels
        return {
            key: channel_kind(channels[key])
            for key in self.state_keys
            if key in channels
        }

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        """Node names a state update can be made as (START excluded)."""
        return tuple(name for name in self.graph.nodes if name != START)

    @cached_property
    def state_info(self) -> Any:
        return getattr(self.graph, "state_info", None)

    def channel(self, key: str) -> Any:
        return self.graph.channels.get(key)

    # -- reads --------------------------------------------------------------------------

    def config(self, checkpoint_id: str = "") -> dict[str, Any]:
        configurable: dict[str, Any] = {
            "thread_id": self.thread.thread_id,
            "checkpoint_ns": "",
        }
        if checkpoint_id:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    def page(self, *, before: str = "", limit: int) -> list[CheckpointTuple]:
        """Up to ``limit`` checkpoints older than ``before`` (newest first)."""
        cursor = self.config(self._checked(before)) if before else None
        return list(self.saver.list(self.config(), before=cursor, limit=limit))

    def lineage(self, start: str, *, limit: int) -> list[CheckpointTuple]:
        """``start`` and its ancestors, newest first, up to ``limit``: one branch's
        line, whatever other branches the thread has. One read per checkpoint; a
        parent that is gone (pruned) ends the line."""
        line: list[CheckpointTuple] = []
        wanted = start
        while wanted and len(line) < limit:
            found = self.saver.get_tuple(self.config(self._checked(wanted)))
            if found is None or checkpoint_id_of(found.config) != wanted:
                if not line:
                    raise self._not_found(wanted)
                break
            line.append(found)
            wanted = parent_id_of(found)
        return line

    def saved(self, checkpoint_id: str) -> CheckpointTuple:
        """One checkpoint with its metadata and pending writes."""
        found = self.saver.get_tuple(self.config(self._checked(checkpoint_id)))
        if found is None or checkpoint_id_of(found.config) != checkpoint_id:
            raise self._not_found(checkpoint_id)
        return found

    def head(self) -> CheckpointTuple | None:
        """The newest checkpoint, or None for a thread without state."""
        return self.saver.get_tuple(self.config())

    def snapshot(self, checkpoint_id: str) -> StateSnapshot:
        """The checkpoint as history shows it: its values and the step that followed."""
        config = self.config(self._checked(checkpoint_id))
        found = next(iter(self.graph.get_state_history(config, limit=1)), None)
        if found is None:
            raise self._not_found(checkpoint_id)
        return found

    def snapshot_values(self, snapshot: StateSnapshot) -> dict[str, Any]:
        """A snapshot's state keys and values, as a dict (pydantic states included)."""
        values = snapshot.values
        if not isinstance(values, Mapping):
            dump = getattr(values, "model_dump", None)
            values = dump() if callable(dump) else {}
        return {key: values[key] for key in self.state_keys if key in values}

    def values(self, saved: CheckpointTuple | None) -> dict[str, Any]:
        """The state keys' values stored in a checkpoint ({} for None)."""
        if saved is None:
            return {}
        stored = saved.checkpoint.get("channel_values") or {}
        return {key: stored[key] for key in self.state_keys if key in stored}

    def changed_keys(self, saved: CheckpointTuple) -> tuple[str, ...]:
        updated = saved.checkpoint.get("updated_channels") or ()
        keys = set(self.state_keys)
        return tuple(channel for channel in updated if channel in keys)

    def _checked(self, checkpoint_id: str) -> str:
        if not _CHECKPOINT_ID.match(checkpoint_id or ""):
            raise self._not_found(checkpoint_id)
        return checkpoint_id

    def _not_found(self, checkpoint_id: str) -> CheckpointNotFound:
        return CheckpointNotFound(
            f"There is no checkpoint {checkpoint_id!r} on this thread.",
            checkpoint_id=checkpoint_id,
        )

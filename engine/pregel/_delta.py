"""How a run saves and reloads ``DeltaChannel`` values.

Saving: a delta channel's value is not stored with a checkpoint; its writes are
(as the pending writes of the checkpoint before the step). A checkpoint stores
the plain value, a *snapshot*, when

- the channel was written ``snapshot_frequency`` times since its last snapshot,
  or ``DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`` steps passed (counted in the
  metadata's ``counters_since_delta_snapshot``; checked when it is written);
- the step overwrote it (``Overwrite``);
- the writes that changed it are not exactly the writes stored on the parent
  checkpoint: an input, ``update_state``, a fork, a branch off an older
  checkpoint, or ``durability="exit"`` (steps in between were never saved).

A snapshot is stored only for a channel whose version changed, so its value
stays a function of its version (as every channel's is) and no version is bumped
just to store one. Loading: a channel without a stored value is rebuilt from
``BaseCheckpointSaver.get_delta_channel_history`` (its nearest snapshot plus the
writes after it), before the run, ``get_state`` or history see the checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine._internal._typing import MISSING
from engine.channels.base import BaseChannel
from engine.channels.delta import DeltaChannel
from engine.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointTuple,
    DeltaChannelHistory,
)

__all__ = (
    "COUNTERS_KEY",
    "DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT",
    "advance_counters",
    "awith_delta_values",
    "channels_to_snapshot",
    "delta_channel_names",
    "aupdate_writes_to_store",
    "reset_counters",
    "update_writes_to_store",
    "with_delta_values",
)

COUNTERS_KEY = "counters_since_delta_snapshot"

_TaskWrites = list[tuple[str, Sequence[tuple[str, Any]]]]

DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT = int(
    os.environ.get("LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT", "5000")
)
"""Steps after which a delta channel's next write saves a snapshot even when it
was written fewer than ``snapshot_frequency`` times (as LangGraph's, from the
same environment variable)."""


def delta_channel_names(specs: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(k for k, spec in specs.items() if isinstance(spec, DeltaChannel))


def advance_counters(
    previous: Any,
    names: Iterable[str],
    written: Iterable[str] | None,
) -> dict[str, tuple[int, int]]:
    """One more step for every delta channel, one more write for those written.

    ``previous``: the parent checkpoint's counters (a mapping of 2-item sequences)."""
    before: Mapping[str, Sequence[int]] = (
        previous if isinstance(previous, Mapping) else {}
    )
    wrote = set(written or ())
    counters: dict[str, tuple[int, int]] = {}
    for name in names:
        updates, steps = before.get(name, (0, 0))
        counters[name] = (updates + (name in wrote), steps + 1)
    return counters


def channels_to_snapshot(
    channels: Mapping[str, BaseChannel[Any, Any, Any]],
    names: Iterable[str],
    counters: Mapping[str, Sequence[int]],
    changed: Iterable[str],
    *,
    replayable: bool,
) -> set[str]:
    """The delta channels whose value this save stores (see the module docstring).

    ``changed``: channels whose version changed since the parent checkpoint.
    ``replayable``: the step's writes are the ones stored on the parent.
    """
    changed = set(changed)
    chosen: set[str] = set()
    for name in names:
        channel = channels[name]
        if name not in changed or not channel.is_available():
            continue
        assert isinstance(channel, DeltaChannel)
        updates, steps = counters.get(name, (0, 0))
        if (
            not replayable
            or channel.overwrote
            or updates >= channel.snapshot_frequency
            or steps >= DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT
        ):
            chosen.add(name)
    return chosen


def reset_counters(
    metadata: dict[str, Any],
    counters: Mapping[str, Sequence[int]],
    snapshotted: Iterable[str],
) -> None:
    """Store ``counters`` in ``metadata``, snapshotted ones at zero, zeros left out."""
    done = set(snapshotted)
    kept = {
        name: [int(value[0]), int(value[1])]  # JSON has no tuples
        for name, value in counters.items()
        if name not in done and tuple(value) != (0, 0)
    }
    if kept:
        metadata[COUNTERS_KEY] = kept
    else:
        metadata.pop(COUNTERS_KEY, None)


def _to_rebuild(specs: Mapping[str, Any], saved: CheckpointTuple) -> list[str]:
    """Delta channels with a version but no stored value at ``saved``."""
    checkpoint = saved.checkpoint
    versions, values = checkpoint["channel_versions"], checkpoint["channel_values"]
    return [
        name
        for name, spec in specs.items()
        if isinstance(spec, DeltaChannel) and name in versions and name not in values
    ]


def _rebuilt(
    specs: Mapping[str, Any],
    saved: CheckpointTuple,
    histories: Mapping[str, DeltaChannelHistory],
) -> CheckpointTuple:
    values = dict(saved.checkpoint["channel_values"])
    for name, history in histories.items():
        spec = specs[name]
        assert isinstance(spec, DeltaChannel)
        channel = spec.from_checkpoint(history.get("seed", MISSING))
        channel.replay_writes(history["writes"])
        values[name] = channel.value
    checkpoint = saved.checkpoint.copy()
    checkpoint["channel_values"] = values
    return saved._replace(checkpoint=checkpoint)


def with_delta_values(
    specs: Mapping[str, Any],
    saved: CheckpointTuple | None,
    saver: BaseCheckpointSaver | None,
) -> CheckpointTuple | None:
    """``saved`` with its delta channels' values rebuilt into ``channel_values``."""
    if saved is None or saver is None or not (names := _to_rebuild(specs, saved)):
        return saved
    histories = saver.get_delta_channel_history(config=saved.config, channels=names)
    return _rebuilt(specs, saved, histories)


async def awith_delta_values(
    specs: Mapping[str, Any],
    saved: CheckpointTuple | None,
    saver: BaseCheckpointSaver | None,
) -> CheckpointTuple | None:
    """Async twin of :func:`with_delta_values`."""
    if saved is None or saver is None or not (names := _to_rebuild(specs, saved)):
        return saved
    histories = await saver.aget_delta_channel_history(
        config=saved.config, channels=names
    )
    return _rebuilt(specs, saved, histories)


def _delta_writes_only_if_head(
    specs: Mapping[str, Any],
    task_writes: _TaskWrites,
    is_head: bool,
) -> _TaskWrites:
    if is_head:
        return task_writes
    return [
        (task_id, [w for w in ws if not isinstance(specs.get(w[0]), DeltaChannel)])
        for task_id, ws in task_writes
    ]


def _touches_delta(specs: Mapping[str, Any], task_writes: _TaskWrites) -> bool:
    return any(
        isinstance(specs.get(c), DeltaChannel) for _, ws in task_writes for c, _ in ws
    )


def update_writes_to_store(
    specs: Mapping[str, Any],
    saver: BaseCheckpointSaver,
    saved: CheckpointTuple | None,
    task_writes: _TaskWrites,
) -> _TaskWrites:
    """An update's task writes to store on the checkpoint it builds on.

    Writes to delta channels are left out when that checkpoint is no longer the
    thread's newest: its existing children would replay them. The update's own
    checkpoint stores those channels' values (a snapshot) instead.
    """
    if saved is None or not _touches_delta(specs, task_writes):
        return task_writes
    latest = saver.get_tuple(_latest_config(saved))
    is_head = latest is not None and latest.checkpoint["id"] == saved.checkpoint["id"]
    return _delta_writes_only_if_head(specs, task_writes, is_head)


async def aupdate_writes_to_store(
    specs: Mapping[str, Any],
    saver: BaseCheckpointSaver,
    saved: CheckpointTuple | None,
    task_writes: _TaskWrites,
) -> _TaskWrites:
    """Async twin of :func:`update_writes_to_store`."""
    if saved is None or not _touches_delta(specs, task_writes):
        return task_writes
    latest = await saver.aget_tuple(_latest_config(saved))
    is_head = latest is not None and latest.checkpoint["id"] == saved.checkpoint["id"]
    return _delta_writes_only_if_head(specs, task_writes, is_head)


def _latest_config(saved: CheckpointTuple) -> dict[str, Any]:
    conf = dict(saved.config.get("configurable", {}))
    conf.pop("checkpoint_id", None)
    return {"configurable": conf}

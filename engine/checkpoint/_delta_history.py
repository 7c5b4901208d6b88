"""Pure: the ancestor walk behind ``get_delta_channel_history``, shared by every saver.

A ``DeltaChannel``'s value at a checkpoint is its nearest stored value (the
*seed*) with the writes stored on the checkpoints from there to the target's
parent replayed on top. A saver feeds the walk one ancestor at a time, newest
first, as a :class:`DeltaNode`; the walk says which ancestor it needs next and
stops as soon as every channel has its seed.

One rule goes beyond LangGraph's walk: an ancestor's writes to a channel count
only when the channel's version changed between that ancestor and its child on
the path. Writes a child did not apply (a newer input discarded them, or they
belong to another branch's update) therefore never leak into the replay; a
delta channel's value is a function of its version, as every other channel's is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, NotRequired, TypedDict

__all__ = ("DeltaChannelHistory", "DeltaNode", "DeltaWalk")


class DeltaChannelHistory(TypedDict):
    """What one channel needs to be rebuilt at a checkpoint.

    ``writes``: the ``(task_id, channel, value)`` writes to the channel stored on
    the checkpoints between the seed and the target (the target's own pending
    writes excluded), oldest first; within a checkpoint in stored order (task
    path, task id, index). ``seed``: the value stored at the nearest ancestor
    that has one; absent when the channel starts empty.
    """

    writes: list[tuple[str, str, Any]]
    seed: NotRequired[Any]


class DeltaNode(NamedTuple):
    """One checkpoint as the walk reads it."""

    checkpoint_id: str
    parent_id: str | None
    versions: Mapping[str, Any]
    """The checkpoint's channel versions."""
    values: Mapping[str, Any]
    """Stored values (at least those of the channels walked for)."""
    writes: Sequence[tuple[str, str, Any]]
    """Its pending writes in stored order (other channels' may be included)."""


class DeltaWalk:
    """Walk state: feed :meth:`visit` the node :attr:`next_id` names until it is None."""

    def __init__(self, channels: Sequence[str], target: DeltaNode | None) -> None:
        self.channels = list(dict.fromkeys(channels))
        self._writes: dict[str, list[list[tuple[str, str, Any]]]] = {
            c: [] for c in self.channels
        }
        self._seeds: dict[str, Any] = {}
        self._child_versions: dict[str, Any] = {}
        if target is None:
            self.next_id: str | None = None
            return
        # A channel without a version at the target was never written on its path.
        self._child_versions = {
            c: target.versions[c] for c in self.channels if c in target.versions
        }
        self.next_id = target.parent_id if self._child_versions else None

    @property
    def open_channels(self) -> list[str]:
        """The channels still without a seed: what the next node must hold."""
        return list(self._child_versions)

    def visit(self, node: DeltaNode | None) -> None:
        """Take in the ancestor :attr:`next_id` named (None: it is gone; stop)."""
        if node is None:
            self.next_id = None
            return
        open_channels = self._child_versions
        by_channel: dict[str, list[tuple[str, str, Any]]] = {}
        for write in node.writes:
            if write[1] in open_channels:
                by_channel.setdefault(write[1], []).append(write)
        still_open: dict[str, Any] = {}
        for channel, child_version in open_channels.items():
            version = node.versions.get(channel)
            if version != child_version and channel in by_channel:
                self._writes[channel].append(by_channel[channel])
            if channel in node.values:
                self._seeds[channel] = node.values[channel]
            elif version is not None:
                still_open[channel] = version
        self._child_versions = still_open
        self.next_id = node.parent_id if still_open else None

    def result(self) -> dict[str, DeltaChannelHistory]:
        history: dict[str, DeltaChannelHistory] = {}
        for channel in self.channels:
            entry: DeltaChannelHistory = {
                "writes": [
                    w for batch in reversed(self._writes[channel]) for w in batch
                ]
            }
            if channel in self._seeds:
                entry["seed"] = self._seeds[channel]
            history[channel] = entry
        return history

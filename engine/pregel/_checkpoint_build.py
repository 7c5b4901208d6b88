"""Building checkpoints: the snapshot a saver may keep (only changed channels
serialized again), append-only deltas, and what a step wrote, by node.

Pure over the loop's state: the loop hands what is built here to the saver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_THREAD_ID,
)
from engine._internal._ids import new_checkpoint_stamp
from engine._internal._typing import MISSING, RunnableConfig
from engine.checkpoint.base import EXCLUDED_METADATA_KEYS, EXPECTED_HEAD, Checkpoint
from engine.checkpoint.serde.jsonplus import PlainDict, is_small_plain, plain_keys
from engine.constants import TAG_HIDDEN
from engine.pregel._algo import PregelExecutableTask, next_names
from engine.pregel._delta import (
    COUNTERS_KEY,
    advance_counters,
    channels_to_snapshot,
    reset_counters,
)
from engine.pregel._loop_state import LoopState

__all__ = ("CheckpointBuilder",)


class CheckpointBuilder(LoopState):
    """Makes the next checkpoint from the working one."""

    def _step_writes(
        self, tasks: Sequence[PregelExecutableTask]
    ) -> dict[str, list[str]] | None:
        """What the step wrote, by node: the state keys (values live in pending writes).

        Recording keys, not values, keeps metadata small and stores each value once.
        """
        if self.checkpointer is None:
            return None
        cached = self._state_keys
        if cached is None or cached[0] is not self.stream_keys:
            keys = self.stream_keys
            cached = self._state_keys = (
                keys,
                self.graph.output_channel_set
                | set((keys,) if isinstance(keys, str) else keys),
            )
        state_keys = cached[1]
        writes: dict[str, list[str]] = {}
        for task in tasks:
            if TAG_HIDDEN in task.node.tags:
                continue
            keys = writes.setdefault(task.name, [])
            for chan, _ in task.writes:
                if chan in state_keys and chan not in keys:
                    keys.append(chan)
        return writes

    def _snapshot(self) -> Checkpoint:
        """A copy of the working checkpoint the saver may keep (values shared, dicts fresh)."""
        working = self.checkpoint
        kept_by_copy = getattr(self.persistence, "kept_by_copy", False)
        # A saver that copies what it keeps leaves this dict alone: the next
        # snapshot changes it instead of a copy.
        values = self._saved_values if kept_by_copy else dict(self._saved_values)
        channels = self.channels
        for chan in self._bumped if self._bumped is not None else channels.keys():
            value = channels[chan].checkpoint()
            if value is MISSING:
                values.pop(chan, None)
            else:
                values[chan] = value
        self._saved_values = values
        seen = working["versions_seen"]
        if not kept_by_copy:
            # The saver may keep it. Each node's dict is shared, not copied:
            # the loop replaces a node's dict rather than change it
            # (``apply_writes``, interrupts).
            seen = dict(seen)
        snapshot: Checkpoint = {
            "v": working.get("v", 4),
            "id": working["id"],
            "ts": working["ts"],
            "channel_values": values,
            "channel_versions": dict(working["channel_versions"]),
            "versions_seen": seen,
            "updated_channels": working.get("updated_channels"),
        }
        if self.graph.schema_version is not None:
            snapshot["schema_version"] = self.graph.schema_version
        return snapshot

    def _deltas(self, new_versions: Mapping[str, Any]) -> dict[str, tuple[Any, int]]:
        deltas: dict[str, tuple[Any, int]] = {}
        appending = self._appending
        if appending is None:  # the channels that may record an append
            appending = self._appending = frozenset(
                name
                for name, channel in self.channels.items()
                if hasattr(channel, "append_base")
            )
        if appending.isdisjoint(new_versions):
            return deltas
        saved = self._saved_versions
        for chan in new_versions:
            if chan not in appending:
                continue
            base = getattr(self.channels[chan], "append_base", None)
            if base is not None and chan in saved:
                deltas[chan] = (saved[chan], base)
        return deltas

    def _store_delta_snapshots(
        self, snapshot: Checkpoint, metadata: dict[str, Any], changed: Mapping[str, Any]
    ) -> None:
        """Put the delta channels due a snapshot in ``snapshot`` (see ``_delta``)."""
        counters = metadata.get(COUNTERS_KEY) or {}
        replayable = (
            metadata.get("source") == "loop"
            and self.durability != "exit"
            and self._fence
        )
        chosen = channels_to_snapshot(
            self.channels, self._delta_names, counters, changed, replayable=replayable
        )
        if chosen:
            values = dict(snapshot["channel_values"])
            for name in chosen:
                values[name] = self.channels[name].get()
            snapshot["channel_values"] = values
        reset_counters(metadata, counters, chosen)

    def _stamp_checkpoint(self, source: str, writes: Any) -> dict[str, Any]:
        """Make the working checkpoint the current step's: a new id, its metadata
        (returned), and the configs that address it and its parent."""
        checkpoint = self.checkpoint
        checkpoint["id"], checkpoint["ts"] = new_checkpoint_stamp(self.step)
        checkpoint["updated_channels"] = (
            sorted(self.updated_channels) if self.updated_channels is not None else None
        )
        base = self._metadata_base
        if base is None:
            base = self._metadata_base = self._run_metadata()
        # A step's metadata is plain JSON when the run's part is and no delta
        # channel adds its counters (tuples): then it says so to the serializer
        # (``PlainDict``), which writes it without checking it again.
        plain = base[2] and source == "loop" and not self._delta_names
        metadata: dict[str, Any] = (PlainDict if plain else dict)(
            base[0],
            source=source,
            step=self.step,
            parents=dict(base[1]) if base[1] else {},
        )
        if writes is not None:
            metadata["writes"] = writes
        # Plan the next step now (the tick reuses it) so the checkpoint can say
        # which nodes run next: history reads that without re-planning.
        self._planned = self._plan(checkpoint, self.step + 1)
        self._planned_for = (checkpoint["id"], self.step + 1)
        metadata["next"] = next_names(self._planned, self.graph.node_index)
        if self._delta_names:
            metadata[COUNTERS_KEY] = advance_counters(
                self.checkpoint_metadata.get(COUNTERS_KEY),
                self._delta_names,
                self.updated_channels,
            )
        self.checkpoint_metadata = metadata  # type: ignore[assignment]
        self.parent_checkpoint_id = self._last_saved_id
        self._stamped_id = checkpoint["id"]  # the config follows when asked for
        return metadata

    def _run_metadata(self) -> tuple[dict[str, Any], dict[str, str], bool]:
        """What every checkpoint of the run says the same: the plain entries of
        the config's metadata (not the keys that address a checkpoint or describe
        a task, which LangGraph leaves out) and the parent namespaces' checkpoint
        ids (the config does not change while the run lasts); and whether a step's
        metadata made of them is plain JSON (``PlainDict``): they are, and the
        node names that key its ``writes`` may be keys (its other parts are
        the step, channel and node names)."""
        own = {
            k: v
            for k, v in self.config.get("metadata", {}).items()
            if _plain(v)
            and k not in EXCLUDED_METADATA_KEYS  # a subgraph's config has thread_id
            and not k.startswith(("langgraph_", "__"))
        }
        parents = {
            ns: cid
            for ns, cid in self.configurable.get(CONFIG_KEY_CHECKPOINT_MAP, {}).items()
            if ns != self.checkpoint_ns
        }
        plain = (
            is_small_plain(own)
            and is_small_plain(parents)
            and plain_keys(self.graph.nodes)
            and all(type(name) is str for name in self.channels)
        )
        return own, parents, plain

    def _step_snapshot(
        self, metadata: dict[str, Any]
    ) -> tuple[Checkpoint, dict[str, Any], RunnableConfig]:
        """What to save for the current checkpoint: the snapshot, the versions of the
        channels it changed, and the config naming its parent (fenced at the
        thread's head unless the save starts a branch)."""
        snapshot = self._snapshot()
        parent_id = self._last_saved_id
        new_versions = {
            c: snapshot["channel_versions"][c]
            for c in (self._bumped or ())
            if c in snapshot["channel_versions"]
        }
        if deltas := self._deltas(new_versions):
            snapshot["channel_deltas"] = deltas
        if self._delta_names:
            self._store_delta_snapshots(snapshot, metadata, new_versions)
        conf: dict[str, Any] = {
            CONFIG_KEY_THREAD_ID: self.thread_id,
            CONFIG_KEY_CHECKPOINT_NS: self.checkpoint_ns,
        }
        if parent_id is not None:
            conf[CONFIG_KEY_CHECKPOINT_ID] = parent_id
        if self._fence:
            conf[EXPECTED_HEAD] = parent_id
        lease = getattr(self.persistence, "fence", None)
        if lease:  # the run's lease, which the persistence would add in a copy
            conf.update(lease)
        return snapshot, new_versions, {CONF: conf}


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None

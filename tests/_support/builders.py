"""Builders for hand-made checkpoints and configs (no graph, no runtime).

``make_checkpoint`` makes a first checkpoint; ``next_checkpoint`` makes the one
after it the way the runtime does: a new time-ordered id, new versions for the
channels that changed, and the ``channel_deltas`` hint for lists that only grew.
"""

from __future__ import annotations

from typing import Any

from engine._internal._ids import new_checkpoint_id
from engine._internal._typing import RunnableConfig
from engine.checkpoint.base import (
    EXPECTED_HEAD,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    empty_checkpoint,
)

__all__ = (
    "fenced",
    "make_checkpoint",
    "make_config",
    "make_metadata",
    "next_checkpoint",
    "next_version",
    "put_first",
    "save_chain",
)

_VERSIONS = BaseCheckpointSaver()


def next_version(current: Any = None) -> str:
    """The version after ``current`` (the savers' default scheme)."""
    return _VERSIONS.get_next_version(current)


def make_config(
    thread_id: str = "t1",
    checkpoint_id: str | None = None,
    checkpoint_ns: str = "",
) -> dict[str, Any]:
    """A config addressing a thread (and namespace, and maybe one checkpoint)."""
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def fenced(config: dict[str, Any], expected_head: str | None) -> dict[str, Any]:
    """``config`` with the fencing key: the write must find ``expected_head`` newest."""
    return {"configurable": {**config["configurable"], EXPECTED_HEAD: expected_head}}


def make_metadata(
    step: int = -1, source: str = "input", **extra: Any
) -> CheckpointMetadata:
    return {"source": source, "step": step, "parents": {}, **extra}  # type: ignore[typeddict-item]


def make_checkpoint(
    values: dict[str, Any] | None = None, *, step: int = -1
) -> Checkpoint:
    """A first checkpoint holding ``values``; every channel at its first version."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = new_checkpoint_id(step)
    values = dict(values or {})
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {name: next_version(None) for name in values}
    checkpoint["versions_seen"] = {"__input__": {}}
    return checkpoint


def next_checkpoint(
    previous: Checkpoint,
    updates: dict[str, Any] | None = None,
    *,
    append: dict[str, list[Any]] | None = None,
    step: int = 0,
) -> tuple[Checkpoint, ChannelVersions]:
    """The checkpoint after ``previous`` and the versions that changed.

    ``updates`` replace channel values; ``append`` extends list channels and
    marks them as deltas (what the runtime does for ``operator.add`` lists).
    """
    values = dict(previous["channel_values"])
    versions = dict(previous["channel_versions"])
    changed: ChannelVersions = {}
    deltas: dict[str, tuple[Any, int]] = {}
    for name, value in (updates or {}).items():
        values[name] = value
        changed[name] = versions[name] = next_version(versions.get(name))
    for name, items in (append or {}).items():
        base = list(values.get(name, []))
        if name in versions:
            deltas[name] = (versions[name], len(base))
        values[name] = base + list(items)
        changed[name] = versions[name] = next_version(versions.get(name))
    checkpoint = empty_checkpoint()
    checkpoint["id"] = new_checkpoint_id(step)
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = versions
    checkpoint["versions_seen"] = {
        k: dict(v) for k, v in previous["versions_seen"].items()
    }
    checkpoint["updated_channels"] = sorted(changed)
    if deltas:
        checkpoint["channel_deltas"] = deltas
    return checkpoint, changed


def save_chain(
    saver: BaseCheckpointSaver,
    thread_id: str,
    steps: int,
    *,
    checkpoint_ns: str = "",
    fence: bool = False,
) -> list[dict[str, Any]]:
    """Save ``steps`` checkpoints in a line (each the parent of the next); their configs.

    Channel ``n`` holds the step number. With ``fence`` every put carries the
    expected head, as the runtime's puts do.
    """
    configs: list[dict[str, Any]] = []
    checkpoint = make_checkpoint({"n": -1})
    versions: ChannelVersions = dict(checkpoint["channel_versions"])
    parent: str | None = None
    for step in range(-1, steps - 1):
        if step >= 0:
            checkpoint, versions = next_checkpoint(checkpoint, {"n": step}, step=step)
        config = make_config(thread_id, parent, checkpoint_ns)
        if fence:
            config = fenced(config, parent)
        stored = saver.put(
            config,
            checkpoint,
            make_metadata(step, "loop" if step >= 0 else "input"),
            versions,
        )
        configs.append(stored)
        parent = checkpoint["id"]
    return configs


def put_first(
    saver: BaseCheckpointSaver, thread_id: str, values: dict[str, Any]
) -> tuple[Checkpoint, RunnableConfig]:
    """A thread's first checkpoint (the input's), saved fenced on an empty
    thread as the runtime saves it; the checkpoint and the config addressing it."""
    checkpoint = make_checkpoint(values)
    config = saver.put(
        fenced(make_config(thread_id), None),
        checkpoint,
        make_metadata(),
        checkpoint["channel_versions"],
    )
    return checkpoint, config


def save_steps(saver: BaseCheckpointSaver, thread_id: str, steps: int) -> list[str]:
    """A loop saved as the engine saves it: each step's writes with the next
    checkpoint (a fenced ``put_step``); the checkpoint ids, oldest first.

    Channel ``n`` holds the step number, ``log`` (a list grown as a delta) every
    step so far; step ``k``'s task is ``task-k`` and writes both."""
    checkpoint, config = put_first(saver, thread_id, {"n": 0, "log": []})
    ids = [checkpoint["id"]]
    for step in range(steps):
        parent = checkpoint["id"]
        checkpoint, changed = next_checkpoint(
            checkpoint, {"n": step + 1}, append={"log": [step]}, step=step
        )
        config = saver.put_step(
            fenced(config, parent),
            [(f"task-{step}", "~pull, a", [("n", step + 1), ("log", [step])])],
            checkpoint,
            make_metadata(step, "loop"),
            changed,
        )
        ids.append(checkpoint["id"])
    return ids

"""Functions run in child processes (multiprocessing, spawn) by the saver tests.

Module-level and importable, so a spawned interpreter can find them; each
opens its own saver from a picklable :class:`~tests._support.savers.SaverSpec`.
"""

from __future__ import annotations

from typing import Any

from engine.checkpoint.memory import InMemorySaver
from engine.errors import CheckpointConflictError
from tests._support.builders import (
    fenced,
    make_config,
    make_metadata,
    next_checkpoint,
    save_chain,
)
from tests._support.savers import SaverSpec

__all__ = ("append_racing", "run_setup", "write_chain")


def write_chain(spec: SaverSpec, thread_id: str, steps: int) -> int:
    """Write a fenced line of ``steps`` checkpoints on its own thread; how many."""
    with spec.open(setup=False) as saver:
        return len(save_chain(saver, thread_id, steps, fence=True))


def append_racing(spec: SaverSpec, thread_id: str, writer: str, successes: int) -> int:
    """Append ``successes`` checkpoints to a thread others append to as well.

    Each attempt reads the head and writes fenced on it; a conflict means another
    writer got there first, so re-read and retry. Returns the conflicts seen.
    """
    with spec.open(setup=False) as saver:
        return append_with_retries(saver, thread_id, writer, successes)


def append_with_retries(saver, thread_id: str, writer: str, successes: int) -> int:
    done = conflicts = 0
    while done < successes:
        head = saver.get_tuple(make_config(thread_id))
        assert head is not None
        parent_id = head.checkpoint["id"]
        checkpoint, changed = next_checkpoint(
            head.checkpoint, {"n": f"{writer}-{done}"}
        )
        config = fenced(make_config(thread_id, parent_id), parent_id)
        try:
            saver.put(
                config, checkpoint, make_metadata(done, "loop", writer=writer), changed
            )
        except CheckpointConflictError:
            conflicts += 1
        else:
            done += 1
    return conflicts


def run_setup(spec: SaverSpec, barrier: Any = None) -> bool:
    """Create the schema, as every process of a deployment does at start.

    With a ``multiprocessing.Barrier``, wait until every process is connected,
    so their ``setup()`` calls really overlap.
    """
    with spec.open(setup=False) as saver:
        assert not isinstance(saver, InMemorySaver)
        if barrier is not None:
            barrier.wait(timeout=60)
        saver.setup()  # type: ignore[attr-defined]
    return True

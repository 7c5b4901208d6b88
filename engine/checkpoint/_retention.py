"""Pure retention planning: which checkpoints ``prune(strategy="keep_latest")`` keeps.

Per namespace, it keeps every branch head (the latest checkpoint of each fork),
every fork point (a checkpoint with several children) and every checkpoint with
an open interrupt; kept checkpoints are re-parented to their nearest kept
ancestor, so the tree of branches can still be drawn. Afterwards only the
channel values that kept checkpoints read (delta bases included) stay stored.
``delete_for_runs`` re-parents the same way (``reparent_survivors``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from engine._internal._constants import ERROR, INTERRUPT, NO_WRITES, RESUME

__all__ = (
    "BlobKey",
    "live_blob_keys",
    "open_interrupts",
    "plan_prune",
    "reparent_survivors",
)

_SPECIAL = frozenset({ERROR, INTERRUPT, RESUME, NO_WRITES})


def plan_prune(
    parents: Mapping[str, str | None], protected: Iterable[str] = ()
) -> tuple[set[str], dict[str, str | None]]:
    """Checkpoint ids to keep, and the new parent of each kept one whose parent changes.

    Args:
        parents: checkpoint id -> parent id (None for roots), one namespace.
        protected: ids that must be kept (e.g. open interrupts).
    """
    children: dict[str, int] = {}
    for parent in parents.values():
        if parent is not None and parent in parents:
            children[parent] = children.get(parent, 0) + 1
    keep = {cid for cid in parents if children.get(cid, 0) == 0}
    keep |= {cid for cid, count in children.items() if count > 1}
    keep |= {cid for cid in protected if cid in parents}
    reparent: dict[str, str | None] = {}
    for cid in keep:
        original = parents[cid]
        ancestor = original
        while ancestor is not None and ancestor in parents and ancestor not in keep:
            ancestor = parents[ancestor]
        if ancestor is not None and ancestor not in parents:
            ancestor = None
        if ancestor != original:
            reparent[cid] = ancestor
    return keep, reparent


def open_interrupts(writes: Iterable[tuple[str, str, str]]) -> set[str]:
    """Checkpoint ids with an interrupt that no later write of its task answered.

    Args:
        writes: ``(checkpoint_id, task_id, channel)`` of the pending writes of one
            namespace. A task that wrote ``__interrupt__`` and no regular write
            (nor ``__no_writes__``) is still waiting for its resume value.
    """
    interrupted: dict[str, set[str]] = {}
    finished: dict[str, set[str]] = {}
    for checkpoint_id, task_id, channel in writes:
        if channel == INTERRUPT:
            interrupted.setdefault(checkpoint_id, set()).add(task_id)
        elif channel not in _SPECIAL or channel == NO_WRITES:
            finished.setdefault(checkpoint_id, set()).add(task_id)
    return {
        cid for cid, tasks in interrupted.items() if tasks - finished.get(cid, set())
    }


BlobKey = tuple[str, str, str]
"""(checkpoint_ns, channel, version) of one stored channel value in a thread."""


def live_blob_keys(
    wanted: Iterable[BlobKey], base_of: Mapping[BlobKey, str | BlobKey | None]
) -> set[BlobKey]:
    """The stored values that kept checkpoints still read, the values they are
    read from included.

    Args:
        wanted: the (namespace, channel, version) each kept checkpoint names.
        base_of: every stored value of the thread -> the version of the same
            channel it is a delta on, or the key of another channel's value it
            is read from (the in-memory saver's ``member`` records); None for
            full and empty values.
    """
    live: set[BlobKey] = set()
    for key in wanted:
        current: BlobKey | None = key
        while current is not None and current in base_of and current not in live:
            live.add(current)
            base = base_of[current]
            if base is None or isinstance(base, tuple):
                current = base
            else:
                current = (current[0], current[1], base)
    return live


def reparent_survivors(
    parents: Mapping[str, str | None], dropped: Iterable[str]
) -> dict[str, str | None]:
    """New parents of the checkpoints that stay when ``dropped`` ones are deleted.

    Each kept checkpoint whose parent is dropped moves to its nearest kept
    ancestor (None when there is none), so the history stays a tree.

    Args:
        parents: checkpoint id -> parent id (None for roots), one namespace.
        dropped: the ids being deleted.
    """
    gone = set(dropped)
    moved: dict[str, str | None] = {}
    for cid, parent in parents.items():
        if cid in gone or parent not in gone:
            continue
        ancestor: str | None = parent
        seen: set[str] = set()
        while ancestor is not None and ancestor in gone and ancestor not in seen:
            seen.add(ancestor)
            ancestor = parents.get(ancestor)
        moved[cid] = None if ancestor in gone else ancestor
    return moved

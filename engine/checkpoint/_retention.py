"""Pure retention planning: which checkpoints ``prune(strategy="keep_latest")`` keeps.

Per namespace, it keeps every branch head (the latest checkpoint of each fork),
every fork point (a checkpoint with several children) and every checkpoint with
an open interrupt; kept checkpoints are re-parented to their nearest kept
ancestor, so the tree of branches can still be drawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ("plan_prune",)


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

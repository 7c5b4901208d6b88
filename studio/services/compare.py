"""Branch compare: two checkpoints' states side by side, the differences marked.

Either checkpoint can be on any branch of the thread (e.g. the heads of two
forks). Each state key is compared as plain data; a key that differs also gets
its reducer-aware changes with paths (``studio.presentation.diff``).
"""

from __future__ import annotations

from typing import Any

from studio.errors import InvalidInput
from studio.models import Thread
from studio.presentation.diff import MISSING, diff_values, plain, summarize
from studio.presenters import CompareRow, CompareView, present_changes, short_id
from studio.services import fork_tree
from studio.services.access import visible_thread
from studio.services.checkpoints import ThreadHistory

__all__ = ("compare",)


def compare(user: Any, thread_id: str, left: str, right: str) -> CompareView:
    """Two checkpoints' states side by side, differences marked key by key."""
    thread = visible_thread(user, thread_id)
    history = ThreadHistory(thread)
    if not left or not right:
        raise InvalidInput("Pick two checkpoints to compare (a and b).")
    a, b = history.saved(left), history.saved(right)
    va, vb = history.values(a), history.values(b)
    rows = []
    for key in history.state_keys:
        if key not in va and key not in vb:
            continue
        old, new = va.get(key, MISSING), vb.get(key, MISSING)
        same = key in va and key in vb and plain(old) == plain(new)
        changes = (
            ()
            if same
            else present_changes(
                diff_values(
                    key, _plain(old), _plain(new), history.kinds.get(key, "value")
                )
            )
        )
        rows.append(
            CompareRow(
                key=key,
                left=summarize(old),
                right=summarize(new),
                same=same,
                changes=changes,
            )
        )
    return CompareView(
        thread_id=thread.thread_id,
        left_id=left,
        right_id=right,
        left_step=int(a.metadata.get("step", -1)),
        right_step=int(b.metadata.get("step", -1)),
        rows=tuple(rows),
        choices=_choices(thread, history, (left, right)),
    )


def _plain(value: Any) -> Any:
    return value if value is MISSING else plain(value)


def _choices(
    thread: Thread, history: ThreadHistory, keep: tuple[str, str]
) -> tuple[tuple[str, str], ...]:
    """Branch heads and the newest checkpoints, to pick from."""
    found: dict[str, str] = {}
    tree = fork_tree.fork_tree(thread)
    stack = [tree] if tree is not None else []
    while stack:
        branch = stack.pop()
        found.setdefault(
            branch.head_id, f"{branch.label} head · step {branch.head_step}"
        )
        stack.extend(branch.children)
    for item in history.page(limit=10):
        checkpoint_id = str(item.config["configurable"]["checkpoint_id"])
        found.setdefault(
            checkpoint_id,
            f"step {item.metadata.get('step')} · {short_id(checkpoint_id)}",
        )
    for checkpoint_id in keep:
        found.setdefault(checkpoint_id, short_id(checkpoint_id))
    return tuple(found.items())

"""Compact checkpoint structures for the in-memory saver's wide checkpoints.

With a serializer that stores a checkpoint's structure as plain JSON anyway (the
default one), :class:`~engine.checkpoint.memory.InMemorySaver` keeps the structure
of a checkpoint of many channels and nodes as tuples instead of one JSON object:
immutable, so what a caller does to its checkpoint dict afterwards cannot reach
the stored copy (the guarantee serializing gives), and sharing what did not change
with the thread's previous checkpoint: the tuple of channel names, each node's
versions seen, the version strings themselves. A narrow structure (a few channels)
is kept as JSON bytes: one object beats the tuples there (see ``memory._NARROW``).

The loop's own saves (``InMemorySaver.put_loop_step``) come with a promise a
caller of ``put`` does not make: no dict of the checkpoint's ``versions_seen`` is
changed once handed over. Their structures (:func:`compact_loop_structure`) keep
those dicts as they are, under the layout key :data:`SEEN_AS_DICTS`; reading
copies them.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from itertools import compress
from operator import ne
from typing import Any

__all__ = ("compact_loop_structure", "compact_structure", "expand_structure")

_VERSION_TYPES = frozenset({str, int, float})
_STR = frozenset({str})
_SCALARS = frozenset({str, int, float, bool, type(None)})

# A structure is ``(keys, values)``: the checkpoint's keys in order and, per key,
# ``channel_versions`` as (names, versions), ``versions_seen`` as a tuple of (node,
# names, versions), ``updated_channels`` as a tuple (or None), the ``channel_values``
# that are None as the tuple of their names, any other key's scalar as is. A
# structure of another shape (a version that is not a str, int or float, a value
# that is not a scalar) is stored serialized instead (``compact_structure`` says None).


class _Seen:
    """What the next call for the same thread and namespace may share: the nodes
    of the last ``versions_seen`` in order and, per node, a copy of the versions
    it had seen (None when they were not all strings: ``1 == 1.0 == True`` makes
    equal versions of other types unsafe to share) and the entry stored for them.
    Updated in place by each call; a cache, never stale (an entry is replaced
    together with its copy)."""

    __slots__ = ("copies", "entries", "nodes")

    def __init__(self) -> None:
        self.nodes: tuple[str, ...] = ()
        self.copies: builtins.list[dict[str, Any] | None] = []
        self.entries: builtins.list[Any] = []


_NOT_STRUCTURE = frozenset({"channel_values", "channel_deltas"})
_SPECIAL = frozenset({"channel_versions", "versions_seen", "updated_channels"})

SEEN_AS_DICTS = "versions_seen*"
"""The layout key of a ``versions_seen`` kept as ``(nodes, dicts)``: the loop's own
node dicts, which it never changes (see :func:`compact_loop_structure`)."""

_LAYOUTS: dict[
    tuple[tuple[str, ...], bool, bool], tuple[tuple[str, ...], tuple[str, ...]]
] = {}
"""Per (checkpoint keys, has None values, loop's form): the stored keys and those
of them held as scalars. Checkpoints of a process have a handful of shapes; the
first call for a shape fills its entry, later ones share its tuples."""


def _layout(
    names: tuple[str, ...], nil: bool, loop: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    found = _LAYOUTS.get((names, nil, loop))
    if found is None:
        keys = tuple(
            SEEN_AS_DICTS if loop and k == "versions_seen" else k
            for k in names
            if k not in _NOT_STRUCTURE
        )
        if nil:
            keys += ("channel_values",)
        scalars = tuple(
            k
            for k in keys
            if k not in _SPECIAL and k != SEEN_AS_DICTS and k != "channel_values"
        )
        if len(_LAYOUTS) >= 64:  # a caller inventing keys: bounded anyway
            _LAYOUTS.clear()
        found = _LAYOUTS[(names, nil, loop)] = (keys, scalars)
    return found


def compact_structure(
    checkpoint: Mapping[str, Any], nil: tuple[str, ...], prev: Any
) -> tuple[Any, _Seen] | None:
    """``checkpoint``'s structure as tuples: its keys but ``channel_values`` and
    ``channel_deltas``, then the names of its None values (``nil``) when there
    are some, sharing parts equal to those of ``prev`` (what an earlier call
    returned); and what the next call needs to share with this one. None if the
    structure has another shape (see above)."""
    prev_compact, seen = prev if prev is not None else (None, _Seen())
    keys, scalars = _layout(tuple(checkpoint), bool(nil))
    if not set(map(type, map(checkpoint.__getitem__, scalars))) <= _SCALARS:
        return None
    parts: dict[str, Any] = {"channel_values": nil}
    if "channel_versions" in checkpoint:
        value = checkpoint["channel_versions"]
        if type(value) is not dict:
            return None
        names, versions = tuple(value), tuple(value.values())
        if not set(map(type, versions)) <= _VERSION_TYPES:
            return None
        if prev_compact is not None and prev_compact[0] is keys:
            old = prev_compact[1][keys.index("channel_versions")][0]
            if old == names:
                names = old
        parts["channel_versions"] = (names, versions)
    if "versions_seen" in checkpoint:
        entries = _seen_entries(checkpoint["versions_seen"], seen)
        if entries is None:
            return None
        parts["versions_seen"] = entries
    if "updated_channels" in checkpoint:
        value = checkpoint["updated_channels"]
        if value is not None:
            if type(value) is not list or not set(map(type, value)) <= _STR:
                return None
            value = tuple(value)
        parts["updated_channels"] = value
    merged = {**checkpoint, **parts}
    return (keys, tuple(map(merged.__getitem__, keys))), seen


def compact_loop_structure(
    checkpoint: Mapping[str, Any], nil: tuple[str, ...], prev: Any
) -> tuple[Any, _Seen] | None:
    """:func:`compact_structure` for a checkpoint the loop saves
    (``InMemorySaver.put_loop_step``). The loop makes every part of it and
    changes none once handed over: a node's dict in ``versions_seen`` is
    replaced when the node runs (``apply_writes``, interrupts), never changed,
    and versions are values it never changes either.

    So the node dicts are kept as they are, in the order of their nodes:
    unchanged ones are the same objects as in the thread's previous
    checkpoint, and nothing is compared, copied or checked item by item (what
    :func:`compact_structure` must do for a caller that may change its dicts
    later). The channel names and node names are shared with ``prev`` when
    equal; reading makes fresh dicts (``expand_structure``). None when the
    checkpoint is not shaped as the loop's (then ``compact_structure`` decides)."""
    prev_compact, seen = prev if prev is not None else (None, _Seen())
    by_version = checkpoint.get("channel_versions")
    by_node = checkpoint.get("versions_seen")
    updated = checkpoint.get("updated_channels")
    if (
        type(by_version) is not dict
        or type(by_node) is not dict
        or not (updated is None or type(updated) is list)
    ):
        return None
    keys = _layout(tuple(checkpoint), bool(nil), loop=True)[0]
    names, nodes = tuple(by_version), tuple(by_node)
    if prev_compact is not None and prev_compact[0] is keys:
        before = prev_compact[1]
        old = before[keys.index("channel_versions")][0]
        if old == names:
            names = old
        old = before[keys.index(SEEN_AS_DICTS)][0]
        if old == nodes:
            nodes = old
    parts: dict[str, Any] = {
        "channel_values": nil,
        "channel_versions": (names, tuple(by_version.values())),
        SEEN_AS_DICTS: (nodes, tuple(by_node.values())),
        "updated_channels": None if updated is None else tuple(updated),
    }
    merged = {**checkpoint, **parts}
    return (keys, tuple(map(merged.__getitem__, keys))), seen


def _seen_entries(value: Any, seen: _Seen) -> tuple[Any, ...] | None:
    """``versions_seen`` as a tuple of (node, names, versions), reusing the entry
    of each node whose versions did not change since the last call."""
    if type(value) is not dict:
        return None
    nodes = tuple(value)
    count = len(seen.nodes)
    if nodes == seen.nodes:
        # The usual step: the same nodes, one or two of which saw something new.
        # Comparing every node's versions with its copy runs in C (``map``).
        copies, entries = seen.copies, seen.entries
        changed: Iterable[int] = compress(
            range(len(nodes)), builtins.list(map(ne, copies, value.values()))
        )
    elif count and nodes[:count] == seen.nodes:
        # The same nodes and, after them, nodes that ran for the first time (a
        # chain's every step): the known ones compared in C as above.
        copies, entries = seen.copies, seen.entries
        added = len(nodes) - count
        copies += [None] * added
        entries += [None] * added
        seen.nodes = nodes
        changed = [
            *compress(range(count), builtins.list(map(ne, copies, value.values()))),
            *range(count, len(nodes)),
        ]
    else:  # another thread's order, or nodes added elsewhere than at the end
        known = dict(
            zip(seen.nodes, zip(seen.copies, seen.entries, strict=True), strict=True)
        )
        copies, entries, missing = [], [], []
        for at, (node, by) in enumerate(value.items()):
            copy, entry = known.get(node, (None, None))
            if copy is None or copy != by:
                copy = None
                missing.append(at)
            copies.append(copy)
            entries.append(entry)
        seen.nodes, seen.copies, seen.entries = nodes, copies, entries
        changed = missing
    by_node: builtins.list[Any] | None = None
    for at in changed:
        if by_node is None:
            by_node = builtins.list(value.values())
        by_channel = by_node[at]
        if type(by_channel) is not dict:
            return None
        versions = tuple(by_channel.values())
        kinds = set(map(type, versions))
        if not kinds <= _VERSION_TYPES:
            return None
        names = tuple(by_channel)
        before = entries[at]
        if before is not None and before[1] == names:
            names = before[1]  # one tuple of names for all the node's entries
        entries[at] = (nodes[at], names, versions)
        copies[at] = dict(by_channel) if kinds <= _STR else None
    return tuple(entries)


def expand_structure(compact: Any) -> dict[str, Any]:
    """The checkpoint structure (fresh dicts and lists) a compact one stands for."""
    keys, values = compact
    out: dict[str, Any] = {}
    for key, value in zip(keys, values, strict=True):
        if key == "channel_versions":
            out[key] = dict(zip(*value, strict=True))
        elif key == "versions_seen":
            out[key] = {
                node: dict(zip(names, versions, strict=True))
                for node, names, versions in value
            }
        elif key == SEEN_AS_DICTS:
            nodes, dicts = value
            out["versions_seen"] = {
                node: dict(by) for node, by in zip(nodes, dicts, strict=True)
            }
        elif key == "updated_channels":
            out[key] = None if value is None else builtins.list(value)
        elif key == "channel_values":
            out[key] = dict.fromkeys(value)
        else:
            out[key] = value
    return out

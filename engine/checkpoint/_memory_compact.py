"""Reading the compact checkpoint structures earlier in-memory savers kept.

Earlier versions of :class:`~engine.checkpoint.memory.InMemorySaver` kept a
checkpoint's structure as tuples (``("*mem", (keys, values))``) and a
``PersistentDict`` saved them so; they are still read. New checkpoints are kept as
plain JSON bytes instead, which measured both faster to build (one ``orjson`` call
instead of a tuple per part) and smaller (one object a checkpoint).

A structure is ``(keys, values)``: the checkpoint's keys in order and, per key,
``channel_versions`` as (names, versions), ``versions_seen`` as a tuple of (node,
names, versions), ``updated_channels`` as a tuple (or None), the ``channel_values``
that are None as the tuple of their names, any other key's scalar as is.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = ("expand_structure",)


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
        elif key == "updated_channels":
            out[key] = None if value is None else builtins.list(value)
        elif key == "channel_values":
            out[key] = dict.fromkeys(value)
        else:
            out[key] = value
    return out

"""A run's input kept once by the in-memory saver.

A run's input checkpoint (step -1) keeps the input dict as the value of the
``__start__`` channel, and the checkpoint after the first step (step 0) keeps
each input key's value again, in the state channel the first step wrote it to:
a large input (a document, a list of records) would be encoded and kept twice.
So when :class:`~engine.checkpoint.memory.InMemorySaver` stores an input
checkpoint (``metadata["source"] == "input"``), it remembers the large members
of the dicts it stored there (:func:`input_members`); when the next save of the
same thread and namespace is the run's own next step (``source`` ``"loop"``,
its parent that checkpoint), a value it stores that *is* one of them (the same
object) is kept as a ``member`` record instead (the channel, version and key to
read it from: see ``engine.checkpoint._blobs``). Any save forgets what was
remembered; an update or a fork never shares.

Between those two saves only the engine runs: the first step maps the input to
the state's channels (a channel's reducer gets the input value as its update;
a reducer that changed its update in place would make the two differ, which no
reducer LangGraph ships does). The node code a later step runs never sits
between an input checkpoint and the save that shares its members.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from engine.checkpoint._blobs import BlobRecord, member_record

__all__ = ("InputMembers", "input_members", "shared_member")

MIN_ITEMS = 64
"""A list or dict member is shared from this many items on."""

MIN_CHARS = 4096
"""A str member is shared from this many characters on."""


class InputMembers(NamedTuple):
    """The large members of an input checkpoint's stored dicts."""

    checkpoint_id: str
    by_id: dict[int, tuple[Any, str, str, str]]
    """``id(member)`` -> (the member, channel, version, key); the member is held
    so that its id cannot be reused while this is remembered."""


def _large(value: Any) -> bool:
    kind = type(value)
    if kind is list or kind is dict:
        return len(value) >= MIN_ITEMS
    return kind is str and len(value) >= MIN_CHARS


def input_members(
    checkpoint_id: str, stored: Iterable[tuple[str, str, Any]]
) -> InputMembers | None:
    """What to remember of an input checkpoint whose ``stored`` values are
    ``(channel, version, value)``: the large members, under a ``str`` key, of
    those that are dicts. None when there are none."""
    by_id: dict[int, tuple[Any, str, str, str]] = {}
    for channel, version, value in stored:
        if type(value) is not dict:
            continue
        for key, member in value.items():
            if type(key) is str and _large(member):
                by_id.setdefault(id(member), (member, channel, version, key))
    return InputMembers(checkpoint_id, by_id) if by_id else None


def shared_member(members: InputMembers, value: Any) -> BlobRecord | None:
    """The ``member`` record standing for ``value`` when it is one of ``members``."""
    found = members.by_id.get(id(value))
    if found is None or found[0] is not value:
        return None
    _, channel, version, key = found
    return member_record(channel, version, key)

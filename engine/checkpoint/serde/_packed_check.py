"""Is a large value plain JSON? Asked of a MessagePack encoder written in native code.

``ormsgpack`` (when installed) packs a value in one native pass, and with its
pass-through options it packs only exact ``dict`` (``str`` keys), ``list``,
``str``, ``int`` (64 bits), ``float``, ``bool`` and None by itself: every other
type (tuples, subclasses, enums, UUIDs, datetimes, dataclasses, ints beyond 64
bits, anything else) goes to ``default``, which refuses it. That is the walk's
notion of plain (``jsonplus._Encoder``) but for three things MessagePack holds
and JSON does not, or holds differently:

- non-finite floats (the walk tags NaN and infinities): they are packed as
  ``0xcb`` then 8 bytes whose first is ``7f`` or ``ff`` (and the second
  ``f0``-``ff``); the byte after each ``0xcb`` in the packed bytes is looked at
  (found by ``memchr``; past ``_MARKERS_LOOKED_AT`` of them, two scans for
  ``cb 7f`` and ``cb ff`` instead),
- the tag as a key: its packed form (``a3 5f 5f 74``) is searched for the
  same way (each ``a3``, then past ``_MARKERS_LOOKED_AT`` one scan): a scan
  for a needle of a few bytes runs at a fraction of ``memchr``'s speed,

and when either is found (also by chance, inside other bytes) the answer is
None: the level-at-a-time check (``_plain_tree.is_plain_tree``) decides. The
third, bytes-like values and ``ormsgpack.Ext`` (packed as themselves), is left
to the caller: JSON writing refuses them, and the serializer then encodes the
value again without this check (``JsonPlusSerializer._encoded``). A yes here is
therefore "plain, or holds a value JSON writing refuses", never a wrong store.

Roughly three times faster than the level check on records (0.44 against
1.25 ms for 5,000). Without ``ormsgpack`` the answer is always None.
"""

from __future__ import annotations

from typing import Any

__all__ = ("AVAILABLE", "PACK_ITEMS", "packs_plain")


def _load_ormsgpack() -> Any:
    """The module, or None: a declared dependency, but the serializer stays
    exact without it (the level check answers alone)."""
    try:
        import ormsgpack  # noqa: PLC0415 - optional at run time
    except ImportError:  # pragma: no cover
        return None
    return ormsgpack


ormsgpack: Any = _load_ormsgpack()

AVAILABLE = ormsgpack is not None

_OPTIONS = (
    0
    if ormsgpack is None
    else (
        ormsgpack.OPT_PASSTHROUGH_BIG_INT
        | ormsgpack.OPT_PASSTHROUGH_DATACLASS
        | ormsgpack.OPT_PASSTHROUGH_DATETIME
        | ormsgpack.OPT_PASSTHROUGH_ENUM
        | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
        | ormsgpack.OPT_PASSTHROUGH_TUPLE
        | ormsgpack.OPT_PASSTHROUGH_UUID
    )
)

_FLOAT64 = b"\xcb"
_NON_FINITE_FIRST = frozenset({0x7F, 0xFF})
_NON_FINITE = (b"\xcb\x7f", b"\xcb\xff")
"""A float64's marker then the first byte of a NaN or an infinity (see above)."""
_MARKERS_LOOKED_AT = 64
"""Marker bytes looked at one by one before scanning for the whole needles."""

_tag_markers: dict[str, bytes] = {}


def _refuse(obj: Any) -> Any:
    raise TypeError


def packs_plain(root: dict[Any, Any] | list[Any], tag: str) -> bool | None:
    """True: ``root`` is plain JSON but perhaps for a bytes-like value (see the
    module's text); False: it is not; None: this check cannot tell.

    A long list is packed ``PACK_ITEMS`` items at a time: the packed bytes,
    thrown away, never hold more than a slice of it."""
    if ormsgpack is None:
        return None
    marker = _tag_markers.get(tag)
    if marker is None:
        marker = _tag_markers.setdefault(tag, ormsgpack.packb(tag))
    if type(root) is not list or len(root) <= PACK_ITEMS:
        return _part_is_plain(root, marker)
    for start in range(0, len(root), PACK_ITEMS):
        verdict = _part_is_plain(root[start : start + PACK_ITEMS], marker)
        if verdict is not True:
            return verdict
    return True


PACK_ITEMS = 128
"""Items of a long list packed at a time by ``packs_plain``; the JSON write then
writes as many at a time (``jsonplus.CHUNK_ITEMS`` is this value), so the check
never holds more bytes at once than the write does (as fast as larger slices)."""


def _part_is_plain(part: Any, marker: bytes) -> bool | None:
    assert ormsgpack is not None
    try:
        packed = ormsgpack.packb(part, default=_refuse, option=_OPTIONS)
    except (TypeError, ValueError):  # ormsgpack.MsgpackEncodeError is a TypeError
        return False
    if _may_hold_tag(packed, marker) or _may_hold_non_finite(packed):
        return None
    return True


def _may_hold_tag(packed: bytes, marker: bytes) -> bool:
    """Whether ``packed`` holds ``marker`` (the tag's packed form)."""
    find, first = packed.find, marker[:1]
    at = find(first)
    for _ in range(_MARKERS_LOOKED_AT):
        if at < 0:
            return False
        if packed.startswith(marker, at):
            return True
        at = find(first, at + 1)
    return marker in packed


def _may_hold_non_finite(packed: bytes) -> bool:
    """Whether some ``0xcb`` in ``packed`` is followed by ``7f`` or ``ff``."""
    find = packed.find
    at = find(_FLOAT64)
    for _ in range(_MARKERS_LOOKED_AT):
        if at < 0:
            return False
        if packed[at + 1] in _NON_FINITE_FIRST:  # 0xcb is never the last byte
            return True
        at = find(_FLOAT64, at + 1)
    return _NON_FINITE[0] in packed or _NON_FINITE[1] in packed

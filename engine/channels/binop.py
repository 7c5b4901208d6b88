"""BinaryOperatorAggregate: a channel whose writes are folded in by a reducer."""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Sequence
from typing import Any, Generic, NotRequired, Required, Self, get_args, get_origin

from engine._internal._typing import MISSING
from engine.channels._value_slot import ValueSlot
from engine.channels.base import Value
from engine.errors import (
    ErrorCode,
    InvalidUpdateError,
    error_message,
)
from engine.types import Overwrite

__all__ = ("BinaryOperatorAggregate",)

_OVERWRITE_KEY = "__overwrite__"


def _strip_extras(typ: Any) -> Any:
    """Annotated/Required/NotRequired wrappers off, abstract collections to concrete."""
    while get_origin(typ) in (Required, NotRequired) or hasattr(typ, "__metadata__"):
        args = get_args(typ)
        if not args:
            break
        typ = args[0]
    origin = get_origin(typ)
    if origin is not None:
        typ = origin
    if typ in (collections.abc.Sequence, collections.abc.MutableSequence):
        return list
    if typ in (collections.abc.Set, collections.abc.MutableSet):
        return set
    if typ in (collections.abc.Mapping, collections.abc.MutableMapping):
        return dict
    return typ


def _overwrite_value(value: Any) -> Any:
    """The replacement value when ``value`` asks to bypass the reducer, else MISSING."""
    if isinstance(value, Overwrite):
        return value.value
    if type(value) is dict:
        if len(value) == 1 and _OVERWRITE_KEY in value:
            return value[_OVERWRITE_KEY]
        if value.get("type") == _OVERWRITE_KEY and "value" in value:
            return value["value"]  # an Overwrite that went through plain JSON
    return MISSING


class BinaryOperatorAggregate(Generic[Value], ValueSlot[Value, Value, Value]):
    """Folds each write into the current value: ``value = operator(value, write)``.

    Starts from ``typ()`` when the type can be built without arguments (``list``
    gives ``[]``). An ``Overwrite(value)`` write replaces the value instead.

    Records ``append_base``: when the last update only appended to a list, the
    length of the list before it, which lets savers store the step as a delta.
    """

    __slots__ = ("append_base", "operator", "value")

    def __init__(
        self, typ: Any, operator: Callable[[Value, Value], Value], key: str = ""
    ) -> None:
        super().__init__(typ, key)
        self.operator = operator
        self.append_base: int | None = None
        concrete = _strip_extras(typ)
        self.typ = concrete
        try:
            self.value: Any = concrete()
        except Exception:
            self.value = MISSING

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BinaryOperatorAggregate):
            return False
        same_op = other.operator is self.operator or (
            getattr(other.operator, "__name__", None)
            == getattr(self.operator, "__name__", "")
            and getattr(other.operator, "__name__", None) != "<lambda>"
        )
        return same_op

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Self:
        new = self.__class__.__new__(self.__class__)
        new.typ = self.typ
        new.key = self.key
        new.operator = self.operator
        new.append_base = None
        new.value = self.value
        return new

    def from_checkpoint(self, checkpoint: Any) -> Self:
        new = self.copy()
        if checkpoint is not MISSING:
            new.value = checkpoint
        else:
            try:
                new.value = self.typ()
            except Exception:
                new.value = MISSING
        return new

    def update(self, values: Sequence[Value]) -> bool:
        if not values:
            return False
        old = self.value
        overwritten = False
        value = old
        if value is MISSING:
            first = values[0]
            replacement = _overwrite_value(first)
            value = first if replacement is MISSING else replacement
            overwritten = replacement is not MISSING
            values = values[1:]
        for write in values:
            replacement = _overwrite_value(write)
            if replacement is not MISSING:
                if overwritten:
                    raise InvalidUpdateError(
                        error_message(
                            f"At key {self.key!r}: received more than one Overwrite "
                            "in the same step.",
                            ErrorCode.INVALID_CONCURRENT_GRAPH_UPDATE,
                        )
                    )
                overwritten = True
                value = replacement
            elif not overwritten:
                value = self.operator(value, write)
        self.value = value
        self.append_base = _append_base(old, value)
        return True


def _append_base(old: Any, new: Any) -> int | None:
    """len(old) when ``new`` is ``old`` with items appended (both lists), else None."""
    if type(old) is not list or type(new) is not list or old is new:
        return None
    base = len(old)
    if len(new) < base or (base and new[:base] != old):
        return None
    return base

"""Managed values: state keys the runtime computes for each task instead of storing.

A managed value is a :class:`ManagedValue` subclass named in a state schema with
``Annotated[T, SomeManagedValue]``. It gets no channel, is never checkpointed and
is not part of the output: each time a node reads the state, the runtime calls
``SomeManagedValue.get(scope)`` and puts the result under that key. A node's
write to it is ignored, as in LangGraph.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from inspect import isclass
from typing import Any, Generic, NamedTuple, TypeGuard, TypeVar

__all__ = (
    "ManagedScope",
    "ManagedValue",
    "ManagedValueMapping",
    "ManagedValueSpec",
    "is_managed_value",
)

V = TypeVar("V")


class ManagedScope(NamedTuple):
    """Where the run stands when a task reads its input."""

    step: int
    """The super-step the task runs in."""
    stop: int
    """Where the run's recursion limit ends it: ``stop - step`` steps remain,
    this one included, and ``stop - 1`` is the last step it may run."""


class ManagedValue(ABC, Generic[V]):
    """Computes one state key's value for a task; subclass and implement ``get``."""

    @staticmethod
    @abstractmethod
    def get(scratchpad: ManagedScope) -> V:
        """The value a task running at ``scratchpad.step`` reads."""


ManagedValueSpec = type[ManagedValue[Any]]
"""A managed value as a schema names it: the class itself."""

ManagedValueMapping = dict[str, ManagedValueSpec]
"""State key -> managed value."""


def is_managed_value(value: Any) -> TypeGuard[ManagedValueSpec]:
    """Whether ``value`` (an ``Annotated`` metadata item) is a managed value class."""
    return isclass(value) and issubclass(value, ManagedValue)

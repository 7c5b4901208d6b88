"""``IsLastStep`` and ``RemainingSteps``: how close the run is to its recursion limit.

Annotate a state key with one of them and every node that reads the state sees
the current value; the run never stores it. An agent loop uses them to stop
cleanly (answer, summarize) before ``GraphRecursionError``::

    class State(TypedDict):
        messages: Annotated[list, add_messages]
        remaining_steps: RemainingSteps
"""

from __future__ import annotations

from typing import Annotated

from engine.managed.base import ManagedScope, ManagedValue

__all__ = ("IsLastStep", "IsLastStepManager", "RemainingSteps", "RemainingStepsManager")


class IsLastStepManager(ManagedValue[bool]):
    """True in the last step the recursion limit allows."""

    @staticmethod
    def get(scratchpad: ManagedScope) -> bool:
        return scratchpad.step == scratchpad.stop - 1


class RemainingStepsManager(ManagedValue[int]):
    """Steps left before the recursion limit: 1 in the last allowed step."""

    @staticmethod
    def get(scratchpad: ManagedScope) -> int:
        return scratchpad.stop - scratchpad.step


IsLastStep = Annotated[bool, IsLastStepManager]
"""A ``bool`` state key: True when this step is the last one the limit allows."""

RemainingSteps = Annotated[int, RemainingStepsManager]
"""An ``int`` state key: how many steps the run may still take, this one included."""

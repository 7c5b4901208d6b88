"""Channels: named slots of graph state, each with its own rule for merging writes."""

from __future__ import annotations

from engine.channels.any_value import AnyValue
from engine.channels.base import BaseChannel
from engine.channels.binop import BinaryOperatorAggregate
from engine.channels.delta import DeltaChannel
from engine.channels.ephemeral_value import EphemeralValue
from engine.channels.last_value import LastValue, LastValueAfterFinish
from engine.channels.named_barrier_value import (
    NamedBarrierValue,
    NamedBarrierValueAfterFinish,
)
from engine.channels.topic import Topic
from engine.channels.untracked_value import UntrackedValue

__all__ = (
    "AnyValue",
    "BaseChannel",
    "BinaryOperatorAggregate",
    "DeltaChannel",
    "EphemeralValue",
    "LastValue",
    "LastValueAfterFinish",
    "NamedBarrierValue",
    "NamedBarrierValueAfterFinish",
    "Topic",
    "UntrackedValue",
)

"""Module paths tools written for LangGraph import: ids, serde types, constants.

``langgraph.checkpoint.base`` is a package in LangGraph (its ``id`` module makes
UUIDv6 ids) and so is ``engine.checkpoint.base``; ``langgraph.checkpoint.serde.types``
holds the reserved write keys and the channel and ``Send`` protocols.
"""

from __future__ import annotations

import uuid

import pytest

import engine.checkpoint.base as base
from engine._internal._ids import new_checkpoint_id
from engine.channels import LastValue
from engine.checkpoint.base.id import UUID, uuid6
from engine.checkpoint.serde.types import (
    ERROR,
    INTERRUPT,
    RESUME,
    SCHEDULED,
    TASKS,
    ChannelProtocol,
    SendProtocol,
)
from engine.constants import CONF, CONFIG_KEY_CHECKPOINTER
from engine.constants import TASKS as PUBLIC_TASKS
from engine.types import Send


def test_uuid6_ids_sort_by_creation_time_as_text() -> None:
    ids = [str(uuid6(clock_seq=step)) for step in range(50)]

    assert ids == sorted(ids)
    assert len(set(ids)) == 50


def test_uuid6_is_version_6_with_the_given_clock_seq_and_node() -> None:
    made = uuid6(node=0xABCDEF, clock_seq=5)

    assert isinstance(made, UUID)
    assert isinstance(made, uuid.UUID)
    assert made.version == 6
    assert made.variant == uuid.RFC_4122
    assert made.clock_seq == 5
    assert made.node == 0xABCDEF


def test_uuid6_clock_seq_minus_one_still_sorts_before_a_later_id() -> None:
    # LangGraph's savers' tests make "-1" ids this way
    first = uuid6(clock_seq=-1)

    assert str(first) < str(uuid6())


def test_uuid6_time_reads_the_version_6_timestamp() -> None:
    earlier, later = uuid6(), uuid6()

    assert later.time > earlier.time
    parsed = UUID(str(later))
    assert parsed.time == later.time


def test_checkpoint_ids_the_engine_makes_are_uuid6_too() -> None:
    made = UUID(new_checkpoint_id(step=3))

    assert made.version == 6
    assert made.clock_seq == 3


@pytest.mark.parametrize("name", sorted(base.__all__))
def test_the_checkpoint_base_package_keeps_every_name(name: str) -> None:
    assert getattr(base, name) is not None


def test_serde_types_hold_langgraphs_reserved_keys() -> None:
    assert (ERROR, INTERRUPT, RESUME, SCHEDULED, TASKS) == (
        "__error__",
        "__interrupt__",
        "__resume__",
        "__scheduled__",
        "__pregel_tasks",
    )
    assert TASKS == PUBLIC_TASKS
    assert (CONF, CONFIG_KEY_CHECKPOINTER) == ("configurable", "__pregel_checkpointer")


def test_a_send_satisfies_the_send_protocol() -> None:
    assert isinstance(Send("node", {"x": 1}), SendProtocol)
    assert not isinstance("node", SendProtocol)


def test_a_channel_has_what_the_channel_protocol_names() -> None:
    channel = LastValue(int, key="x")
    for name in ChannelProtocol.__protocol_attrs__:  # type: ignore[attr-defined]
        assert hasattr(channel, name), name

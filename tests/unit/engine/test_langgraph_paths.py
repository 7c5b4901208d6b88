"""Module paths tools written for LangGraph import: ids, serde types, constants.

``langgraph.checkpoint.base`` is a package in LangGraph (its ``id`` module makes
UUIDv6 ids) and so is ``engine.checkpoint.base``; ``langgraph.checkpoint.serde.types``
holds the reserved write keys and the channel and ``Send`` protocols.
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

import engine.checkpoint.base as base
from engine._internal import _ids
from engine._internal._ids import new_checkpoint_id, utc_now_iso
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


@pytest.mark.parametrize("step", [-1, 0, 7, 0x3FFF, 0x4001])
def test_checkpoint_ids_are_written_as_uuid_writes_them(step: int) -> None:
    made = new_checkpoint_id(step)

    parsed = UUID(made)
    assert str(parsed) == made
    assert (parsed.version, parsed.variant) == (6, uuid.RFC_4122)
    assert parsed.clock_seq == step & 0x3FFF
    assert uuid6().time > parsed.time  # one clock for both kinds of id


def test_checkpoint_ids_read_the_clock_they_were_made_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each id carries its own 100 ns tick, across the ~0.4 ms boundaries where
    its first two fields (formatted once for all the ids between them) change,
    and a tick that repeats is bumped; the node is the process's."""
    start = 1_796_400_000_000_000_000  # ns
    feed = [start, start + 100, start + 409_500, start + 409_600, start + 409_600]
    monkeypatch.setattr(_ids, "_last_ts", 0)
    monkeypatch.setattr(_ids, "_head", (-1, ""))
    monkeypatch.setattr(time, "time_ns", lambda: feed.pop(0))
    made = [UUID(new_checkpoint_id(step)) for step in range(5)]
    ticks = [n // 100 + 0x01B21DD213814000 for n in (start, start + 100)]
    ticks += [t // 100 + 0x01B21DD213814000 for t in (start + 409_500,)]
    ticks += [(start + 409_600) // 100 + 0x01B21DD213814000]
    ticks += [ticks[-1] + 1]  # the same tick again: bumped
    assert [m.time for m in made] == ticks
    assert [m.clock_seq for m in made] == list(range(5))
    assert len({m.node for m in made}) == 1


def test_a_checkpoints_stamp_reads_the_clock_once() -> None:
    """The id and the creation time a checkpoint gets together are the same
    instant: the time is the id's timestamp, to the microsecond."""
    for step in (0, 7):
        made, ts = _ids.new_checkpoint_stamp(step)
        parsed = UUID(made)
        assert (parsed.version, parsed.clock_seq) == (6, step)
        since_1582 = timedelta(microseconds=parsed.time // 10)
        assert datetime(1582, 10, 15, tzinfo=UTC) + since_1582 == (
            datetime.fromisoformat(ts)
        )


# The child only writes to a pipe and leaves: no lock of another thread matters.
@pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)
def test_a_forked_child_draws_its_own_node() -> None:
    parent = UUID(new_checkpoint_id()).node
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its node and leave at once
        os.write(writer, str(UUID(new_checkpoint_id()).node).encode())
        os._exit(0)
    os.close(writer)
    child = int(os.read(reader, 64))
    os.waitpid(pid, 0)
    os.close(reader)
    assert child != parent
    assert UUID(new_checkpoint_id()).node == parent


def test_timestamps_read_as_datetimes_write_them(monkeypatch: pytest.MonkeyPatch):
    """``ts`` as ``datetime.now(UTC).isoformat()`` writes it: microseconds when
    there are some, none on a whole second; the same second's text is reused
    and the next second's made anew."""
    for at in (
        1_796_400_000_000_000_000,  # a whole second
        1_796_400_000_000_001_999,  # 1 µs after it (ns below a µs dropped)
        1_796_400_000_999_999_000,
        1_796_400_001_250_000_000,  # the next second
        1_796_400_001_000_000_000,
    ):
        monkeypatch.setattr(time, "time_ns", lambda at=at: at)
        written = utc_now_iso()
        expected = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=at // 1000)
        assert written == expected.isoformat()
        assert datetime.fromisoformat(written) == expected


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

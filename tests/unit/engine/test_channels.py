"""Channels: each one's merge rule, its checkpoint round trip and copy independence.

Expected values were checked against ``langgraph.channels`` 1.2 (same scenario, same
results), except where the engine is deliberately stricter: a failed update leaves
a ``BinaryOperatorAggregate`` untouched (LangGraph keeps half of it).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest

from engine.channels import (
    BaseChannel,
    BinaryOperatorAggregate,
    EphemeralValue,
    LastValue,
    LastValueAfterFinish,
    NamedBarrierValue,
    NamedBarrierValueAfterFinish,
    Topic,
)
from engine.errors import EmptyChannelError, InvalidUpdateError
from engine.types import Overwrite


def value_of(channel: BaseChannel[Any, Any, Any]) -> Any:
    try:
        return channel.get()
    except EmptyChannelError:
        return "<empty>"


def round_trip(channel: BaseChannel[Any, Any, Any]) -> BaseChannel[Any, Any, Any]:
    return channel.from_checkpoint(channel.checkpoint())


# -- LastValue -------------------------------------------------------------------


def test_last_value_empty_until_written() -> None:
    channel = LastValue(int, key="x")

    assert not channel.is_available()
    with pytest.raises(EmptyChannelError):
        channel.get()
    assert channel.update([]) is False
    assert channel.update([1]) is True
    assert channel.get() == 1
    assert channel.update([2]) is True
    assert channel.get() == 2


def test_last_value_two_writes_in_one_step_raise_naming_the_key() -> None:
    channel = LastValue(int, key="x")
    channel.update([1])

    with pytest.raises(InvalidUpdateError, match="At key 'x'") as info:
        channel.update([2, 3])

    assert "INVALID_CONCURRENT_GRAPH_UPDATE" in str(info.value)
    assert channel.get() == 1


def test_last_value_never_consumes_or_finishes() -> None:
    channel = LastValue(int)
    channel.update([1])

    assert channel.consume() is False
    assert channel.finish() is False
    assert channel.get() == 1


def test_last_value_checkpoint_round_trip() -> None:
    channel = LastValue(int, key="x")
    assert not round_trip(channel).is_available()

    channel.update([{"nested": [1, 2]}])
    restored = round_trip(channel)

    assert restored.get() == {"nested": [1, 2]}
    assert restored.key == "x"
    assert type(restored) is LastValue


def test_last_value_copy_is_independent() -> None:
    channel = LastValue(int)
    channel.update([1])
    clone = channel.copy()

    clone.update([2])

    assert channel.get() == 1
    assert clone.get() == 2


# -- EphemeralValue ----------------------------------------------------------------


def test_ephemeral_value_lives_for_one_step() -> None:
    channel = EphemeralValue(int)

    assert channel.update([1]) is True
    assert channel.get() == 1
    assert channel.update([]) is True  # the next step clears it
    assert value_of(channel) == "<empty>"
    assert channel.update([]) is False  # already empty: nothing changed


def test_ephemeral_value_guard_refuses_two_writes() -> None:
    with pytest.raises(InvalidUpdateError, match="'go'"):
        EphemeralValue(int, key="go").update([1, 2])


def test_ephemeral_value_unguarded_keeps_the_last_write() -> None:
    channel = EphemeralValue(int, guard=False)

    assert channel.update([1, 2]) is True
    assert channel.get() == 2


def test_ephemeral_value_declares_it_clears_when_idle() -> None:
    assert EphemeralValue(int).clears_when_idle is True
    assert LastValue(int).clears_when_idle is False


def test_ephemeral_value_checkpoint_round_trip_and_copy() -> None:
    channel = EphemeralValue(int, guard=False, key="e")
    channel.update([5])

    restored = round_trip(channel)
    clone = channel.copy()
    clone.update([])

    assert restored.get() == 5
    assert restored.guard is False
    assert channel.get() == 5
    assert value_of(clone) == "<empty>"


# -- Topic -------------------------------------------------------------------------


def test_topic_flattens_lists_and_forgets_last_step() -> None:
    channel = Topic(int)

    assert channel.update([1, [2, 3]]) is True
    assert channel.get() == [1, 2, 3]
    assert channel.update([4]) is True
    assert channel.get() == [4]
    assert channel.update([]) is True
    assert value_of(channel) == "<empty>"
    assert channel.update([]) is False


def test_topic_accumulate_keeps_values_across_steps() -> None:
    channel = Topic(int, accumulate=True)

    assert channel.update([1]) is True
    assert channel.update([2, 3]) is True
    assert channel.update([]) is False
    assert channel.get() == [1, 2, 3]
    assert channel.clears_when_idle is False
    assert Topic(int).clears_when_idle is True


def test_topic_get_returns_a_copy() -> None:
    channel = Topic(int, accumulate=True)
    channel.update([1])

    channel.get().append(99)  # type: ignore[attr-defined]

    assert channel.get() == [1]


def test_topic_checkpoint_round_trip_and_copy() -> None:
    channel = Topic(int, accumulate=True, key="t")
    assert not round_trip(channel).is_available()
    channel.update([1, 2])

    restored = round_trip(channel)
    clone = channel.copy()
    clone.update([3])

    assert restored.get() == [1, 2]
    assert restored.accumulate is True
    assert channel.get() == [1, 2]
    assert clone.get() == [1, 2, 3]


def test_topic_update_does_not_mutate_a_saved_checkpoint() -> None:
    channel = Topic(int, accumulate=True)
    channel.update([1])
    saved = channel.checkpoint()

    channel.update([2])

    assert saved == [1]


# -- NamedBarrierValue ---------------------------------------------------------------


def test_named_barrier_value_opens_when_every_source_wrote() -> None:
    channel = NamedBarrierValue(str, {"a", "b"})

    assert channel.update(["a"]) is True
    assert not channel.is_available()
    assert channel.update(["a"]) is False  # already seen
    assert channel.update(["b"]) is True
    assert channel.is_available()
    assert channel.get() is None


def test_named_barrier_value_is_consumed_by_the_task_it_triggers() -> None:
    channel = NamedBarrierValue(str, {"a", "b"})
    channel.update(["a", "b"])

    assert channel.consume() is True
    assert not channel.is_available()
    assert channel.consume() is False


def test_named_barrier_value_refuses_a_stranger() -> None:
    with pytest.raises(InvalidUpdateError, match="'zz'"):
        NamedBarrierValue(str, {"a", "b"}, key="join").update(["zz"])


def test_named_barrier_value_checkpoint_round_trip_and_copy() -> None:
    channel = NamedBarrierValue(str, {"a", "b"})
    assert not round_trip(channel).is_available()
    channel.update(["a"])

    restored = round_trip(channel)
    clone = channel.copy()
    clone.update(["b"])

    assert not restored.is_available()
    restored.update(["b"])
    assert restored.is_available()
    assert clone.is_available()
    assert not channel.is_available()


def test_named_barrier_value_after_finish_opens_only_after_finish() -> None:
    channel = NamedBarrierValueAfterFinish(str, {"a", "b"})

    assert channel.update(["a", "b"]) is True
    assert not channel.is_available()
    assert channel.consume() is False
    assert channel.finish() is True
    assert channel.is_available()
    assert channel.get() is None
    assert channel.finish() is False
    assert channel.consume() is True
    assert not channel.is_available()


def test_named_barrier_value_after_finish_round_trip_keeps_finished() -> None:
    channel = NamedBarrierValueAfterFinish(str, {"a"})
    channel.update(["a"])
    channel.finish()

    restored = round_trip(channel)

    assert restored.is_available()


def test_named_barrier_value_after_finish_does_not_finish_half_open() -> None:
    channel = NamedBarrierValueAfterFinish(str, {"a", "b"})
    channel.update(["a"])

    assert channel.finish() is False
    assert not channel.is_available()


# -- LastValueAfterFinish -------------------------------------------------------------


def test_last_value_after_finish_hidden_until_finish_then_consumed() -> None:
    channel = LastValueAfterFinish(int)

    assert channel.update([1]) is True
    assert not channel.is_available()
    assert value_of(channel) == "<empty>"
    assert channel.consume() is False
    assert channel.finish() is True
    assert channel.get() == 1
    assert channel.consume() is True
    assert value_of(channel) == "<empty>"
    assert channel.finish() is False


def test_last_value_after_finish_keeps_the_last_of_several_writes() -> None:
    channel = LastValueAfterFinish(int)

    assert channel.update([1, 2]) is True
    channel.finish()

    assert channel.get() == 2


def test_last_value_after_finish_round_trip() -> None:
    channel = LastValueAfterFinish(int)
    assert not round_trip(channel).is_available()
    channel.update([3])

    pending = round_trip(channel)
    channel.finish()
    finished = round_trip(channel)

    assert not pending.is_available()
    assert pending.finish() is True
    assert pending.get() == 3
    assert finished.get() == 3


# -- BinaryOperatorAggregate --------------------------------------------------------


def test_binop_starts_from_the_type_default_and_folds_writes() -> None:
    total = BinaryOperatorAggregate(int, operator.add)
    items = BinaryOperatorAggregate(list, operator.add)

    assert total.get() == 0
    assert items.get() == []
    assert total.update([1, 2]) is True
    assert items.update([[1], [2]]) is True
    assert total.get() == 3
    assert items.get() == [1, 2]
    assert total.update([]) is False


def test_binop_understands_annotated_and_abstract_types() -> None:
    from collections.abc import Sequence  # noqa: PLC0415 - local to this test

    channel = BinaryOperatorAggregate(Annotated[Sequence[int], "meta"], operator.add)

    assert channel.get() == []


def test_binop_without_a_default_takes_the_first_write() -> None:
    class NoDefault:
        def __init__(self, value: int) -> None:
            self.value = value

    channel = BinaryOperatorAggregate(
        NoDefault, lambda a, b: NoDefault(a.value + b.value)
    )

    assert not channel.is_available()
    channel.update([NoDefault(1), NoDefault(2)])
    assert channel.get().value == 3


@pytest.mark.parametrize(
    "overwrite", [Overwrite([9]), {"__overwrite__": [9]}], ids=["class", "dict"]
)
def test_binop_overwrite_bypasses_the_reducer(overwrite: Any) -> None:
    channel = BinaryOperatorAggregate(list, operator.add)
    channel.update([[1], [2]])

    assert channel.update([overwrite]) is True
    assert channel.get() == [9]


def test_binop_writes_after_an_overwrite_in_the_same_step_are_ignored() -> None:
    channel = BinaryOperatorAggregate(list, operator.add)
    channel.update([[0]])

    channel.update([[1], Overwrite([7]), [8]])

    assert channel.get() == [7]


def test_binop_two_overwrites_raise_and_change_nothing() -> None:
    channel = BinaryOperatorAggregate(list, operator.add, key="items")
    channel.update([[1]])

    with pytest.raises(InvalidUpdateError, match="'items'"):
        channel.update([Overwrite([2]), Overwrite([3])])

    assert channel.get() == [1]


def test_binop_checkpoint_round_trip() -> None:
    channel = BinaryOperatorAggregate(list, operator.add, key="items")
    channel.update([[1, 2]])

    restored = round_trip(channel)
    empty = channel.from_checkpoint(LastValue(int).checkpoint())  # MISSING

    assert restored.get() == [1, 2]
    assert restored.operator is operator.add
    assert empty.get() == []


def test_binop_copy_is_independent() -> None:
    channel = BinaryOperatorAggregate(list, operator.add)
    channel.update([[1]])
    clone = channel.copy()

    clone.update([[2]])

    assert channel.get() == [1]
    assert clone.get() == [1, 2]

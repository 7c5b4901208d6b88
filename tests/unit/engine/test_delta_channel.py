"""DeltaChannel, UntrackedValue and the delta-history walk, on their own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest

from engine._internal._typing import MISSING
from engine.channels import DeltaChannel, UntrackedValue
from engine.checkpoint._delta_history import DeltaNode, DeltaWalk
from engine.errors import EmptyChannelError, InvalidUpdateError
from engine.graph import StateGraph
from engine.types import Overwrite


def extend(state: list[Any], writes: Sequence[Any]) -> list[Any]:
    return [*state, *writes]


def test_a_step_reaches_the_reducer_as_one_batch() -> None:
    calls: list[list[Any]] = []

    def reducer(state: list[Any], writes: Sequence[Any]) -> list[Any]:
        calls.append(list(writes))
        return [*state, *writes]

    channel = DeltaChannel(reducer).from_checkpoint(MISSING)
    assert channel.get() == []
    assert channel.update([1, 2]) is True
    assert channel.update([]) is False
    assert channel.get() == [1, 2]
    assert calls == [[1, 2]]
    assert channel.checkpoint() is MISSING


def test_overwrite_replaces_and_two_in_a_step_raise() -> None:
    channel = DeltaChannel(extend).from_checkpoint([1])
    channel.update([Overwrite([9]), 5])
    assert channel.get() == [9]
    assert channel.overwrote is True
    with pytest.raises(InvalidUpdateError):
        channel.update([Overwrite([1]), Overwrite([2])])


def test_replay_restarts_at_the_last_overwrite() -> None:
    channel = DeltaChannel(extend).from_checkpoint([0])
    channel.replay_writes(
        [("t1", "c", 1), ("t2", "c", Overwrite([7])), ("t3", "c", 8), ("t4", "c", 9)]
    )
    assert channel.get() == [7, 8, 9]


def test_snapshot_frequency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="snapshot_frequency"):
        DeltaChannel(extend, snapshot_frequency=0)


def test_the_annotation_gives_the_type() -> None:
    class State(TypedDict):
        tags: Annotated[dict[str, int], DeltaChannel(lambda s, ws: s)]

    builder = StateGraph(State)
    builder.add_node("n", lambda s: {})
    builder.set_entry_point("n")
    channel = builder.compile().channels["tags"]
    assert isinstance(channel, DeltaChannel)
    assert channel.from_checkpoint(MISSING).get() == {}


def test_untracked_value_forgets_its_value_in_checkpoints() -> None:
    channel = UntrackedValue(str).from_checkpoint("ignored")
    with pytest.raises(EmptyChannelError):
        channel.get()
    channel.update(["a"])
    assert channel.get() == "a"
    assert channel.checkpoint() is MISSING
    assert channel.copy().get() == "a"
    with pytest.raises(InvalidUpdateError, match="guard"):
        channel.update(["a", "b"])
    loose = UntrackedValue(str, guard=False)
    loose.update(["a", "b"])
    assert loose.get() == "b"


def _walk(nodes: dict[str, DeltaNode], target: str) -> dict[str, Any]:
    walk = DeltaWalk(["c"], nodes[target])
    while walk.next_id is not None:
        walk.visit(nodes.get(walk.next_id))
    return dict(walk.result())


def test_walk_stops_at_the_seed_and_skips_writes_the_child_did_not_apply() -> None:
    nodes = {
        "1": DeltaNode("1", None, {"c": "v1"}, {"c": [0]}, [("t", "c", 1)]),
        "2": DeltaNode("2", "1", {"c": "v2"}, {}, [("t", "c", 2), ("u", "d", 0)]),
        # 3 did not apply 2's writes? it did (version moved); 4 did not apply 3's
        "3": DeltaNode("3", "2", {"c": "v3"}, {}, [("t", "c", "stale")]),
        "4": DeltaNode("4", "3", {"c": "v3"}, {}, [("t", "c", "own")]),
    }

    assert _walk(nodes, "4") == {
        "c": {"writes": [("t", "c", 1), ("t", "c", 2)], "seed": [0]}
    }
    assert _walk(nodes, "1") == {"c": {"writes": []}}


def test_walk_of_a_channel_without_a_version_is_empty() -> None:
    nodes = {"1": DeltaNode("1", None, {}, {}, [("t", "c", 1)])}
    assert _walk(nodes, "1") == {"c": {"writes": []}}

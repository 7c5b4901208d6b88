"""Scalar channel values (None, booleans, numbers) round-trip exactly.

Whether a backend keeps them in value rows (the default) or inline in the
checkpoint row (``engine.checkpoint._blobs.INLINE_SCALARS``), reads must not be
able to tell.
"""

from __future__ import annotations

import math

from engine.checkpoint.base import BaseCheckpointSaver
from tests._support.builders import (
    make_checkpoint,
    make_config,
    make_metadata,
    next_checkpoint,
)

SCALARS = {
    "none": None,
    "yes": True,
    "no": False,
    "zero": 0,
    "int": -17,
    "int64": 2**63 - 1,
    "big": 2**70,
    "float": 1.5,
    "whole_float": 2.0,
    "huge_float": 1e300,
    "inf": float("inf"),
    "text": "1",
    "list": [1],
}


def test_scalar_values_round_trip_with_their_types(saver: BaseCheckpointSaver) -> None:
    checkpoint = make_checkpoint({**SCALARS, "nan": float("nan")})
    config = saver.put(
        make_config("t1"), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )

    loaded = saver.get_tuple(config)

    assert loaded is not None
    values = loaded.checkpoint["channel_values"]
    assert math.isnan(values.pop("nan"))
    assert values == SCALARS
    assert {k: type(v) for k, v in values.items()} == {
        k: type(v) for k, v in SCALARS.items()
    }
    assert list(values) == list(checkpoint["channel_versions"])[:-1]


def test_scalars_follow_their_versions_across_steps_and_forks(
    saver: BaseCheckpointSaver,
) -> None:
    root = make_checkpoint({"n": 0, "flag": None, "log": []})
    root_config = saver.put(
        make_config("t1"), root, make_metadata(), root["channel_versions"]
    )
    configs = [root_config]
    checkpoint = root
    for step in range(4):  # n changes, flag flips between a scalar and a list
        flag = [step] if step % 2 else bool(step)
        checkpoint, changed = next_checkpoint(
            checkpoint, {"n": step + 1, "flag": flag}, append={"log": [step]}
        )
        configs.append(saver.put(configs[-1], checkpoint, make_metadata(step), changed))
    fork, fork_changed = next_checkpoint(root, {"n": 1.5})
    fork_config = saver.put(root_config, fork, make_metadata(0, "fork"), fork_changed)

    def values(config):
        loaded = saver.get_tuple(config)
        assert loaded is not None
        return loaded.checkpoint["channel_values"]

    assert values(root_config) == {"n": 0, "flag": None, "log": []}
    assert values(configs[1]) == {"n": 1, "flag": False, "log": [0]}
    assert values(configs[2]) == {"n": 2, "flag": [1], "log": [0, 1]}
    assert values(configs[3]) == {"n": 3, "flag": True, "log": [0, 1, 2]}
    assert values(configs[4]) == {"n": 4, "flag": [3], "log": [0, 1, 2, 3]}
    assert values(fork_config) == {"n": 1.5, "flag": None, "log": []}
    listed = [
        t.checkpoint["channel_values"]["n"] for t in saver.list(make_config("t1"))
    ]
    assert listed == [1.5, 4, 3, 2, 1, 0]

"""Every save of a run carries the run's lease (``_persist._fenced``)."""

from __future__ import annotations

from engine.checkpoint._lease import HELD_LEASE
from engine.constants import CONF
from engine.pregel._persist import _fenced


def test_a_config_the_loop_built_with_the_lease_is_kept_as_it_is() -> None:
    fence = {HELD_LEASE: ("", "holder-1")}
    config = {CONF: {"thread_id": "t", HELD_LEASE: ("", "holder-1")}}

    assert _fenced(config, fence) is config  # no second config per queued save


def test_a_config_without_the_lease_or_with_another_gets_a_fenced_copy() -> None:
    fence = {HELD_LEASE: ("", "holder-1")}
    for conf in ({"thread_id": "t"}, {"thread_id": "t", HELD_LEASE: ("", "old")}):
        config = {CONF: conf, "tags": ["x"]}
        before = {**conf}

        fenced = _fenced(config, fence)

        assert fenced[CONF] == {"thread_id": "t", HELD_LEASE: ("", "holder-1")}
        assert fenced["tags"] == ["x"]
        assert config[CONF] == before  # the caller's config is left alone

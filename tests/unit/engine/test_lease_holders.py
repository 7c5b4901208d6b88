"""A run's lease holder names its host and process and is never another hold's."""

from __future__ import annotations

import os
import socket

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.pregel._lease import ThreadHold


def _holder() -> str:
    return ThreadHold(InMemorySaver(), "t", "", 30.0, is_async=False).holder


def test_every_hold_has_its_own_holder_naming_host_and_process() -> None:
    holders = {_holder() for _ in range(1000)}
    assert len(holders) == 1000
    for holder in holders:
        host, pid, rest = holder.rsplit(":", 2)
        assert (host, pid) == (socket.gethostname(), str(os.getpid()))
        assert len(rest) > 12  # twelve random hex digits, then the hold's number


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_its_own_random_part() -> None:
    parent = _holder()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first holder, to the parent, then out
        try:
            os.write(write, _holder().encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 200).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child.rsplit(":", 2)[1] == str(pid)
    # another process that had this pid earlier would not repeat the holders
    assert child.rsplit(":", 2)[2][:12] != parent.rsplit(":", 2)[2][:12]

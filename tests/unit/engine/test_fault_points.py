"""Fault points (``engine.testing``): the spec syntax and what each action does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine._internal import _faults
from engine.testing import (
    FAULT_POINTS,
    FaultSpecError,
    InjectedConnectionError,
    arm_faults,
    fault_point,
    faults_armed,
)


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    arm_faults(None)
    yield
    arm_faults(None)


def test_unarmed_points_do_nothing() -> None:
    assert not faults_armed()
    for point in FAULT_POINTS:
        fault_point(point)  # no error, no pause


@pytest.mark.parametrize(
    "spec",
    [
        "nowhere=kill",
        "after_claim",
        "after_claim=explode",
        "after_claim=pause",
        "after_claim=sleep:x",
        "after_claim=error@two",
    ],
)
def test_a_bad_spec_fails_loudly(spec: str) -> None:
    with pytest.raises(FaultSpecError):
        arm_faults(spec)


def test_error_on_the_nth_call_only() -> None:
    arm_faults("after_claim=error@2")
    assert faults_armed()
    fault_point("after_claim")
    with pytest.raises(InjectedConnectionError):
        fault_point("after_claim")
    fault_point("after_claim")  # the third call passes again
    assert isinstance(InjectedConnectionError("x"), ConnectionError)


def test_n_plus_acts_from_the_nth_call_on() -> None:
    arm_faults("after_outbox_before_end=error@2+")
    fault_point("after_outbox_before_end")
    for _ in range(3):
        with pytest.raises(InjectedConnectionError):
            fault_point("after_outbox_before_end")


def test_a_key_narrows_the_point_and_counts_apart() -> None:
    arm_faults("after_task_before_writes/c=error, after_claim=sleep:0.2")
    fault_point("after_task_before_writes", "b")  # another node: untouched
    with pytest.raises(InjectedConnectionError, match="after_task_before_writes"):
        fault_point("after_task_before_writes", "c")
    started = time.monotonic()
    fault_point("after_claim", "purchase")  # unkeyed item: every key
    assert time.monotonic() - started >= 0.2


def test_the_log_records_each_action(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "faults.log"
    monkeypatch.setenv(_faults.LOG_ENV, str(log))
    arm_faults("after_claim=sleep:0.01")
    fault_point("after_claim", "purchase")
    assert log.read_text() == f"{os.getpid()} after_claim purchase sleep\n"


_CHILD = (
    "import time; from engine.testing import fault_point; "
    "print('before', flush=True); fault_point('between_values_and_checkpoint'); "
    "print('after', flush=True)"
)


def _child(spec: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        env={**os.environ, _faults.ENV: spec},
        stdout=subprocess.PIPE,
        text=True,
    )


def test_kill_is_a_sigkill_read_from_the_environment() -> None:
    child = _child("between_values_and_checkpoint=kill")
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert out.split() == ["before"]


def test_pause_stops_the_whole_process_then_continues() -> None:
    child = _child("between_values_and_checkpoint=pause:1.5")
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "before"
    deadline = time.monotonic() + 10
    state = ""
    while time.monotonic() < deadline:  # the kernel says: stopped
        state = Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0]
        if state == "T":
            break
        time.sleep(0.02)
    assert state == "T"
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 0 and out.split() == ["after"]

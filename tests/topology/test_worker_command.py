"""``manage.py studio_worker --lease-seconds``: how soon a dead worker's run is queued again."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command

from studio.management.commands import studio_worker
from studio.services.worker import LEASE_SECONDS

pytestmark = pytest.mark.django_db


class _Recorder:
    made: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.made.append(kwargs)
        self.name = kwargs["name"] or "recorder"
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def run_once(self) -> bool:
        return False


def test_the_lease_is_the_worker_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(studio_worker, "Worker", _Recorder)
    _Recorder.made.clear()

    call_command("studio_worker", "--once", "--lease-seconds", "2.5", "--name", "w1")
    call_command("studio_worker", "--once")

    assert _Recorder.made == [
        {"name": "w1", "lease_seconds": 2.5},
        {"name": None, "lease_seconds": LEASE_SECONDS},
    ]


def test_a_lease_must_be_positive() -> None:
    with pytest.raises(CommandError, match="--lease-seconds"):
        call_command("studio_worker", "--once", "--lease-seconds", "0")

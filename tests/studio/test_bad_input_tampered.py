"""Serializer injection against the studio: a tampered checkpoint row that names a
class to build (``os:system``, ``subprocess:Popen``, a module of ours) or carries a
pickle is never imported, built or unpickled, and every page and API address of the
thread answers without a 5xx, and without running anything.

The engine's own refusals are in ``tests/conformance/test_serde_safety.py``;
this is the same attack through the studio's pages and API.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from tests._support.api_calls import Api
from tests._support.savers import SaverSpec
from tests._support.studio import serve_graphs
from tests._support.tamper import tamper_blob, tamper_checkpoint
from tests._support.threads import GRAPHS, checkpoint_id, checkpoints, run_now

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
_graphs = serve_graphs(GRAPHS)

CANARY = "tests._support.tamper_canary"
PAYLOADS: list[tuple[str, bytes]] = [
    ("json", b'{"__t":"dataclass","c":"os:system","v":{"command":"true"}}'),
    ("json", b'{"__t":"dataclass","c":"subprocess:Popen","v":{"args":["true"]}}'),
    ("json", b'{"__t":"pydantic","c":"tests._support.tamper_canary:Payload","v":{}}'),
    ("json", b'{"__t":"dataclass","c":"builtins:eval","v":{"source":"1"}}'),
    ("pickle", pickle.dumps({"a": 1})),
    ("pickle", b"cos\nsystem\n(S'true'\ntR."),
    ("json", b'{"a": 1'),
    ("mystery", b"\x00\x01"),
]


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a, **k: calls.append(("system", a)))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(("Popen", a)))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: calls.append(("loads", a)))
    sys.modules.pop(CANARY, None)
    return calls


def _spec() -> SaverSpec:
    return SaverSpec("sqlite", str(settings.STUDIO_CHECKPOINT_DB))


@pytest.mark.parametrize(("tag", "payload"), PAYLOADS, ids=lambda p: repr(p)[:24])
@pytest.mark.parametrize("row", ["blob", "checkpoint"])
def test_a_tampered_checkpoint_runs_nothing_and_answers_without_a_5xx(
    db: None, tripwires: list[Any], tag: str, payload: bytes, row: str
) -> None:
    ada = User.objects.create_user("ada", password="pw")
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    head = checkpoint_id(checkpoints("notes", thread_id)[0])
    from studio.services.saver import get_saver  # noqa: PLC0415

    if row == "blob":
        tamper_blob(get_saver(), _spec(), thread_id, "title", tag, payload)
    else:
        tamper_checkpoint(get_saver(), _spec(), thread_id, tag, payload)
    page, api = Client(), Api(ada)
    page.force_login(ada)

    answers = [
        page.get(path).status_code
        for path in (
            "/threads/",
            f"/threads/{thread_id}/",
            f"/threads/{thread_id}/compare/",
            f"/threads/{thread_id}/waterfall/",
            f"/threads/{thread_id}/checkpoints/{head}/",
            f"/threads/{thread_id}/checkpoints/{head}/fork/",
        )
    ]
    answers += [
        api.get(f"/threads/{thread_id}").status_code,
        api.get(f"/threads/{thread_id}/state").status_code,
        api.get(f"/threads/{thread_id}/state/{head}").status_code,
        api.post(f"/threads/{thread_id}/history", {}).status_code,
        api.post("/threads/search", {}).status_code,
    ]

    assert tripwires == []
    assert CANARY not in sys.modules
    assert all(status < 500 for status in answers), answers
    assert 409 in answers  # the thread's pages say its stored state cannot be read

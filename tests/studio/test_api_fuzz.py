"""Generated requests against the API, from its own ``/api/openapi.json`` (schemathesis).

Every operation of the document gets schema-valid and schema-invalid requests
(bodies, query strings, path parameters), sent in-process to the WSGI app on
the test database, and each answer is checked by schemathesis' checks: no 5xx,
the status and content type are documented ones, the body matches the
documented schema, invalid data is refused and valid data is not.

About half of the generated path ids are swapped for the ids of a real thread,
run and checkpoint of the caller's, so the requests reach past the 404s.
Without credentials every operation must answer 401, whatever the request.

Bounded (``EXAMPLES`` per operation) so the module runs in a minute or two;
``slow``: skipped by ``make test FAST=1``.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, settings

from studio.api.openapi import document
from studio.models import Run
from studio.services.assistants import ASSISTANT_NAMESPACE
from tests._support.api_calls import token_for
from tests._support.studio import serve_graphs
from tests._support.threads import GRAPHS, checkpoint_id, checkpoints, drain, run_now

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
_graphs = serve_graphs(GRAPHS)

EXAMPLES = 10
"""Generated requests per operation and generation mode (positive, negative)."""
TRIED: Counter[str] = Counter()
"""Requests sent, by test (printed at the end of the module with ``-s``)."""


@cache
def _handler() -> WSGIHandler:
    return WSGIHandler()


def _app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """The studio's WSGI app on the test's database connection.

    A streamed answer (``runs/wait``, ``runs/stream``, ``join``) is read after
    the queued runs were executed here, as a worker would have, so it ends.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        answer = _handler()(environ, start_response)
        try:
            if getattr(answer, "streaming", False):
                drain()
            return list(answer)
        finally:
            answer.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _schema() -> Any:
    loaded = schemathesis.openapi.from_dict(document())
    loaded.app = _app
    return loaded


schema = _schema()


@dataclass(frozen=True)
class World:
    token: str
    thread_id: str
    run_id: str
    checkpoint_id: str


@pytest.fixture
def world(db: None) -> World:
    ada = User.objects.create_user("ada", password="pw")
    run = run_now(ada, "notes", {"title": "hello"})
    head = checkpoints("notes", run.thread_id)[0]
    return World(
        token=token_for(ada),
        thread_id=run.thread_id,
        run_id=str(run.run_id),
        checkpoint_id=checkpoint_id(head),
    )


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"\nAPI fuzz: requests sent {dict(TRIED)} = {sum(TRIED.values())}")


def _heads(value: str) -> bool:
    """A fair coin decided by the generated value (so a failure replays)."""
    return zlib.crc32(value.encode("utf-8", "surrogatepass")) % 2 == 0


def _aim(case: Any, world: World) -> None:
    """Swap about half of the generated ids for real ones of the caller's."""
    params = case.path_parameters or {}
    real = {
        "thread_id": world.thread_id,
        "run_id": world.run_id,
        "checkpoint_id": world.checkpoint_id,
        "assistant_id": str(uuid.uuid5(ASSISTANT_NAMESPACE, "notes")),
    }
    for name, value in real.items():
        if name in params and _heads(str(params[name])):
            params[name] = value
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("checkpoint"), dict):
        # The one rule a schema cannot say: the checkpoint is of the path's thread.
        ref = body["checkpoint"]
        if isinstance(ref.get("thread_id"), str):
            ref["thread_id"] = params.get("thread_id")
        both = (body.get("checkpoint_id"), ref.get("checkpoint_id"))
        if all(isinstance(given, str) and given for given in both):
            ref["checkpoint_id"] = body["checkpoint_id"]


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


@schema.parametrize()
@SETTINGS
def test_every_operation_with_a_token_answers_as_documented(
    case: Any, world: World
) -> None:
    _aim(case, world)
    TRIED["token"] += 1
    case.call_and_validate(headers={"x-api-key": world.token})


@schema.parametrize()
@SETTINGS
def test_every_operation_without_credentials_is_401(case: Any, db: None) -> None:
    TRIED["anonymous"] += 1
    response = case.call()
    documented = case.method.lower() in schema.raw_schema["paths"][case.path]
    # A method the address does not have is 405 before anyone is asked who they are.
    assert response.status_code == (401 if documented else 405), (
        response.status_code,
        response.text[:300],
    )
    assert json.loads(response.text)["detail"]


def test_the_fuzzed_document_is_the_served_one(db: None) -> None:
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    assert response.json() == document()


def test_a_fuzzed_run_is_a_real_one(world: World) -> None:
    # The fuzz reaches past the 404s only if the aimed ids are real ones.
    run = Run.objects.get(pk=world.run_id)
    assert str(run.thread_id) == world.thread_id
    assert run.status == Run.Status.SUCCESS

"""``Idempotency-Key`` on the six API paths that create a run: the official
``langgraph-sdk`` client (its ``headers=``) and plain HTTP.

Two requests with one key at the same moment are in ``run_race_cases.py`` (on
SQLite and on a real Postgres).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from langgraph_sdk.errors import APIStatusError

from studio.models import Run, Thread
from tests._support.api_calls import Api, sdk_client, token_for
from tests._support.reviews import member
from tests._support.studio import serve_graphs
from tests._support.threads import drain

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs({"slow": "tests.studio.engine_graphs_for_tests:slow"})

KEY = {"Idempotency-Key": "4f1c8f5e-6d0b-4f3e-9d55-2f9a1c0e7b21"}
BODY = {"assistant_id": "slow", "input": {"text": "once"}}


@pytest.fixture
def ada() -> User:
    return member("ada")


@pytest.fixture
def api(ada: User) -> Api:
    return Api(ada)


def _thread(api: Api) -> str:
    response = api.post("/threads", {})
    assert response.status_code == 200, response.content
    return str(response.json()["thread_id"])


def _post(api: Api, path: str, body: Any) -> Any:
    """POST with the key; any answer (the SSE ones are not JSON)."""
    return api.client.post(
        f"/api{path}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"x-api-key": api.token, **KEY},
    )


def _read(response: Any) -> bytes:
    """A (maybe streamed) body, once the run it serves finished."""
    if not response.streaming:
        return bytes(response.content)
    from asgiref.sync import async_to_sync  # noqa: PLC0415

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return bytes(async_to_sync(collect)())


# -- the official client --------------------------------------------------------------


def test_the_sdk_sends_a_key_twice_and_gets_one_run(ada: User) -> None:
    client = sdk_client(token_for(ada))
    thread_id = client.threads.create()["thread_id"]

    first = client.runs.create(thread_id, "slow", input={"text": "a"}, headers=KEY)
    again = client.runs.create(thread_id, "slow", input={"text": "a"}, headers=KEY)
    other = client.runs.create(thread_id, "slow", input={"text": "a"})

    assert again["run_id"] == first["run_id"] != other["run_id"]
    assert Run.objects.filter(thread_id=thread_id).count() == 2
    with pytest.raises(APIStatusError) as refused:
        client.runs.create(thread_id, "slow", input={"text": "b"}, headers=KEY)
    assert refused.value.response.status_code == 422
    detail = refused.value.response.json()["detail"]
    assert "already used for another request" in detail and first["run_id"] in detail
    assert Run.objects.filter(thread_id=thread_id).count() == 2


def test_the_sdk_stateless_run_with_a_key_makes_one_thread(ada: User) -> None:
    client = sdk_client(token_for(ada))
    key = {"Idempotency-Key": "stateless-1"}

    first = client.runs.create(None, "slow", input={"text": "a"}, headers=key)
    again = client.runs.create(None, "slow", input={"text": "a"}, headers=key)

    assert again["run_id"] == first["run_id"]
    assert again["thread_id"] == first["thread_id"]
    assert Thread.objects.filter(owner=ada).count() == 1
    drain()
    assert Run.objects.get(pk=first["run_id"]).status == Run.Status.SUCCESS


# -- plain HTTP, every path that creates a run -------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/wait", "/stream"])
@pytest.mark.parametrize("stateless", [False, True])
def test_every_create_path_answers_the_first_run_for_a_repeated_key(
    api: Api, ada: User, suffix: str, stateless: bool
) -> None:
    path = f"/runs{suffix}" if stateless else f"/threads/{_thread(api)}/runs{suffix}"
    body = {**BODY, "on_completion": "keep"} if stateless else BODY

    first = _post(api, path, body)
    drain()
    again = _post(api, path, body)

    assert first.status_code == again.status_code == 200
    assert Run.objects.filter(created_by=ada).count() == 1
    run = Run.objects.get(created_by=ada)
    assert run.idempotency_key == KEY["Idempotency-Key"]
    assert Thread.objects.filter(owner=ada).count() == 1
    first_body, again_body = _read(first), _read(again)
    if suffix == "/wait":
        assert json.loads(again_body) == json.loads(first_body)
        assert json.loads(again_body)["log"] == ["first", "waited"]
    elif suffix == "/stream":
        assert again_body == first_body and run.run_id.encode() in again_body
    else:
        assert json.loads(again_body)["run_id"] == run.run_id


def test_the_same_body_with_its_keys_in_another_order_is_the_same_request(
    api: Api, ada: User
) -> None:
    thread_id = _thread(api)
    raw = '{"input": {"text": "x"}, "assistant_id": "slow"}'

    first = api.post(
        f"/threads/{thread_id}/runs", BODY | {"input": {"text": "x"}}, headers=KEY
    )
    again = api.post(f"/threads/{thread_id}/runs", raw, headers=KEY)

    assert first.json()["run_id"] == again.json()["run_id"]
    assert Run.objects.filter(created_by=ada).count() == 1


def test_the_same_key_on_another_thread_is_refused(api: Api, ada: User) -> None:
    first = api.post(f"/threads/{_thread(api)}/runs", BODY, headers=KEY)
    assert first.status_code == 200

    refused = api.post(f"/threads/{_thread(api)}/runs", BODY, headers=KEY)
    stateless = api.post("/runs", BODY, headers=KEY)

    assert refused.status_code == stateless.status_code == 422
    assert "already used for another request" in refused.json()["detail"]
    assert Run.objects.filter(created_by=ada).count() == 1
    assert Thread.objects.filter(owner=ada).count() == 2  # the two made above


def test_keys_are_per_user(api: Api, ada: User) -> None:
    thread_id = _thread(api)
    mine = api.post(f"/threads/{thread_id}/runs", BODY, headers=KEY).json()
    bob = Api(member("bob"))

    foreign = bob.post(f"/threads/{thread_id}/runs", BODY, headers=KEY)
    own = bob.post("/runs", BODY, headers=KEY)
    own_again = bob.post("/runs", BODY, headers=KEY)

    assert foreign.status_code == 404  # ada's thread, whatever the key says
    assert own.status_code == 200 and own.json()["run_id"] != mine["run_id"]
    assert own_again.json()["run_id"] == own.json()["run_id"]
    assert Run.objects.filter(idempotency_key=KEY["Idempotency-Key"]).count() == 2
    assert Run.objects.get(pk=mine["run_id"]).created_by == ada


def test_a_key_in_the_body_is_not_a_key(api: Api, ada: User) -> None:
    thread_id = _thread(api)
    body = {**BODY, "metadata": {"Idempotency-Key": "k"}}

    first = api.post(f"/threads/{thread_id}/runs", body)
    again = api.post(f"/threads/{thread_id}/runs", body)

    assert first.json()["run_id"] != again.json()["run_id"]
    assert not Run.objects.exclude(idempotency_key="").exists()


@pytest.mark.parametrize("key", ["", "   ", "k" * 256, "clé", "two words"])
def test_a_malformed_key_is_422_and_stores_nothing(
    api: Api, ada: User, key: str
) -> None:
    response = api.post("/runs", BODY, headers={"Idempotency-Key": key})

    assert response.status_code == 422
    assert "Idempotency-Key" in response.json()["detail"]
    assert not Run.objects.exists() and not Thread.objects.exists()


def test_a_refused_request_does_not_take_the_key(api: Api, ada: User) -> None:
    bad = api.post(
        "/runs", {"assistant_id": "slow", "input": {}, "webhook": "x"}, headers=KEY
    )
    assert bad.status_code == 422

    good = api.post("/runs", BODY, headers=KEY)

    assert good.status_code == 200
    assert Run.objects.get().idempotency_key == KEY["Idempotency-Key"]


def test_the_openapi_description_documents_the_header(api: Api) -> None:
    doc = api.get("/openapi.json").json()
    creating = [
        doc["paths"][path]["post"]
        for path in (
            "/threads/{thread_id}/runs",
            "/threads/{thread_id}/runs/wait",
            "/threads/{thread_id}/runs/stream",
            "/runs",
            "/runs/wait",
            "/runs/stream",
        )
    ]
    for operation in creating:
        headers = [p for p in operation["parameters"] if p["in"] == "header"]
        assert [h["name"] for h in headers] == ["Idempotency-Key"]
        assert "same user" in headers[0]["description"]
    listing = doc["paths"]["/threads/{thread_id}/runs"]["get"]
    assert all(p["in"] != "header" for p in listing.get("parameters", []))

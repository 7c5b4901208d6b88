"""The official ``langgraph-sdk`` (sync and async) against the studio served by Daphne.

Create, wait, stream in each mode, interrupt, resume through the reviewer
console, history, update state, cancel, reject on a busy thread, delete, SSE
reconnect with ``Last-Event-ID``, token auth and revocation.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, PermissionDeniedError

from tests._support.live_server import LiveServer
from tests.sdk.conftest import issue_token

PURCHASE_ASSISTANT = str(
    uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "purchase")
)


def request(request_id: str, amount_minor: int = 480_050) -> dict[str, object]:
    return {
        "request_id": request_id,
        "approval_version": 1,
        "amount_minor": amount_minor,
        "vendor": "Acme",
        "category": "office",
    }


def test_sync_client_runs_a_purchase_to_its_review_and_a_reviewer_approves(
    server: LiveServer, requester_token: str, reviewer_token: str
) -> None:
    client = get_sync_client(url=f"{server.url}/api", api_key=requester_token)
    reviewer = get_sync_client(url=f"{server.url}/api", api_key=reviewer_token)

    [assistant] = client.assistants.search(graph_id="purchase")
    assert assistant["assistant_id"] == PURCHASE_ASSISTANT
    thread = client.threads.create(metadata={"team": "sdk"})
    result = client.runs.wait(thread["thread_id"], "purchase", input=request("SDK-1"))

    assert result["__interrupt__"][0]["value"]["request_id"] == "SDK-1"
    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["human_review"]
    history = client.threads.get_history(thread["thread_id"])
    assert [h["metadata"]["step"] for h in history] == [2, 1, 0, -1]
    assert client.threads.search(metadata={"team": "sdk"}, status="interrupted")

    decision = {
        "request_id": "SDK-1",
        "approval_version": 1,
        "decision_id": "sdk-d-1",
        "action": "approve",
        "reason": "",
    }
    # the requester cannot answer its own review; a forged reviewer is no help
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(thread["thread_id"], "purchase", command={"resume": decision})
    assert refused.value.response.status_code == 403
    with pytest.raises(httpx.HTTPStatusError) as forged:
        reviewer.runs.wait(
            thread["thread_id"],
            "purchase",
            command={"resume": {**decision, "reviewer": "ceo"}},
        )
    assert forged.value.response.status_code == 422

    final = reviewer.runs.wait(
        thread["thread_id"], PURCHASE_ASSISTANT, command={"resume": decision}
    )

    assert final["status"] == "executed"
    assert "approved by demo" in final["result"]


def test_stream_modes_and_reconnect_with_last_event_id(
    server: LiveServer, requester_token: str
) -> None:
    client = get_sync_client(url=f"{server.url}/api", api_key=requester_token)
    thread = client.threads.create()

    parts = list(
        client.runs.stream(
            thread["thread_id"],
            "slow_steps",
            input={"n": 0},
            stream_mode=[
                "updates",
                "values",
                "custom",
                "tasks",
                "checkpoints",
                "debug",
            ],
        )
    )

    events = [p.event for p in parts]
    assert events[0] == "metadata"
    assert {"updates", "values", "custom", "tasks", "checkpoints", "debug"} <= set(
        events
    )
    assert [p.data["n"] for p in parts if p.event == "values"][-1] == 6
    assert [p.data for p in parts if p.event == "custom"] == [
        {"progress": i} for i in range(6)
    ]
    run_id = parts[0].data["run_id"]

    # the join stream, read raw: every frame has an id, and Last-Event-ID resumes after it
    url = f"{server.url}/api/threads/{thread['thread_id']}/runs/{run_id}/stream"
    headers = {"x-api-key": requester_token}
    whole = _frames(httpx.get(url, headers=headers, timeout=30).text)
    ids = [f["id"] for f in whole if "id" in f]
    middle = ids[len(ids) // 2]
    rest = _frames(
        httpx.get(url, headers={**headers, "Last-Event-ID": middle}, timeout=30).text
    )
    later = [f["id"] for f in rest if "id" in f]
    assert later == ids[ids.index(middle) + 1 :]


def _frames(text: str) -> list[dict[str, str]]:
    frames = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line.startswith(":"):
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            frames.append(fields)
    return frames


def test_async_client_cancel_busy_reject_update_and_delete(
    server: LiveServer, requester_token: str
) -> None:
    async def scenario() -> None:
        client = get_client(url=f"{server.url}/api", api_key=requester_token)
        thread = await client.threads.create()
        tid = thread["thread_id"]
        held = await client.runs.create(
            tid, "slow_steps", input={"n": 0}, after_seconds=30
        )
        with pytest.raises(ConflictError):
            await client.runs.create(
                tid, "slow_steps", input={"n": 0}, multitask_strategy="reject"
            )
        await client.runs.cancel(tid, held["run_id"], wait=True)
        assert (await client.runs.get(tid, held["run_id"]))["status"] == "interrupted"

        await client.runs.wait(tid, "slow_steps", input={"n": 4})
        updated = await client.threads.update_state(tid, {"n": 0}, as_node="step")
        head = await client.threads.get_state(tid)
        assert (
            head["checkpoint"]["checkpoint_id"]
            == updated["checkpoint"]["checkpoint_id"]
        )
        assert head["values"]["n"] == 0 and head["metadata"]["source"] == "update"

        await client.threads.delete(tid)
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)

    asyncio.run(scenario())


def test_tokens_authenticate_until_revoked(server: LiveServer) -> None:
    token = issue_token(server, "requester")
    client = get_sync_client(url=f"{server.url}/api", api_key=token)
    assert client.assistants.search(limit=1)

    server.manage(
        "shell",
        "-c",
        "from studio.models import ApiToken; "
        f"ApiToken.objects.get(digest=ApiToken.hash({token!r})).delete()",
    )

    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.assistants.search(limit=1)
    assert refused.value.response.status_code == 401
    anonymous = get_sync_client(url=f"{server.url}/api", api_key=None)
    with pytest.raises(httpx.HTTPStatusError):
        anonymous.threads.create()


def test_another_users_thread_is_not_found(
    server: LiveServer, requester_token: str, reviewer_token: str
) -> None:
    mine = get_sync_client(url=f"{server.url}/api", api_key=requester_token)
    theirs = get_sync_client(url=f"{server.url}/api", api_key=reviewer_token)
    thread = mine.threads.create()

    with pytest.raises(NotFoundError):
        theirs.threads.get(thread["thread_id"])
    with pytest.raises((NotFoundError, PermissionDeniedError)):
        theirs.runs.create(thread["thread_id"], "slow_steps", input={"n": 0})


def test_the_smoke_example_runs(server: LiveServer, requester_token: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "studio.api.smoke", server.url, requester_token],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "waiting for review" in done.stdout
    assert "history: step 2 <- step 1 <- step 0 <- step -1" in done.stdout
    assert "update:" in done.stdout

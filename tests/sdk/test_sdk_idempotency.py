"""``Idempotency-Key`` with the official async client against Daphne: requests
sent at the same moment with one key make one run; another user's key is theirs."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from tests._support.live_server import LiveServer


def test_one_key_sent_four_times_at_once_makes_one_run(
    server: LiveServer, requester_token: str, reviewer_token: str
) -> None:
    async def scenario() -> None:
        client = get_client(url=f"{server.url}/api", api_key=requester_token)
        other = get_client(url=f"{server.url}/api", api_key=reviewer_token)
        tid = (await client.threads.create())["thread_id"]
        key = {"Idempotency-Key": str(uuid.uuid4())}

        made = await asyncio.gather(
            *(
                client.runs.create(tid, "slow_steps", input={"n": 3}, headers=key)
                for _ in range(4)
            )
        )
        assert len({run["run_id"] for run in made}) == 1
        await client.runs.join(tid, made[0]["run_id"])
        listed = await client.runs.list(tid)
        assert [run["run_id"] for run in listed] == [made[0]["run_id"]]

        # a stateless wait sent twice at once: one run, both get its values
        once = {"Idempotency-Key": str(uuid.uuid4())}
        threads_before = await client.threads.count()
        waited = await asyncio.gather(
            *(
                client.runs.wait(
                    None,
                    "slow_steps",
                    input={"n": 4},
                    on_completion="keep",
                    headers=once,
                )
                for _ in range(2)
            )
        )
        assert waited[0] == waited[1] and waited[0]["seen"] == [4, 5]
        assert await client.threads.count() == threads_before + 1

        with pytest.raises(APIStatusError) as refused:
            await client.runs.create(tid, "slow_steps", input={"n": 4}, headers=key)
        assert refused.value.response.status_code == 422

        theirs = await other.runs.create(
            None, "slow_steps", input={"n": 3}, headers=key
        )
        assert theirs["run_id"] != made[0]["run_id"]
        assert theirs["thread_id"] != tid

    asyncio.run(scenario())

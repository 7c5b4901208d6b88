"""``python -m studio.api.smoke URL TOKEN``: drive a running studio with the official SDK.

A smoke test and an example in one: it creates a thread, runs the purchase graph
to its review, reads the state and the history, then streams a run of the
research graph, printing what it sees. ``URL`` is the studio's address
(``http://127.0.0.1:8000``), ``TOKEN`` a personal API token
(``manage.py create_api_token <username>``). Needs ``langgraph-sdk``
(installed with the test extras: ``pip install -e ".[test]"``).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m studio.api.smoke", description=__doc__
    )
    parser.add_argument("url", help="the studio's address, e.g. http://127.0.0.1:8000")
    parser.add_argument("token", help="a personal API token")
    args = parser.parse_args(argv)
    try:
        from langgraph_sdk import get_sync_client  # noqa: PLC0415 - optional dependency
    except ImportError:
        print(
            "langgraph-sdk is not installed: pip install langgraph-sdk", file=sys.stderr
        )
        return 2
    client = get_sync_client(url=args.url.rstrip("/") + "/api", api_key=args.token)

    assistants = client.assistants.search()
    print("assistants:", ", ".join(a["graph_id"] for a in assistants))
    thread = client.threads.create(metadata={"from": "smoke"})
    request_id = f"SMOKE-{uuid.uuid4().hex[:8].upper()}"
    result: Any = client.runs.wait(
        thread["thread_id"],
        "purchase",
        input={
            "request_id": request_id,
            "approval_version": 1,
            "amount_minor": 480_050,
            "vendor": "Acme",
            "reason": "smoke test",
        },
    )
    waiting = result.get("__interrupt__", [{}])[0].get("value", {})
    print(
        f"purchase {request_id}: waiting for review — {waiting.get('what_will_happen')}"
    )
    state = client.threads.get_state(thread["thread_id"])
    values = state["values"]
    print(
        "state: next =",
        state["next"],
        "| checks passed:",
        values.get("budget_ok") if isinstance(values, dict) else None,
    )
    history = client.threads.get_history(thread["thread_id"])
    print(
        "history:",
        " <- ".join(f"step {(h['metadata'] or {})['step']}" for h in history),
    )
    print(
        f"decide it at {args.url.rstrip('/')}/reviews/{thread['thread_id']}/ as a reviewer"
    )

    research = client.threads.create()
    for part in client.runs.stream(
        research["thread_id"],
        "research",
        input={"question": "What does a smoke test prove?"},
        stream_mode="updates",
    ):
        if part.event == "updates":
            print("update:", ", ".join(part.data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

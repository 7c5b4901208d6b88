"""Pages of a long thread make as many queries as those of a short one (issue 17).

A thread of 4 checkpoints and one of 60 (``counter``: one string appended a
step) really run through the queue and a worker. Each page and API call of the
long thread must make no more queries than the same page of the short one:
keyset pagination and indexed lookups, never a read that grows with the
history. (Checkpoints are read through the checkpointer's own connection; the
engine's side is measured in ``benchmarks/studio_pages.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests._support.studio import serve_graphs
from tests._support.threads import GRAPHS, checkpoint_id, checkpoints, run_now

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs(
    {**GRAPHS, "counter": "tests.studio.thread_graphs_for_tests:counter"}
)

SHORT, LONG = 2, 58


def _thread(user: User, target: int) -> dict[str, str]:
    run = run_now(user, "counter", {"n": 0, "target": target, "log": []})
    ids = [checkpoint_id(s) for s in checkpoints("counter", run.thread_id)]
    return {"thread": run.thread_id, "newest": ids[0], "middle": ids[len(ids) // 2]}


PAGES: dict[str, Any] = {
    "thread page": lambda c, t: c.get(f"/threads/{t['thread']}/"),
    "older timeline page": lambda c, t: c.get(
        f"/threads/{t['thread']}/?before={t['middle']}",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="timeline",
    ),
    "step panel": lambda c, t: c.get(
        f"/threads/{t['thread']}/checkpoints/{t['middle']}/"
    ),
    "compare": lambda c, t: c.get(
        f"/threads/{t['thread']}/compare/?a={t['middle']}&b={t['newest']}"
    ),
    "waterfall": lambda c, t: c.get(f"/threads/{t['thread']}/waterfall/"),
    "history API": lambda c, t: c.post(
        f"/api/threads/{t['thread']}/history",
        {"limit": 10},
        content_type="application/json",
    ),
    "state API": lambda c, t: c.get(f"/api/threads/{t['thread']}/state"),
}


def _queries(client: Client, page: Any, thread: dict[str, str]) -> int:
    page(client, thread)  # warm: sessions, caches, lazily imported graphs
    with CaptureQueriesContext(connection) as captured:
        response = page(client, thread)
    assert response.status_code == 200, response.content[:500]
    return len(captured.captured_queries)


def test_a_long_thread_s_pages_make_no_more_queries_than_a_short_one_s(
    signed_in: Client, ada: User
) -> None:
    short, long = _thread(ada, SHORT), _thread(ada, LONG)

    counts = {
        name: (_queries(signed_in, page, short), _queries(signed_in, page, long))
        for name, page in PAGES.items()
    }

    grown = {name: pair for name, pair in counts.items() if pair[1] > pair[0]}
    assert not grown, f"queries (short, long) that grow with the history: {grown}"
    assert all(pair[0] <= 25 for pair in counts.values()), counts

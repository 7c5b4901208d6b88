"""The thread page's live parts: the Activity panel, the socket's fragments, refreshes.

Graphs really run (``tests._support.threads``); fragments are rendered as the
consumer renders them (``components/_run_event.html`` from ``activity.event_view``).
"""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client

from studio.asgi import application
from studio.models import Run, RunEvent, Thread
from studio.services import activity, run_log
from studio.services.runs import start_run
from tests._support.studio import serve_graphs
from tests._support.threads import GRAPHS, XSS, checkpoint_id, checkpoints, run_now

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {
    "request_id": "R-7",
    "approval_version": 1,
    "amount_minor": 250_000,
    "vendor": "Acme",
}


_graphs = serve_graphs(GRAPHS)


@pytest.fixture
def purchase_thread(ada: User) -> str:
    """A purchase waiting for its human review."""
    return run_now(ada, "purchase", REQUEST).thread_id


def html_of(response: Any) -> str:
    return response.content.decode()


def fragment(row: RunEvent) -> str:
    return render_to_string(
        "components/_run_event.html", {"event": activity.event_view(row)}
    )


def event_ids(thread_id: str) -> list[int]:
    return list(
        RunEvent.objects.filter(thread_id=thread_id)
        .order_by("id")
        .values_list("id", flat=True)
    )


# -- the page --------------------------------------------------------------------------


def test_activity_panel_lists_the_newest_events_and_resumes_the_socket_after_them(
    signed_in: Client, purchase_thread: str
) -> None:
    ids = event_ids(purchase_thread)

    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    shown = [int(i) for i in re.findall(r'<li id="event-(\d+)"', html)]
    assert sorted(shown) == ids
    assert shown[0] == ids[-1]  # newest first: the run's last status on top
    assert (
        f'hx-ext="ws" ws-connect="/ws/threads/{purchase_thread}/?after={ids[-1]}"'
        in html
    )
    assert f'<span id="last-event-id" data-last-event="{ids[-1]}" hidden>' in html
    assert "run paused: waiting for input" in html
    assert "Older events are not shown" not in html


def test_page_has_every_target_of_the_socket_fragments(
    signed_in: Client, purchase_thread: str
) -> None:
    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    assert '<ol id="run-events" class="run-events"' in html
    assert '<p id="run-outcome" class="run-outcome run-outcome--interrupted"' in html
    assert (
        '<span id="run-status" class="badge badge--interrupted" '
        'data-status="interrupted">interrupted</span>' in html
    )
    for node in ("normalize", "budget", "compliance", "human_review", "execute"):
        # idle after the run: node states are only shown while a run is active
        assert (
            f'<span id="node-state-{node}" class="node-state node-state--idle" '
            f'data-node="{node}" data-state="">' in html
        )
        # the drawing's node it is mirrored onto (Graphviz writes "-" as "&#45;")
        assert f'id="node-{node}"' in html.replace("&#45;", "-")


def test_activity_shows_only_the_newest_events_of_a_long_log(
    signed_in: Client, ada: User
) -> None:
    thread = Thread.objects.create(graph="purchase", owner=ada)
    run = Run.objects.create(thread=thread, graph="purchase")
    RunEvent.objects.bulk_create(
        RunEvent(run=run, thread=thread, kind="custom", payload={"payload": i})
        for i in range(activity.ACTIVITY_LIMIT + 5)
    )
    ids = event_ids(thread.thread_id)

    html = html_of(signed_in.get(f"/threads/{thread.thread_id}/"))

    shown = [int(i) for i in re.findall(r'<li id="event-(\d+)"', html)]
    assert shown == ids[-activity.ACTIVITY_LIMIT :][::-1]  # newest first
    assert "Older events are not shown" in html
    assert f"?after={ids[-1]}" in html


def test_node_states_of_an_active_run_are_rendered_from_its_events(ada: User) -> None:
    thread = Thread.objects.create(graph="purchase", owner=ada)
    old = Run.objects.create(thread=thread, graph="purchase")
    run_log.append(old, "task.start", {"node": "reject", "step": 4, "ns": []})
    run_log.append(old, "run.status", {"status": "success"})
    new = Run.objects.create(thread=thread, graph="purchase")
    run_log.append(new, "run.status", {"status": "running"})
    run_log.append(new, "task.end", {"node": "normalize", "step": 1, "ns": []})
    run_log.append(new, "task.start", {"node": "budget", "step": 2, "ns": []})
    run_log.append(
        new, "task.start", {"node": "budget", "step": 1, "ns": ["sub:1"]}
    )  # a subgraph's node of the same name is not the drawing's

    view = activity.activity(thread.thread_id, ["normalize", "budget", "reject"])

    assert {s.node: s.state for s in view.nodes} == {
        "normalize": "done",
        "budget": "running",
        "reject": "",
    }


def test_empty_thread_page_has_an_empty_activity_and_a_refreshable_step_panel(
    signed_in: Client, ada: User
) -> None:
    thread = Thread.objects.create(graph="purchase", owner=ada)

    html = html_of(signed_in.get(f"/threads/{thread.thread_id}/"))

    assert f'ws-connect="/ws/threads/{thread.thread_id}/?after=0"' in html
    assert "No run events yet." in html
    assert (
        f'<section id="step-panel" class="panel step-panel" data-checkpoint="" '
        f'data-highlight="{{}}" data-refresh-url="/threads/{thread.thread_id}/">'
        in html
    )


def test_newest_step_panel_follows_the_thread_and_a_chosen_step_stays(
    signed_in: Client, purchase_thread: str
) -> None:
    newest, older = (
        checkpoint_id(s) for s in checkpoints("purchase", purchase_thread)[:2]
    )

    default = html_of(signed_in.get(f"/threads/{purchase_thread}/"))
    chosen = html_of(signed_in.get(f"/threads/{purchase_thread}/checkpoints/{older}/"))

    assert f'data-checkpoint="{newest}"' in default
    assert f'data-refresh-url="/threads/{purchase_thread}/" ' in default
    assert (
        f'data-refresh-url="/threads/{purchase_thread}/checkpoints/{older}/" ' in chosen
    )
    assert f'data-refresh-url="/threads/{purchase_thread}/"' in chosen  # timeline


def test_htmx_request_targeting_the_step_panel_gets_the_newest_step(
    signed_in: Client, purchase_thread: str
) -> None:
    newest = checkpoint_id(checkpoints("purchase", purchase_thread)[0])

    html = html_of(
        signed_in.get(
            f"/threads/{purchase_thread}/",
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="step-panel",
        )
    )
    timeline = html_of(
        signed_in.get(
            f"/threads/{purchase_thread}/",
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="timeline",
        )
    )

    assert html.lstrip().startswith('<section id="step-panel"')
    assert f'data-checkpoint="{newest}"' in html
    assert "Paused: waiting for an answer" in html
    assert timeline.lstrip().startswith('<section id="timeline"')


def test_step_panel_refresh_of_an_empty_thread_is_the_empty_panel(
    signed_in: Client, ada: User
) -> None:
    thread = Thread.objects.create(graph="purchase", owner=ada)

    response = signed_in.get(
        f"/threads/{thread.thread_id}/",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="step-panel",
    )

    assert response.status_code == 200
    assert "No checkpoints yet" in html_of(response)


def test_step_panel_refresh_of_another_users_thread_is_not_found(
    client: Client, purchase_thread: str
) -> None:
    client.force_login(User.objects.create_user("bob"))

    response = client.get(
        f"/threads/{purchase_thread}/",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="step-panel",
    )

    assert response.status_code == 404


def test_timeline_polls_only_as_a_marked_fallback_while_a_run_is_queued(
    signed_in: Client, ada: User, purchase_thread: str
) -> None:
    start_run(graph="purchase", user=ada, thread_id=purchase_thread)

    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    assert re.search(
        r'<span class="badge badge--running" data-fallback-poll hx-get="[^"]+" '
        r'hx-trigger="every 2s" hx-target="#timeline" hx-swap="outerHTML">',
        html,
    )
    assert 'data-status="running">running</span>' in html


# -- the fragments -----------------------------------------------------------------------


def test_task_fragment_appends_the_event_and_sets_the_nodes_state(
    ada: User, purchase_thread: str
) -> None:
    row = RunEvent.objects.filter(
        thread_id=purchase_thread, kind="task.end", payload__node="human_review"
    ).get()

    html = fragment(row)

    assert html.count('hx-swap-oob="afterbegin:#run-events"') == 1  # newest first
    assert f'<li id="event-{row.id}" ' in html and 'data-kind="task.end"' in html
    assert (
        '<span id="node-state-human_review" class="node-state '
        'node-state--interrupted" data-node="human_review" data-state="interrupted">'
        in html
    )
    assert f'<span id="last-event-id" data-last-event="{row.id}" hidden>' in html
    assert 'id="run-status"' not in html
    # every top-level element has an id (or an OOB target): nothing for htmx to miss
    assert "<it>" not in html and "{#" not in html


def test_run_status_fragments_say_whether_the_run_finished(
    ada: User, purchase_thread: str
) -> None:
    started, ended = RunEvent.objects.filter(
        thread_id=purchase_thread, kind="run.status"
    ).order_by("id")

    assert (
        '<span id="run-status" class="badge badge--running" data-status="running" '
        'data-run-status="running" data-finished="false"'
    ) in fragment(started)
    assert (
        '<span id="run-status" class="badge badge--interrupted" '
        'data-status="interrupted" data-run-status="success" data-finished="true"'
    ) in fragment(ended)
    assert "run paused: waiting for input" in fragment(ended)


@pytest.mark.parametrize(
    ("payload", "shown"),
    [
        ({"status": "pending"}, "running"),
        ({"status": "success"}, "done"),
        ({"status": "success", "interrupted": True}, "interrupted"),
        ({"status": "error"}, "failed"),
        ({"status": "timeout"}, "failed"),
        ({"status": "interrupted", "cancelled": "interrupt"}, "cancelled"),
    ],
)
def test_run_statuses_in_the_words_of_the_thread_badge(
    payload: dict[str, Any], shown: str
) -> None:
    assert activity.run_display_status(payload) == shown


def test_subgraph_task_fragment_leaves_the_drawing_alone(ada: User) -> None:
    thread = Thread.objects.create(graph="purchase", owner=ada)
    run = Run.objects.create(thread=thread, graph="purchase")
    row = run_log.append(run, "task.start", {"node": "inner", "ns": ["sub:1"]})

    html = fragment(row)

    assert "inner started" in html
    assert "node-state-" not in html  # no target on the page: htmx would log an error


def test_fragment_escapes_node_names(ada: User) -> None:
    thread = Thread.objects.create(graph="purchase", owner=ada)
    run = Run.objects.create(thread=thread, graph="purchase")
    row = run_log.append(run, "task.end", {"node": XSS, "step": 1, "ns": []})

    html = fragment(row)

    assert "<script>" not in html
    assert 'data-node="&lt;script&gt;alert(1)&lt;/script&gt;"' in html


# -- the embedded channel layer ------------------------------------------------------------


async def test_a_worker_thread_publishing_wakes_the_socket_at_once(ada: User) -> None:
    """The embedded worker is a plain thread: its publish must reach the server loop."""
    thread, run, cookie = await _thread_run_cookie(ada)
    communicator = WebsocketCommunicator(
        application,
        f"/ws/threads/{thread.thread_id}/?format=json",
        headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)],
    )
    await communicator.connect()
    await communicator.receive_json_from()  # hello
    appended: list[int] = []

    def worker() -> None:
        appended.append(
            run_log.append(run, "task.start", {"node": "budget", "ns": []}).id
        )

    producer = threading.Thread(target=worker)
    producer.start()
    received = await communicator.receive_json_from(timeout=3)
    await asyncio.to_thread(producer.join)

    assert received["id"] == appended[0]
    await communicator.disconnect()


@sync_to_async
def _thread_run_cookie(user: User) -> tuple[Thread, Run, bytes]:
    thread = Thread.objects.create(graph="purchase", owner=user)
    run = Run.objects.create(thread=thread, graph="purchase")
    client = Client()
    client.force_login(user)
    return thread, run, f"sessionid={client.cookies['sessionid'].value}".encode()


# -- run order, the pinned outcome, the classes the stylesheet styles (issue 14) ---------


def view(id: int, kind: str, run: str = "r1", **payload: Any) -> dict[str, Any]:
    """An ``event_view``-shaped dict, enough for ``in_run_order``."""
    step = payload.get("step")
    return {
        "id": id,
        "kind": kind,
        "run_id": run,
        "order_step": step
        if kind in ("task.start", "task.end", "step", "checkpoint")
        and not payload.get("ns")
        else None,
    }


def test_in_run_order_puts_late_checkpoints_back_in_their_step() -> None:
    """What an async save looks like in the log: each checkpoint arrives after the
    next step started (the order the worker saw with the SQLite saver)."""
    log = [
        view(1, "run.status"),
        view(2, "step", step=0),
        view(3, "task.start", step=1),
        view(4, "custom"),
        view(5, "task.end", step=1),
        view(6, "checkpoint", step=-1),
        view(7, "step", step=1),
        view(8, "checkpoint", step=0),
        view(9, "task.start", step=2),
        view(10, "task.start", step=2, ns=["sub"]),
        view(11, "checkpoint", step=1),
        view(12, "checkpoint", step=0, ns=["sub"]),  # a subgraph's: left alone
        view(13, "interrupt"),
        view(14, "checkpoint", step=2),
        view(15, "run.status"),
        view(16, "checkpoint", step=3, run="r2"),  # another run: never mixed in
    ]

    ordered = [e["id"] for e in activity.in_run_order(log)]

    assert ordered == [1, 6, 2, 8, 3, 4, 5, 7, 11, 9, 10, 12, 13, 14, 15, 16]


def test_the_activity_of_a_real_run_reads_in_run_order_newest_first(
    signed_in: Client, purchase_thread: str
) -> None:
    """Issue 14: "checkpoint saved (step -1)" showed after "normalize started
    (step 1)": the saver stores checkpoints in the background (async durability)."""
    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))
    lines = re.findall(r'<span class="run-event__text">([^<]+)</span>', html)[::-1]

    assert lines[0] == "run running" and lines[-1] == "run paused: waiting for input"
    saved = {int(m): i for i, line in enumerate(lines) if (m := _saved_step(line))}
    started = {
        i: int(m.group(1))
        for i, line in enumerate(lines)
        if (m := re.search(r"started \(step (\d+)\)", line))
    }
    for checkpoint_step, at in saved.items():
        later = [i for i, step in started.items() if step > checkpoint_step]
        assert all(at < i for i in later), (checkpoint_step, lines)
    assert lines.index("checkpoint saved (step -1)") < lines.index(
        "normalize started (step 1)"
    )


def _saved_step(line: str) -> str | None:
    found = re.fullmatch(r"checkpoint saved \(step (-?\d+)\)", line)
    return found.group(1) if found else None


def test_the_last_run_status_is_pinned_above_the_list(
    signed_in: Client, purchase_thread: str
) -> None:
    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    pinned = html.index('<p id="run-outcome"')
    assert pinned < html.index('<ol id="run-events"')
    assert re.search(
        r'<p id="run-outcome" class="run-outcome run-outcome--interrupted" '
        r'data-run="[^"]+"><span class="badge badge--interrupted">interrupted</span> '
        r'<span class="run-outcome__text">run paused: waiting for input</span>',
        html,
    )


def test_the_pinned_status_follows_a_long_log_and_each_status_event(
    signed_in: Client, ada: User
) -> None:
    thread = Thread.objects.create(graph="purchase", owner=ada)
    run = Run.objects.create(thread=thread, graph="purchase")
    run_log.append(run, "run.status", {"status": "error", "error": {"error": "E"}})
    RunEvent.objects.bulk_create(
        RunEvent(run=run, thread=thread, kind="custom", payload={"payload": i})
        for i in range(activity.ACTIVITY_LIMIT + 1)
    )

    html = html_of(signed_in.get(f"/threads/{thread.thread_id}/"))
    assert 'class="run-outcome run-outcome--failed"' in html  # read beyond the 50

    row = run_log.append(run, "run.status", {"status": "running"})
    fragment_html = fragment(row)
    assert (
        '<p id="run-outcome" class="run-outcome run-outcome--running"' in fragment_html
    )
    empty = Thread.objects.create(graph="purchase", owner=ada)
    assert '<p id="run-outcome" class="run-outcome" data-run="" hidden>' in html_of(
        signed_in.get(f"/threads/{empty.thread_id}/")
    )


def test_event_classes_are_the_ones_the_stylesheet_styles(ada: User) -> None:
    """Issue 14: the template emitted run-event--runstatus, the CSS styled
    .run-event--run-status: run status lines were never bold."""
    css = (Path(__file__).parents[2] / "static/studio/app.css").read_text()
    styled = set(re.findall(r"\.run-event--([a-z0-9-]+)", css))
    thread = Thread.objects.create(graph="purchase", owner=ada)
    run = Run.objects.create(thread=thread, graph="purchase")
    samples = [
        ("run.status", {"status": "running"}),
        ("run.status", {"status": "success", "interrupted": True}),
        ("run.status", {"status": "error", "error": {"error": "E", "message": "m"}}),
        ("task.start", {"node": "n", "step": 1, "ns": []}),
        ("task.end", {"node": "n", "step": 1, "ns": [], "error": "boom"}),
        ("task.end", {"node": "n", "step": 1, "ns": [], "interrupts": [{"id": "i"}]}),
        ("step", {"step": 1, "ns": []}),
        ("checkpoint", {"step": 1, "ns": []}),
        ("interrupt", {"ns": [], "interrupts": []}),
        ("custom", {"ns": [], "payload": 1}),
    ]
    emitted: dict[str, set[str]] = {}
    for kind, payload in samples:
        row = RunEvent.objects.create(
            run=run, thread=thread, kind=kind, payload=payload
        )
        item = render_to_string(
            "components/_run_event_item.html", {"event": activity.event_view(row)}
        )
        classes = re.search(r'class="([^"]+)"', item).group(1).split()  # type: ignore[union-attr]
        emitted.setdefault(kind, set()).update(
            c.removeprefix("run-event--")
            for c in classes
            if c.startswith("run-event--")
        )

    assert "run-status" in emitted["run.status"]
    assert styled <= set().union(*emitted.values()), styled - set().union(
        *emitted.values()
    )

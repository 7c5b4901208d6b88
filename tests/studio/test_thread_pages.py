"""Thread pages: the list, a thread's timeline and step panel, access and escaping.

Graphs really run: queued with ``runs.start_run`` and executed by a worker on
the SQLite checkpointer (``tests._support.threads``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.models import Thread
from studio.presenters import json_path
from studio.services import threads as thread_service
from tests._support.studio import serve_graphs
from tests._support.threads import (
    GRAPHS,
    XSS,
    checkpoint_id,
    checkpoints,
    drain,
    run_now,
)

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {
    "request_id": "R-1",
    "approval_version": 1,
    "amount_minor": 250_000,
    "vendor": "Acme",
}


_graphs = serve_graphs(GRAPHS)


@pytest.fixture
def notes_thread(ada: User) -> str:
    """A notes thread paused at its review interrupt, with markup in its title."""
    return run_now(ada, "notes", {"title": XSS}).thread_id


@pytest.fixture
def purchase_thread(ada: User) -> str:
    """A purchase waiting for its human review."""
    return run_now(ada, "purchase", REQUEST).thread_id


def html_of(response: Any) -> str:
    return response.content.decode()


def ids(graph: str, thread_id: str) -> list[str]:
    return [checkpoint_id(s) for s in checkpoints(graph, thread_id)]


# -- the threads list -----------------------------------------------------------------


def test_thread_list_needs_a_signed_in_user(client: Client) -> None:
    response = client.get("/threads/")

    assert response.status_code == 302
    assert response.headers["Location"].startswith("/accounts/login/")


def test_thread_list_shows_only_the_users_own_threads(
    signed_in: Client, ada: User
) -> None:
    mine = Thread.objects.create(graph="notes", owner=ada)
    bob = User.objects.create_user("bob")
    theirs = Thread.objects.create(graph="notes", owner=bob)

    html = html_of(signed_in.get("/threads/"))

    assert mine.thread_id in html
    assert theirs.thread_id not in html


def test_thread_list_shows_every_thread_to_a_superuser(client: Client) -> None:
    root = User.objects.create_superuser("root", password="pw")
    bob = User.objects.create_user("bob")
    theirs = Thread.objects.create(graph="notes", owner=bob)
    client.force_login(root)

    assert theirs.thread_id in html_of(client.get("/threads/"))


def test_thread_list_filters_by_graph_and_status(signed_in: Client, ada: User) -> None:
    made = {
        "running": Thread.objects.create(graph="notes", owner=ada, status="busy"),
        "interrupted": Thread.objects.create(
            graph="notes", owner=ada, status="interrupted"
        ),
        "failed": Thread.objects.create(graph="notes", owner=ada, status="error"),
        "done": Thread.objects.create(graph="notes", owner=ada, has_state=True),
        "new": Thread.objects.create(graph="notes", owner=ada),
    }
    other_graph = Thread.objects.create(graph="purchase", owner=ada, has_state=True)

    for status, thread in made.items():
        html = html_of(signed_in.get("/threads/", {"graph": "notes", "status": status}))
        shown = {t for t in made.values() if t.thread_id in html}
        assert shown == {thread}, status
        assert f'<span class="badge badge--{status}">{status}</span>' in html
    html = html_of(signed_in.get("/threads/", {"graph": "purchase"}))
    assert other_graph.thread_id in html
    assert made["done"].thread_id not in html


def test_thread_list_is_newest_first_and_paginated(
    signed_in: Client, ada: User
) -> None:
    made = [Thread.objects.create(graph="notes", owner=ada) for _ in range(30)]
    for i, thread in enumerate(made):
        Thread.objects.filter(pk=thread.pk).update(
            updated_at=thread.updated_at.replace(year=2000 + i)
        )

    first = html_of(signed_in.get("/threads/"))
    second = html_of(signed_in.get("/threads/", {"page": 2}))

    assert first.index(made[-1].thread_id) < first.index(made[-2].thread_id)
    assert made[0].thread_id not in first
    assert made[0].thread_id in second
    assert "Page 2 of 2" in second
    assert 'href="?page=1"' in second


def test_thread_list_htmx_request_gets_only_the_table(
    signed_in: Client, ada: User
) -> None:
    Thread.objects.create(graph="notes", owner=ada)

    html = html_of(signed_in.get("/threads/", HTTP_HX_REQUEST="true"))

    assert html.lstrip().startswith('<div id="thread-table"')
    assert "<html" not in html


def test_thread_list_refuses_an_unknown_status(signed_in: Client) -> None:
    response = signed_in.get("/threads/", {"status": "sleeping"})

    assert response.status_code == 422
    assert "Unknown status" in html_of(response)


# -- the thread page -------------------------------------------------------------------


def test_thread_page_shows_the_timeline_newest_first(
    signed_in: Client, purchase_thread: str
) -> None:
    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    steps = re.findall(r'<span class="timeline__step">step (-?\d+)</span>', html)
    assert steps == ["2", "1", "0", "-1"]
    assert "<code>budget</code> <code>compliance</code>" in html
    assert "<code>normalize</code>" in html
    assert "changed: budget_ok, checks, compliance_ok" in html
    assert '<span class="source source--input">input</span>' in html


def test_thread_page_selects_the_newest_step_and_shows_its_interrupt(
    signed_in: Client, purchase_thread: str
) -> None:
    head = ids("purchase", purchase_thread)[0]

    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    assert (
        f'<li class="timeline__row" data-checkpoint="{head}" aria-current="step">'
        in html
    )
    assert f'id="step-panel" class="panel step-panel" data-checkpoint="{head}"' in html
    assert "Paused: waiting for an answer" in html
    assert "<code>human_review</code> asked" in html
    assert "&quot;purchase_review&quot;" in html  # the payload's kind
    assert "&quot;2,500.00 CNY&quot;" in html


def test_thread_page_marks_interrupted_steps_in_the_timeline(
    signed_in: Client, purchase_thread: str
) -> None:
    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    assert html.count('<span class="badge badge--interrupted">interrupt</span>') == 1


def test_thread_page_embeds_the_graph_drawing_and_the_highlight_data(
    signed_in: Client, purchase_thread: str
) -> None:
    html = html_of(signed_in.get(f"/threads/{purchase_thread}/"))

    assert 'id="graph-drawing"' in html
    assert 'id="node-human_review"' in html.replace(
        "&#45;", "-"
    )  # Graphviz escapes "-"
    assert (
        'data-highlight="{&quot;ran&quot;: [&quot;budget&quot;, &quot;compliance&quot;], '
        "&quot;next&quot;: [&quot;human_review&quot;], "
        "&quot;interrupted&quot;: [&quot;human_review&quot;], "
        "&quot;failed&quot;: []}" in html
    )
    assert '<script src="/static/studio/threads.js" defer></script>' in html


def test_thread_page_has_no_inline_script(signed_in: Client, notes_thread: str) -> None:
    html = html_of(signed_in.get(f"/threads/{notes_thread}/"))

    assert re.findall(r"<script(?![^>]*\ssrc=)[^>]*>", html) == []
    assert " style=" not in html
    assert " onclick=" not in html


def test_step_panel_diff_shows_appended_checks_and_new_flags(
    signed_in: Client, purchase_thread: str
) -> None:
    head = ids("purchase", purchase_thread)[0]

    html = html_of(
        signed_in.get(
            f"/threads/{purchase_thread}/checkpoints/{head}/", HTTP_HX_REQUEST="true"
        )
    )

    assert re.search(
        r"<code>budget_ok</code></li></ol></th>\s*<td data-label=\"Change\"><span class=\"op op--added\">added</span>",
        html,
    )
    assert re.search(
        r"<code>checks</code></li></ol></th>\s*<td data-label=\"Change\"><span class=\"op op--appended\">appended</span>",
        html,
    )
    assert "Written in this step" in html
    assert "<code>budget</code></th>" in html and "<code>compliance</code></th>" in html


def test_checkpoint_htmx_request_gets_the_step_panel_partial(
    signed_in: Client, notes_thread: str
) -> None:
    oldest = ids("notes", notes_thread)[-1]

    response = signed_in.get(
        f"/threads/{notes_thread}/checkpoints/{oldest}/", HTTP_HX_REQUEST="true"
    )

    html = html_of(response)
    assert response.status_code == 200
    assert html.lstrip().startswith(
        f'<section id="step-panel" class="panel step-panel" data-checkpoint="{oldest}"'
    )
    assert "<html" not in html
    assert "Step -1" in html


def test_checkpoint_page_without_javascript_is_the_whole_page(
    signed_in: Client, notes_thread: str
) -> None:
    oldest = ids("notes", notes_thread)[-1]

    html = html_of(signed_in.get(f"/threads/{notes_thread}/checkpoints/{oldest}/"))

    assert "<html" in html
    assert 'id="timeline"' in html
    assert f'data-checkpoint="{oldest}" aria-current="step"' in html
    assert "Step -1" in html


def test_timeline_links_work_without_javascript_and_with_htmx(
    signed_in: Client, notes_thread: str
) -> None:
    head = ids("notes", notes_thread)[0]
    url = f"/threads/{notes_thread}/checkpoints/{head}/"

    html = html_of(signed_in.get(f"/threads/{notes_thread}/"))

    assert (
        f'<a class="timeline__link" href="{url}" hx-get="{url}" hx-target="#step-panel" '
        'hx-swap="outerHTML" hx-push-url="true" '
        'hx-sync="closest .timeline__list:replace">' in html
    )


def test_timeline_pages_with_a_before_cursor(
    signed_in: Client, notes_thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_service, "PAGE_SIZE", 2)
    all_ids = ids("notes", notes_thread)
    assert len(all_ids) == 3

    first = html_of(signed_in.get(f"/threads/{notes_thread}/"))
    older = html_of(
        signed_in.get(
            f"/threads/{notes_thread}/", {"before": all_ids[1]}, HTTP_HX_REQUEST="true"
        )
    )

    assert all_ids[2] not in re.findall(r'data-checkpoint="([^"]+)"', first)
    assert f"?before={all_ids[1]}" in first
    assert older.lstrip().startswith('<section id="timeline"')
    assert re.findall(
        r'<li class="timeline__row" data-checkpoint="([^"]+)"', older
    ) == [all_ids[2]]
    assert "Newest checkpoints" in older


def test_timeline_polls_while_a_run_is_queued(
    signed_in: Client, ada: User, notes_thread: str
) -> None:
    from studio.services.runs import start_run  # noqa: PLC0415 - only this test queues

    start_run(
        graph="notes", user=ada, thread_id=notes_thread, command={"resume": "yes"}
    )

    html = html_of(signed_in.get(f"/threads/{notes_thread}/"))

    assert 'hx-trigger="every 2s"' in html
    assert "run in progress" in html


def test_finished_thread_page_does_not_poll(
    signed_in: Client, notes_thread: str
) -> None:
    assert 'hx-trigger="every 2s"' not in html_of(
        signed_in.get(f"/threads/{notes_thread}/")
    )


def test_failed_task_shows_its_error(signed_in: Client, ada: User) -> None:
    run = run_now(ada, "broken", {"n": 0})
    head = ids("broken", run.thread_id)[0]

    html = html_of(signed_in.get(f"/threads/{run.thread_id}/checkpoints/{head}/"))

    assert '<span class="badge badge--failed">error</span>' in html
    assert "second node exploded" in html
    assert "&quot;failed&quot;: [&quot;second&quot;]" in html


def test_thread_without_checkpoints_shows_an_empty_state(
    signed_in: Client, ada: User
) -> None:
    thread = Thread.objects.create(graph="notes", owner=ada)

    html = html_of(signed_in.get(f"/threads/{thread.thread_id}/"))

    assert "No checkpoints yet" in html


def test_step_waterfall_in_the_panel_and_on_its_page(
    signed_in: Client, purchase_thread: str
) -> None:
    head = ids("purchase", purchase_thread)[0]

    panel = html_of(
        signed_in.get(
            f"/threads/{purchase_thread}/checkpoints/{head}/", HTTP_HX_REQUEST="true"
        )
    )
    page = html_of(signed_in.get(f"/threads/{purchase_thread}/waterfall/"))

    assert "Where step 2 spent its time" in panel
    assert re.search(
        r'<th scope="row"><code>budget</code></th>\s*<td>[\d.]+ ms</td>', panel
    )
    assert "checkpoint save" in panel
    assert '<rect class="bar__run"' in panel
    assert page.count('class="panel waterfall-step"') >= 3
    assert "<code>normalize</code>" in page


# -- access and unknown ids ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/threads/{t}/",
        "/threads/{t}/checkpoints/{c}/",
        "/threads/{t}/checkpoints/{c}/fork/",
        "/threads/{t}/checkpoints/{c}/blame/?key=title",
        "/threads/{t}/compare/?a={c}&b={c}",
        "/threads/{t}/waterfall/",
    ],
)
def test_another_users_thread_is_not_found(
    client: Client, notes_thread: str, path: str
) -> None:
    head = ids("notes", notes_thread)[0]
    client.force_login(User.objects.create_user("mallory", password="pw"))

    response = client.get(path.format(t=notes_thread, c=head))

    assert response.status_code == 404
    assert XSS not in html_of(response)
    assert "&lt;script&gt;" not in html_of(response)


@pytest.mark.parametrize("action", ["replay", "fork"])
def test_another_users_thread_refuses_actions_with_404(
    client: Client, notes_thread: str, action: str
) -> None:
    head = ids("notes", notes_thread)[0]
    client.force_login(User.objects.create_user("mallory", password="pw"))

    response = client.post(
        f"/threads/{notes_thread}/checkpoints/{head}/{action}/",
        {"as_node": "draft", "state.title": "x"},
    )

    assert response.status_code == 404
    assert len(ids("notes", notes_thread)) == 3


@pytest.mark.parametrize(
    "path",
    [
        "/threads/no-such-thread/",
        "/threads/{t}/checkpoints/1f000000-0000-6000-8000-000000000000/",
        "/threads/{t}/checkpoints/not%20an%20id/",
        "/threads/{t}/checkpoints/{c}/blame/?key=no_such_key",
        "/threads/{t}/compare/?a={c}&b=1f000000-0000-6000-8000-000000000000",
        "/threads/{t}/waterfall/?run=no-such-run",
    ],
)
def test_unknown_ids_are_not_found(
    signed_in: Client, notes_thread: str, path: str
) -> None:
    head = ids("notes", notes_thread)[0]

    response = signed_in.get(path.format(t=notes_thread, c=head))

    assert response.status_code == 404


def test_unknown_checkpoint_htmx_request_is_a_404_flash(
    signed_in: Client, notes_thread: str
) -> None:
    response = signed_in.get(
        f"/threads/{notes_thread}/checkpoints/1f000000-0000-6000-8000-000000000000/",
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 404
    assert response.headers["HX-Retarget"] == "#flash"


# -- untrusted state values -----------------------------------------------------------------


def test_script_in_state_renders_as_text_everywhere(
    signed_in: Client, notes_thread: str
) -> None:
    all_ids = ids("notes", notes_thread)
    head, oldest = all_ids[0], all_ids[-1]
    pages = [
        f"/threads/{notes_thread}/",
        f"/threads/{notes_thread}/checkpoints/{head}/",
        f"/threads/{notes_thread}/checkpoints/{oldest}/",
        f"/threads/{notes_thread}/checkpoints/{head}/blame/?key=title",
        f"/threads/{notes_thread}/checkpoints/{head}/blame/?key=log",
        f"/threads/{notes_thread}/compare/?a={oldest}&b={head}",
        f"/threads/{notes_thread}/checkpoints/{head}/fork/",
    ]
    for path in pages:
        html = html_of(signed_in.get(path))
        assert XSS not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
        assert re.findall(r"<script(?![^>]*\ssrc=)[^>]*>", html) == [], path


# -- one branch at a time (issue 14) ----------------------------------------------------------


def rows_of(html: str) -> list[str]:
    return re.findall(r'<li class="timeline__row[^"]*" data-checkpoint="([^"]+)"', html)


@pytest.fixture
def replayed(ada: User, signed_in: Client) -> dict[str, Any]:
    """A research thread replayed from its plan step: main and branch 1."""
    thread_id = run_now(ada, "research", {"question": "pricing"}).thread_id
    main = [
        checkpoint_id(s) for s in checkpoints("research", thread_id)
    ]  # newest first
    plan = main[1 + 1]  # write, research, plan, start, input
    signed_in.post(f"/threads/{thread_id}/checkpoints/{plan}/replay/")
    drain()
    everything = checkpoints("research", thread_id)
    branch = [checkpoint_id(s) for s in everything if checkpoint_id(s) not in main]
    return {"thread_id": thread_id, "main": main, "branch": branch, "plan": plan}


def test_after_a_replay_the_timeline_shows_the_new_branch_alone(
    signed_in: Client, replayed: dict[str, Any]
) -> None:
    """Issue 14: after a replay the main line's and the branch's steps were
    interleaved in one timeline."""
    thread_id, main, branch = (replayed[k] for k in ("thread_id", "main", "branch"))

    html = html_of(signed_in.get(f"/threads/{thread_id}/"))

    shown = rows_of(html)
    assert shown == branch + main[2:]  # the branch, then main's steps before the fork
    assert not set(main[:2]) & set(shown)  # main's own research and write: not here
    snapshots = {checkpoint_id(s): s for s in checkpoints("research", thread_id)}
    for child, parent in zip(shown, shown[1:], strict=False):
        assert snapshots[child].parent_config["configurable"]["checkpoint_id"] == parent
    steps = re.findall(r'<span class="timeline__step">step (-?\d+)</span>', html)
    assert steps == ["3", "2", "1", "1", "0", "-1"]  # the branch's own numbering
    assert html.count("timeline__row--inherited") == 3
    assert "main's steps, before the fork" in html
    assert re.search(
        r"Showing <strong>branch 1</strong>, steps numbered along its own line: "
        r"forked from main at step 1",
        html,
    )


def test_the_branch_switcher_shows_the_main_line_on_its_own(
    signed_in: Client, replayed: dict[str, Any]
) -> None:
    thread_id, main, branch = (replayed[k] for k in ("thread_id", "main", "branch"))
    root = main[-1]

    html = html_of(signed_in.get(f"/threads/{thread_id}/", {"branch": root}))

    assert rows_of(html) == main
    assert re.search(
        rf'<option value="{root}" selected>main</option>\s*'
        rf'<option value="{branch[-1]}">branch 1 \(from main, step 1\)</option>',
        html,
    )
    assert f'data-refresh-url="/threads/{thread_id}/?branch={root}"' in html
    assert f'href="/threads/{thread_id}/checkpoints/{main[0]}/?branch={root}"' in html
    assert re.search(r'class="tree__label" href="[^"]+\?branch=' + root, html)
    partial = html_of(
        signed_in.get(
            f"/threads/{thread_id}/", {"branch": root}, HTTP_HX_REQUEST="true"
        )
    )
    assert partial.lstrip().startswith('<section id="timeline"')
    assert rows_of(partial) == main


def test_a_step_of_a_branch_opens_with_that_branchs_timeline(
    signed_in: Client, replayed: dict[str, Any]
) -> None:
    thread_id, main = replayed["thread_id"], replayed["main"]

    html = html_of(signed_in.get(f"/threads/{thread_id}/checkpoints/{main[0]}/"))

    assert rows_of(html) == main
    assert f'data-checkpoint="{main[0]}" aria-current="step"' in html


def test_older_pages_follow_the_same_branch(
    signed_in: Client, replayed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_service, "PAGE_SIZE", 2)
    thread_id, main, branch = (replayed[k] for k in ("thread_id", "main", "branch"))
    line = branch + main[2:]

    first = html_of(signed_in.get(f"/threads/{thread_id}/"))
    cursor = re.search(r'\?before=([^"&]+)&amp;branch=([^"]+)"', first)
    assert cursor is not None
    second = html_of(
        signed_in.get(
            f"/threads/{thread_id}/",
            {"before": cursor.group(1), "branch": cursor.group(2)},
        )
    )

    assert rows_of(first) == line[:2]
    assert rows_of(second) == line[2:4]


def test_a_thread_without_branches_has_no_switcher(
    signed_in: Client, notes_thread: str
) -> None:
    html = html_of(signed_in.get(f"/threads/{notes_thread}/"))

    assert 'class="branch-switcher"' not in html
    assert rows_of(html) == ids("notes", notes_thread)


# -- blame without a key, values, breadcrumbs (issue 14) ------------------------------------


def test_blame_without_a_key_shows_the_key_picker(
    signed_in: Client, notes_thread: str
) -> None:
    """Issue 14: it answered 404 "The state has no key ''."."""
    head = ids("notes", notes_thread)[0]

    response = signed_in.get(f"/threads/{notes_thread}/checkpoints/{head}/blame/")

    html = html_of(response)
    assert response.status_code == 200
    assert "<h1>Who wrote which key?</h1>" in html
    assert '<option value="" selected disabled>Choose a key…</option>' in html
    assert '<a href="?key=title"><code>title</code></a>' in html
    assert "<title>Blame a key · Graph Studio</title>" in html


def test_diff_paths_are_breadcrumbs_and_values_open_as_json(
    signed_in: Client, notes_thread: str
) -> None:
    draft = ids("notes", notes_thread)[0]

    html = html_of(
        signed_in.get(
            f"/threads/{notes_thread}/checkpoints/{draft}/", HTTP_HX_REQUEST="true"
        )
    )

    path = "$.messages[?(@.id==&#x27;m1&#x27;)]"
    assert (
        f'<ol class="json-crumbs" title="{path}" aria-label="Path {path}">'
        "<li><code>messages</code></li><li><code>id=m1</code></li></ol>" in html
    )
    assert f'data-value-open data-path="{path}"' in html
    assert re.search(
        r'<button type="button" class="value__open" data-value-open '
        r'data-path="\$\.tags" [^>]*hidden>',
        html,
    )
    page = html_of(signed_in.get(f"/threads/{notes_thread}/"))
    assert '<dialog id="value-dialog" class="value-dialog"' in page
    assert '<script src="/static/studio/values.js" defer></script>' in page


def test_json_paths_quote_what_is_not_a_name() -> None:
    assert json_path(["items", 0, "qty"]) == "$.items[0].qty"
    assert json_path(["a.b", "it's"]) == "$['a.b']['it\\'s']"
    assert json_path(["messages", ("id", "m1")]) == "$.messages[?(@.id=='m1')]"

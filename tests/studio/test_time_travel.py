"""Time travel from the thread page: replay from a checkpoint, fork with edits."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.models import AuditEntry, Run
from studio.services import runs
from studio.services.saver import get_saver
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
    "request_id": "R-9",
    "approval_version": 1,
    "amount_minor": 250_000,
    "vendor": "Acme",
}


_graphs = serve_graphs(GRAPHS)


def html_of(response: Any) -> str:
    return response.content.decode()


def history(graph: str, thread_id: str) -> list[Any]:
    return checkpoints(graph, thread_id)


def by_step(graph: str, thread_id: str, step: int) -> str:
    """The id of the oldest checkpoint at ``step`` (the main line's)."""
    found = [s for s in history(graph, thread_id) if s.metadata["step"] == step]
    return checkpoint_id(found[-1])


# -- replay -------------------------------------------------------------------------------


def test_replay_queues_a_run_from_the_checkpoint_and_updates_the_page(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "research", {"question": "pricing"}).thread_id
    plan = by_step("research", thread_id, 1)

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{plan}/replay/", HTTP_HX_REQUEST="true"
    )

    html = html_of(response)
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="thread-body"')
    assert (
        '<div id="flash" class="flash" role="status" aria-live="polite" hx-swap-oob="true">'
        in html
    )
    assert "Queued a replay from step 1" in html
    assert 'hx-trigger="every 2s"' in html  # the timeline follows the queued run
    run = Run.objects.get(thread_id=thread_id, checkpoint_id=plan)
    assert run.input is None
    assert run.multitask_strategy == Run.Strategy.REJECT
    assert (
        AuditEntry.objects.filter(action="thread.replay", thread_id=thread_id).count()
        == 1
    )


def test_replay_runs_a_new_branch_shown_in_the_fork_tree(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "research", {"question": "pricing"}).thread_id
    plan = by_step("research", thread_id, 1)
    before = len(history("research", thread_id))
    signed_in.post(f"/threads/{thread_id}/checkpoints/{plan}/replay/")

    drain()

    snapshots = history("research", thread_id)
    fork = next(s for s in snapshots if s.metadata["source"] == "fork")
    assert len(snapshots) == before + 3  # the fork copy, research, write
    assert fork.parent_config["configurable"]["checkpoint_id"] == plan
    html = html_of(signed_in.get(f"/threads/{thread_id}/"))
    assert 'id="fork-tree"' in html
    assert re.search(
        r'class="tree__label"[^>]*>branch 1</a>\s*<span class="tree__how">replay by ada from',
        html,
    )
    assert "compare with main" in html
    assert '<span class="badge">branch</span>' in html


def test_replay_without_javascript_redirects_with_a_message(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "research", {"question": "pricing"}).thread_id
    plan = by_step("research", thread_id, 1)

    response = signed_in.post(f"/threads/{thread_id}/checkpoints/{plan}/replay/")
    page = signed_in.get(response.headers["Location"])

    assert response.status_code == 302
    assert response.headers["Location"] == f"/threads/{thread_id}/checkpoints/{plan}/"
    assert "Queued a replay from step 1" in html_of(page)


def test_replay_of_a_busy_thread_is_a_409_flash(signed_in: Client, ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])
    runs.start_run(
        graph="notes", user=ada, thread_id=thread_id, command={"resume": "y"}
    )

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{head}/replay/", HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 409
    assert response.headers["HX-Retarget"] == "#flash"
    assert "pending or running" in html_of(response)
    assert Run.objects.filter(thread_id=thread_id).count() == 2


def test_replay_needs_a_csrf_token(ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)

    response = client.post(f"/threads/{thread_id}/checkpoints/{head}/replay/")

    assert response.status_code == 403
    assert Run.objects.filter(thread_id=thread_id).count() == 1


def test_replay_is_post_only(signed_in: Client, ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "t"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])

    assert (
        signed_in.get(f"/threads/{thread_id}/checkpoints/{head}/replay/").status_code
        == 405
    )


def test_final_checkpoint_offers_no_replay(signed_in: Client, ada: User) -> None:
    thread_id = run_now(ada, "research", {"question": "pricing"}).thread_id

    html = html_of(signed_in.get(f"/threads/{thread_id}/"))

    assert "Replay from here" not in html
    assert "Nothing runs after this checkpoint." in html


# -- fork with edits: the form -----------------------------------------------------------------


def test_fork_form_is_prefilled_and_swaps_into_the_step_panel(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello", "count": 2}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])

    html = html_of(
        signed_in.get(
            f"/threads/{thread_id}/checkpoints/{head}/fork/", HTTP_HX_REQUEST="true"
        )
    )

    assert html.lstrip().startswith(
        '<section id="step-panel" class="panel step-panel step-panel--fork"'
    )
    assert (
        '<input type="text" id="fork-title" name="state.title" value="hello">' in html
    )
    assert (
        '<input type="number" id="fork-count" name="state.count" value="3" step="1">'
        in html
    )
    assert '<option value="draft" selected>draft</option>' in html
    # what "Write as node" means, next to it (issue 14)
    assert 'name="as_node" aria-describedby="fork-as-node-hint"' in html
    assert (
        '<p class="field__hint" id="fork-as-node-hint">Your edits are saved as if this '
        "node had returned them" in html
    )
    assert "Items to append" in html  # log: operator.add
    assert "Messages to add" in html  # messages: add_messages
    assert 'name="csrfmiddlewaretoken"' in html


def test_fork_form_without_javascript_is_a_whole_page(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])

    html = html_of(signed_in.get(f"/threads/{thread_id}/checkpoints/{head}/fork/"))

    assert "<html" in html
    assert 'id="timeline"' in html
    assert "Fork step 1 with edits" in html


# -- fork with edits: invalid ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "where", "message"),
    [
        ({"state.count": "many"}, "count", "Enter a whole number."),
        ({"state.count": "2.5"}, "count", "Enter a whole number."),
        ({"state.log": '"not a list"'}, "log", "Input should be a valid array"),
        ({"state.log": "[1, 2]"}, "log", "Input should be a valid string"),
        ({"state.tags": "{broken"}, "tags", "Not valid JSON"),
        # before: RecursionError (500), and NaN wrote the checkpoint before the
        # audit row refused it, so each refused request left a checkpoint behind
        ({"state.tags": "[" * 10_000 + "]" * 10_000}, "tags", "nested more than 64"),
        ({"state.tags": '{"a": NaN}'}, "tags", "NaN is not a JSON number"),
        ({"state.tags": '{"a": -Infinity}'}, "tags", "-Infinity is not a JSON"),
        ({"state.tags": '{"a": -1e400}'}, "tags", "-1e400 is too large"),
        ({"state.tags": '{"a": 1, "a": 2}'}, "tags", "appears more than once"),
    ],
)
def test_invalid_fork_edit_shows_errors_next_to_the_field_and_creates_nothing(
    signed_in: Client, ada: User, fields: dict[str, str], where: str, message: str
) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{head}/fork/",
        {"as_node": "draft", **fields},
        HTTP_HX_REQUEST="true",
    )

    html = html_of(response)
    assert response.status_code == 422
    assert html.lstrip().startswith('<section id="step-panel"')
    errors = re.search(
        rf'<div class="field__errors" id="fork-{where}-errors">(.*?)</div>', html, re.S
    )
    assert errors is not None and message in errors.group(1)
    assert f'aria-describedby="fork-{where}-errors"' in html
    assert len(history("notes", thread_id)) == 3
    assert not AuditEntry.objects.filter(action="thread.fork").exists()


def test_fork_with_nothing_changed_is_refused(signed_in: Client, ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])
    form = html_of(signed_in.get(f"/threads/{thread_id}/checkpoints/{head}/fork/"))
    posted = dict(re.findall(r'name="(state\.\w+)" value="([^"]*)"', form))

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{head}/fork/", {"as_node": "draft", **posted}
    )

    assert response.status_code == 422
    assert "Nothing to change" in html_of(response)
    assert len(history("notes", thread_id)) == 3


def test_fork_with_an_unknown_node_or_field_is_refused(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{head}/fork/",
        {"as_node": "nope", "state.title": "x", "state.sneaky": "1", "other": "2"},
    )

    html = html_of(response)
    assert response.status_code == 422
    assert "Choose the node to write as" in html
    assert "Unknown field &#x27;state.sneaky&#x27;." in html
    assert "Unknown field &#x27;other&#x27;." in html
    assert len(history("notes", thread_id)) == 3


def test_fork_refused_by_a_pydantic_validator_shows_it_on_the_field(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "ledger", {"balance": 5}).thread_id
    head = checkpoint_id(history("ledger", thread_id)[0])

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{head}/fork/",
        {"as_node": "credit", "state.balance": "-3"},
        HTTP_HX_REQUEST="true",
    )

    html = html_of(response)
    assert response.status_code == 422
    assert re.search(
        r'id="fork-balance-errors"><p>Value error, the balance cannot go below zero</p>',
        html,
    )
    assert len(history("ledger", thread_id)) == 4


def test_fork_edit_with_markup_in_errors_and_values_is_escaped(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "notes", {"title": XSS}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{head}/fork/",
        {"as_node": "draft", "state.title": XSS, "state.count": XSS},
    )

    html = html_of(response)
    assert response.status_code == 422
    assert XSS not in html
    assert 'value="&lt;script&gt;alert(1)&lt;/script&gt;"' in html


# -- fork with edits: valid ---------------------------------------------------------------------


def test_valid_fork_creates_a_branch_and_updates_the_page(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    draft = by_step("notes", thread_id, 1)

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{draft}/fork/",
        {
            "as_node": "draft",
            "state.title": "edited title",
            "state.count": "5",
            "state.log": '["edited"]',
        },
        HTTP_HX_REQUEST="true",
    )

    html = html_of(response)
    assert response.status_code == 200
    assert response.headers["HX-Retarget"] == "#thread-body"
    assert response.headers["HX-Reswap"] == "outerHTML"
    assert html.lstrip().startswith('<div id="thread-body"')
    assert "Created a branch at step 2." in html
    head = history("notes", thread_id)[0]
    assert head.metadata["source"] == "update"
    assert head.parent_config["configurable"]["checkpoint_id"] == draft
    assert head.values["title"] == "edited title"
    assert head.values["count"] == 5
    assert head.values["log"] == ["draft:hello", "edited"]  # appended by the reducer
    assert head.next == ("review",)
    assert (
        'id="fork-tree"' not in html
    )  # edited at the head: the line goes on, no branch
    audit = AuditEntry.objects.get(action="thread.fork", thread_id=thread_id)
    assert audit.detail["from"] == draft
    assert audit.detail["keys"] == ["count", "log", "title"]
    assert not Run.objects.filter(
        thread_id=thread_id, checkpoint_id=checkpoint_id(head)
    ).exists()


def test_fork_of_a_past_checkpoint_is_a_branch_in_the_tree(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    first = by_step("notes", thread_id, 0)

    signed_in.post(
        f"/threads/{thread_id}/checkpoints/{first}/fork/",
        {"as_node": "draft", "state.title": "other"},
    )

    html = html_of(signed_in.get(f"/threads/{thread_id}/"))
    assert re.search(
        r'class="tree__label"[^>]*>branch 1</a>\s*<span class="tree__how">fork with edits by ada from',
        html,
    )
    assert re.search(r"from\s*<a href=\"[^\"]+\">step 0</a>", html)


def test_fork_with_run_continues_from_the_new_checkpoint(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "open_purchase", REQUEST).thread_id
    normalized = by_step("open_purchase", thread_id, 1)

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{normalized}/fork/",
        {"as_node": "normalize", "state.amount_minor": "20000000", "run": "on"},
    )
    assert response.status_code == 302
    drain()

    head = history("open_purchase", thread_id)[0]
    assert head.values["amount_minor"] == 20_000_000
    assert head.values["budget_ok"] is False
    assert head.next == ("human_review",)
    assert head.tasks[0].interrupts[0].value["checks_passed"] is False
    html = html_of(signed_in.get(f"/threads/{thread_id}/"))
    assert "fork with edits by ada" in html
    panel = html_of(
        signed_in.get(
            f"/threads/{thread_id}/checkpoints/{checkpoint_id(head)}/",
            HTTP_HX_REQUEST="true",
        )
    )
    assert re.search(
        r"<code>budget_ok</code></li></ol></th>\s*<td data-label=\"Change\"><span class=\"op op--added\">added</span>",
        panel,
    )


def test_fork_of_a_busy_thread_is_a_409(signed_in: Client, ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])
    runs.start_run(
        graph="notes", user=ada, thread_id=thread_id, command={"resume": "y"}
    )

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/{head}/fork/",
        {"as_node": "draft", "state.title": "x"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 409
    assert response.headers["HX-Retarget"] == "#flash"
    assert len(history("notes", thread_id)) == 3


def test_fork_of_an_unknown_checkpoint_is_a_404(signed_in: Client, ada: User) -> None:
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id

    response = signed_in.post(
        f"/threads/{thread_id}/checkpoints/1f000000-0000-6000-8000-000000000000/fork/",
        {"as_node": "draft", "state.title": "x"},
    )

    assert response.status_code == 404


def test_fork_while_another_writer_holds_the_thread_is_409_and_writes_nothing(
    signed_in: Client, ada: User
) -> None:
    """The run table can be quiet while a run holds the thread (claimed since the
    check, or a program using the same checkpoint database): the engine's lease
    refuses the write, and the page says busy instead of a raw engine error."""
    thread_id = run_now(ada, "notes", {"title": "hello"}).thread_id
    head = checkpoint_id(history("notes", thread_id)[0])
    saver = get_saver()
    saver.acquire_lease(thread_id, "", "another-process", 30)
    try:
        response = signed_in.post(
            f"/threads/{thread_id}/checkpoints/{head}/fork/",
            {"as_node": "draft", "state.title": "changed"},
            HTTP_HX_REQUEST="true",
        )
    finally:
        saver.release_lease(thread_id, "", "another-process")

    assert response.status_code == 409
    assert "pending or running" in html_of(response)
    assert len(history("notes", thread_id)) == 3
    assert not AuditEntry.objects.filter(action="thread.fork").exists()

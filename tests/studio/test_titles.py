"""Thread titles (studio.titles), the threads list's search, and where titles show."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.models import Thread
from studio.services import runs
from studio.titles import MAX_LENGTH, next_title, title_from_input
from tests._support.studio import serve_graphs
from tests._support.threads import XSS, run_now

GRAPHS = {
    "purchase": "studio.demo_graphs.purchase:build",
    "tool_agent": "studio.demo_graphs.tool_agent:build",
    "research": "studio.demo_graphs.research:build",
    "trip": "tests.studio.titled_graphs_for_tests:trip",
    "bad_trip": "tests.studio.badly_titled_graphs_for_tests:trip",
}
REQUEST = {
    "request_id": "PO-77",
    "approval_version": 1,
    "amount_minor": 250_050,
    "vendor": "Acme Office Supply",
}

_graphs = serve_graphs(GRAPHS)


# -- the title of an input (pure apart from reading the declaration) ---------------------


def test_a_purchase_is_titled_by_its_request_vendor_and_amount_in_cny(db: None) -> None:
    assert (
        next_title("purchase", REQUEST) == "PO-77 · Acme Office Supply · 2,500.50 CNY"
    )
    assert next_title("purchase", {**REQUEST, "vendor": ""}) == "PO-77 · 2,500.50 CNY"


def test_a_format_string_declaration_leaves_missing_keys_empty(db: None) -> None:
    assert (
        next_title("trip", {"city": "Oslo", "nights": 3}) == "Trip to Oslo · 3 nights"
    )


def test_a_failing_declaration_falls_back_to_the_input(db: None) -> None:
    assert next_title("bad_trip", {"city": "Oslo"}) == "city: Oslo"


def test_a_message_graph_is_titled_by_its_first_user_message() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "  What is\n order A-1001?  "},
        {"role": "user", "content": "And B?"},
    ]
    assert title_from_input({"messages": messages}) == "What is order A-1001?"
    blocks = [{"type": "human", "content": [{"type": "text", "text": "Hi there"}]}]
    assert title_from_input({"messages": blocks}) == "Hi there"


def test_other_inputs_are_titled_by_their_first_short_values() -> None:
    assert (
        title_from_input({"question": "Which pricing?", "deep": True, "n": 3, "x": {}})
        == "question: Which pricing? · n: 3"
    )
    assert title_from_input(None) == ""
    assert len(title_from_input({"q": "word " * 100})) <= MAX_LENGTH


def test_a_declared_title_follows_each_input_others_keep_the_first(db: None) -> None:
    changed = {**REQUEST, "amount_minor": 99_00}
    assert (
        next_title("purchase", changed, "old")
        == "PO-77 · Acme Office Supply · 99.00 CNY"
    )
    second = {"messages": [{"role": "user", "content": "second"}]}
    assert next_title("tool_agent", second, "first") == "first"


# -- stored when a run starts --------------------------------------------------------------


def test_starting_a_run_stores_the_title_and_a_changed_input_renames_it(
    ada: User,
) -> None:
    run = runs.start_run(graph="purchase", user=ada, input=REQUEST)
    thread = Thread.objects.get(pk=run.thread_id)
    assert thread.title == "PO-77 · Acme Office Supply · 2,500.50 CNY"

    Thread.objects.filter(pk=thread.pk).update(status=Thread.Status.INTERRUPTED)
    runs.start_run(
        graph="purchase",
        user=ada,
        thread_id=thread.thread_id,
        input={**REQUEST, "approval_version": 2, "amount_minor": 100},
    )
    thread.refresh_from_db()
    assert thread.title == "PO-77 · Acme Office Supply · 1.00 CNY"


def test_a_conversation_keeps_its_first_message_as_title(ada: User) -> None:
    first = {"messages": [{"role": "user", "content": "What is order A-1001?"}]}
    run = runs.start_run(graph="tool_agent", user=ada, input=first)
    runs.start_run(
        graph="tool_agent",
        user=ada,
        thread_id=run.thread_id,
        input={"messages": [{"role": "user", "content": "thanks"}]},
    )

    assert Thread.objects.get(pk=run.thread_id).title == "What is order A-1001?"


def test_a_failing_title_never_stops_a_run(ada: User) -> None:
    run = runs.start_run(graph="bad_trip", user=ada, input={"city": "Oslo"})

    assert Thread.objects.get(pk=run.thread_id).title == "city: Oslo"


# -- shown: the threads list, its search, the thread page ------------------------------


@pytest.fixture
def made(ada: User) -> dict[str, Thread]:
    bob = User.objects.create_user("bob")
    return {
        "purchase": Thread.objects.create(
            graph="purchase",
            owner=ada,
            title="PO-77 · Acme Office Supply · 2,500.50 CNY",
            metadata={"request_id": "PO-77", "kind": "purchase"},
        ),
        "chat": Thread.objects.create(
            graph="tool_agent", owner=ada, title="What is order A-1001?"
        ),
        "untitled": Thread.objects.create(graph="research", owner=ada),
        "xss": Thread.objects.create(graph="research", owner=ada, title=XSS),
        "bobs": Thread.objects.create(
            graph="purchase", owner=bob, title="PO-77 lookalike"
        ),
    }


def listed(client: Client, **query: str) -> list[str]:
    html = client.get("/threads/", query).content.decode()
    return re.findall(r'<a class="thread-table__title" href="/threads/([^/]+)/">', html)


def test_the_list_shows_titles_and_a_readable_name_for_untitled_threads(
    signed_in: Client, made: dict[str, Thread]
) -> None:
    html = signed_in.get("/threads/").content.decode()

    assert ">PO-77 · Acme Office Supply · 2,500.50 CNY</a>" in html
    untitled = made["untitled"]
    assert f">research · {untitled.thread_id[:8]}</a>" in html
    assert f'<code class="thread-table__id">{untitled.thread_id}</code>' in html
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;</a>" in html


def test_search_matches_titles_ids_and_metadata_in_any_case_every_word(
    signed_in: Client, made: dict[str, Thread]
) -> None:
    ids = {name: thread.thread_id for name, thread in made.items()}

    assert listed(signed_in, q="acme") == [ids["purchase"]]
    assert listed(signed_in, q="a-1001") == [ids["chat"]]
    assert listed(signed_in, q=ids["untitled"][:13].upper()) == [ids["untitled"]]
    assert listed(signed_in, q="kind") == [ids["purchase"]]  # metadata
    assert listed(signed_in, q="po-77 cny") == [ids["purchase"]]  # every word
    assert listed(signed_in, q="po-77 nothing") == []
    assert set(listed(signed_in, q="  ")) == {
        ids[n] for n in ("purchase", "chat", "untitled", "xss")
    }
    html = signed_in.get("/threads/", {"q": "zzz"}).content.decode()
    assert "No threads match" in html
    assert 'value="zzz"' in html


def test_search_keeps_to_the_users_threads_and_combines_with_filters(
    signed_in: Client, made: dict[str, Thread]
) -> None:
    assert made["bobs"].thread_id not in listed(signed_in, q="lookalike")
    assert listed(signed_in, q="po-77", graph="research") == []
    html = signed_in.get(
        "/threads/", {"q": "acme", "page": 1}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert html.lstrip().startswith('<div id="thread-table"')
    assert "matching “acme”" in html


def test_search_words_are_text_not_markup(signed_in: Client, ada: User) -> None:
    html = signed_in.get("/threads/", {"q": XSS}).content.decode()

    assert "<script>alert(1)" not in html
    assert 'value="&lt;script&gt;alert(1)&lt;/script&gt;"' in html


@pytest.mark.django_db(transaction=True)
def test_the_thread_page_has_the_title_in_its_header_and_tab(
    signed_in: Client, ada: User
) -> None:
    thread_id = run_now(ada, "trip", {"city": XSS, "nights": 2}).thread_id

    html = signed_in.get(f"/threads/{thread_id}/").content.decode()

    title = "Trip to &lt;script&gt;alert(1)&lt;/script&gt; · 2 nights"
    assert f"<title>{title} · Graph Studio</title>" in html
    assert f'<h1 class="thread-header__title">{title}</h1>' in html
    assert f'<code class="thread-header__id">{thread_id}</code>' in html
    graph_page = signed_in.get("/graphs/trip/").content.decode()
    assert f'class="thread-list__title">{title}</a>' in graph_page

"""The graphs list, the graph page and its downloads: rendering, permissions, errors."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from studio.models import Thread
from studio.services import graph_svg
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db

GRAPHS = {
    "purchase": "studio.demo_graphs.purchase:build",
    "research": "studio.demo_graphs.research:build",
    "tool_agent": "studio.demo_graphs.tool_agent:build",
    "escaping": "tests.studio.ui_graphs_for_tests:escaping",
    "markers": "tests.studio.ui_graphs_for_tests:markers",
    "broken": "tests.studio.ui_graphs_for_tests:broken",
}
PAGES = [
    "/",
    "/graphs/purchase/",
    "/graphs/research/",
    "/graphs/tool_agent/",
    "/graphs/markers/",
    "/graphs/purchase/graph.svg",
    "/graphs/purchase/graph.mmd",
]


_graphs = serve_graphs(GRAPHS)


@pytest.mark.parametrize("path", PAGES)
def test_every_graph_page_renders_for_a_signed_in_user(
    signed_in: Client, path: str
) -> None:
    assert signed_in.get(path).status_code == 200


@pytest.mark.parametrize("path", [*PAGES, "/graphs/nope/"])
def test_anonymous_users_are_sent_to_sign_in(client: Client, path: str) -> None:
    response = client.get(path)

    assert response.status_code == 302
    assert response.headers["Location"] == f"/accounts/login/?next={path}"


def test_anonymous_post_to_start_a_run_is_sent_to_sign_in(client: Client) -> None:
    response = client.post("/graphs/purchase/runs/", {"input": "{}"})

    assert response.status_code == 302
    assert response.headers["Location"].startswith("/accounts/login/")


# -- graphs list -----------------------------------------------------------------


def test_index_links_each_graph_with_its_description_and_node_count(
    signed_in: Client,
) -> None:
    html = signed_in.get("/").content.decode()

    cards = re.findall(
        r'<h2 class="card__title"><a href="([^"]+)">(\w+)</a></h2>', html
    )
    assert cards == [(f"/graphs/{name}/", name) for name in sorted(GRAPHS)]
    assert "Purchase approval: normalize -&gt; (budget || compliance)" in html
    assert "6 nodes" in html  # purchase, START and END not counted
    assert "Research fan-out: a planner Sends one task per topic" in html


def test_index_shows_a_broken_entry_as_unavailable_not_an_error(
    signed_in: Client,
) -> None:
    response = signed_in.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "unavailable" in html
    assert "broken() failed: RuntimeError(&#x27;no model configured&#x27;)" in html


@override_settings(STUDIO_GRAPHS={})
def test_index_with_no_graphs_shows_the_empty_state(signed_in: Client) -> None:
    assert "No graphs registered yet" in signed_in.get("/").content.decode()


# -- graph page ------------------------------------------------------------------


def test_graph_page_shows_the_svg_inline_and_download_links(signed_in: Client) -> None:
    html = signed_in.get("/graphs/purchase/").content.decode()

    assert "<title>purchase · Graph Studio</title>" in html
    assert '<figure id="graph-svg" class="graph-canvas"' in html
    assert '<g id="node&#45;human_review" class="node node&#45;&#45;step">' in html
    assert 'href="/graphs/purchase/graph.svg" download="purchase.svg"' in html
    assert 'href="/graphs/purchase/graph.mmd" download="purchase.mmd"' in html
    assert "6 nodes" in html
    assert "↻ retry" in html  # execute's marker, and in the legend


def test_graph_page_is_one_template_with_no_inline_script_or_style(
    signed_in: Client,
) -> None:
    html = signed_in.get("/graphs/markers/").content.decode()

    assert re.findall(r"<script(?![^>]*\ssrc=)[^>]*>", html) == []
    assert " style=" not in html
    assert "<style" not in html


def test_graph_page_escapes_node_names(signed_in: Client) -> None:
    html = signed_in.get("/graphs/escaping/").content.decode()

    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_unknown_graph_is_a_404_page(signed_in: Client) -> None:
    for path in ("/graphs/nope/", "/graphs/nope/graph.svg", "/graphs/nope/graph.mmd"):
        response = signed_in.get(path)

        assert response.status_code == 404
        assert "No such graph" in response.content.decode()


def test_broken_graph_entry_is_a_503_page_naming_the_entry_and_reason(
    signed_in: Client,
) -> None:
    response = signed_in.get("/graphs/broken/")

    assert response.status_code == 503
    html = response.content.decode()
    assert 'data-code="graph_unavailable"' in html
    assert "Graph unavailable" in html
    assert "tests.studio.ui_graphs_for_tests:broken" in html
    assert "RuntimeError(&#x27;no model configured&#x27;)" in html


def test_broken_graph_entry_for_htmx_is_the_flash_fragment(signed_in: Client) -> None:
    response = signed_in.get("/graphs/broken/", HTTP_HX_REQUEST="true")

    assert response.status_code == 503
    assert response.headers["HX-Retarget"] == "#flash"
    assert response.content.decode().strip().startswith('<div id="flash"')


def test_graph_page_lists_only_the_users_threads_newest_first(
    signed_in: Client, ada: User
) -> None:
    bob = User.objects.create_user("bob", password="pw")
    older = Thread.objects.create(graph="purchase", owner=ada, has_state=True)
    newer = Thread.objects.create(
        graph="purchase", owner=ada, status=Thread.Status.INTERRUPTED
    )
    Thread.objects.filter(pk=older.pk).update(
        created_at=older.created_at.replace(year=2020)
    )
    hidden = Thread.objects.create(graph="purchase", owner=bob)
    elsewhere = Thread.objects.create(graph="research", owner=ada)

    html = signed_in.get("/graphs/purchase/").content.decode()

    links = re.findall(r'<a href="/threads/([^/]+)/"', html)
    assert links == [newer.thread_id, older.thread_id]
    assert hidden.thread_id not in html
    assert elsewhere.thread_id not in html
    assert '<span class="badge badge--interrupted">interrupted</span>' in html
    assert '<span class="badge badge--done">done</span>' in html


def test_superusers_see_everyones_threads(client: Client) -> None:
    root = User.objects.create_superuser("root", password="pw")
    bob = User.objects.create_user("bob", password="pw")
    thread = Thread.objects.create(graph="purchase", owner=bob)
    client.force_login(root)

    assert thread.thread_id in client.get("/graphs/purchase/").content.decode()


def test_graph_page_without_threads_says_so(signed_in: Client) -> None:
    assert "No threads yet" in signed_in.get("/graphs/purchase/").content.decode()


# -- downloads -------------------------------------------------------------------


def test_svg_download_is_an_svg_file(signed_in: Client) -> None:
    response = signed_in.get("/graphs/purchase/graph.svg")

    assert response.headers["Content-Type"] == "image/svg+xml; charset=utf-8"
    assert response.headers["Content-Disposition"] == 'inline; filename="purchase.svg"'
    body = response.content.decode()
    assert body.startswith("<?xml")
    assert '<g id="node&#45;normalize"' in body


def test_svg_download_escapes_node_names(signed_in: Client) -> None:
    body = signed_in.get("/graphs/escaping/graph.svg").content.decode()

    assert "<script" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_mermaid_download_is_plain_text(signed_in: Client) -> None:
    response = signed_in.get("/graphs/purchase/graph.mmd")

    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.headers["Content-Disposition"] == 'inline; filename="purchase.mmd"'
    text = response.content.decode()
    assert text.startswith(
        "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n"
    )
    assert "human_review -.-> execute;" in text


def test_pages_and_downloads_share_one_drawing(
    signed_in: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph_svg.clear_cache()
    calls: list[int] = []
    real = graph_svg._run_dot
    monkeypatch.setattr(graph_svg, "_run_dot", lambda dot: calls.append(1) or real(dot))

    signed_in.get("/graphs/purchase/")
    signed_in.get("/graphs/purchase/")
    signed_in.get("/graphs/purchase/graph.svg")

    assert calls == [1]


def test_nav_links_graphs_and_threads(signed_in: Client) -> None:
    html = signed_in.get("/graphs/purchase/").content.decode()

    assert '<a href="/" aria-current="page">Graphs</a>' in html
    assert '<a href="/threads/">Threads</a>' in html

"""Live thread pages in a real browser: the WebSocket, reconnects, the polling fallback, access.

The embedded worker finishes a purchase in well under a second, usually before its
thread page has loaded. To watch a run live, a test queues a ``gate`` run first
(``LiveServer.worker_held``): the purchase waits behind it until the block ends,
so its page is open before its first event.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, WebSocketRoute, expect

from tests._support.browser import sign_in, start_purchase
from tests._support.live_server import LiveServer

WAIT = 20_000

# Marks the page (a reload would lose the mark) and records the class of every
# drawing node after each change, so passing states (is-running) can be checked.
WATCH_PAGE = """() => {
  window.__sameDocument = true;
  window.__nodeClasses = [];
  new MutationObserver((records) => {
    for (const record of records) {
      window.__nodeClasses.push(record.target.id + " " + record.target.getAttribute("class"));
    }
  }).observe(document.getElementById("graph-drawing"), {
    subtree: true, attributes: true, attributeFilter: ["class"],
  });
}"""


def row(page: Page, step: int) -> Any:
    return page.locator(".timeline__row").filter(
        has=page.locator(".timeline__step", has_text=re.compile(rf"^step {step}$"))
    )


def event_ids(page: Page) -> list[int]:
    return [
        int(value)
        for value in page.locator("#run-events li").evaluate_all(
            "items => items.map(item => item.dataset.eventId)"
        )
    ]


def last_event_id(page: Page) -> int:
    return int(page.locator("#last-event-id").get_attribute("data-last-event") or 0)


def test_a_purchase_started_from_the_graph_page_streams_into_its_thread_page(
    page: Page, server: LiveServer, console_errors: list[str], tmp_path: Path
) -> None:
    sign_in(page, server, "/graphs/purchase/")
    with server.worker_held(tmp_path / "release"):
        start_purchase(page, "PO-LIVE-1")
        # queued behind the gate: the page shows the run, with nothing saved yet
        expect(page.locator("#activity")).to_have_attribute("data-socket", "open")
        expect(page.locator("#run-status")).to_have_text("running")
        expect(page.locator(".timeline__row")).to_have_count(0)
        expect(page.locator("#run-events li")).to_have_count(0)
        page.evaluate(WATCH_PAGE)

    # released: the page follows the run over the socket, without a reload
    expect(page.locator("#run-events")).to_contain_text(
        "normalize started", timeout=WAIT
    )
    expect(page.locator("#run-status")).to_have_text("interrupted", timeout=WAIT)
    expect(page.locator("#run-events")).to_contain_text(
        "human_review is waiting for input"
    )
    expect(page.locator('[id="node-human_review"]')).to_have_class(
        re.compile(r"\bis-interrupted\b")
    )
    expect(row(page, 2).locator(".badge--interrupted")).to_be_visible(timeout=WAIT)
    expect(page.locator("#step-panel")).to_contain_text(
        "Paused: waiting for an answer", timeout=WAIT
    )
    expect(page.locator("#step-panel .diff")).to_contain_text("budget_ok")

    assert page.evaluate("() => window.__sameDocument") is True
    ids = event_ids(page)
    assert len(ids) >= 10 and len(ids) == len(set(ids))
    assert last_event_id(page) == ids[0] == max(ids)  # newest first
    expect(page.locator("#run-events li").first).to_contain_text(
        "run paused: waiting for input"
    )
    expect(page.locator("#run-outcome")).to_contain_text(
        "run paused: waiting for input"
    )
    seen: list[str] = page.evaluate("() => window.__nodeClasses")
    assert any(c.startswith("node-budget ") and "is-running" in c for c in seen), seen
    assert any(
        c.startswith("node-human_review ") and "is-interrupted" in c for c in seen
    ), seen
    assert console_errors == []


def test_a_reconnecting_page_resumes_after_the_last_event_it_has(
    page: Page, server: LiveServer, console_errors: list[str], tmp_path: Path
) -> None:
    sign_in(page, server, "/graphs/purchase/")
    thread_url = start_purchase(page, "PO-LIVE-2")
    expect(page.locator("#run-status")).to_have_text("interrupted", timeout=WAIT)
    sockets: list[WebSocketRoute] = []

    def route(ws: WebSocketRoute) -> None:
        sockets.append(ws)
        ws.connect_to_server()

    page.route_web_socket(re.compile(r"/ws/threads/"), route)
    page.goto(thread_url)
    expect(page.locator("#activity")).to_have_attribute("data-socket", "open")
    # reconnect only when the test says so; keep the extension's reconnect handle
    page.evaluate(
        """() => {
          htmx.config.wsReconnectDelay = () => 3600 * 1000;
          document.addEventListener("htmx:wsClose", (event) => {
            window.__socket = event.detail.socketWrapper;
          });
        }"""
    )
    seen_before = last_event_id(page)
    assert f"after={seen_before}" in sockets[0].url

    # the connection drops ("service restart"; the server side closes too) ...
    sockets[0].close(code=1012, reason="restart")
    expect(page.locator("#activity")).to_have_attribute("data-socket", "closed")

    # ... and while it is down, another tab replays step 1: new events
    other = page.context.new_page()
    other.goto(thread_url)
    row(other, 1).locator(".timeline__link").click()
    expect(other.locator("#step-panel h2")).to_contain_text("Step 1")
    with server.worker_held(tmp_path / "release"):
        other.get_by_role("button", name="Replay from here").click()
        expect(other.locator("#flash")).to_contain_text("Queued a replay")
        expect(other.locator("#activity")).to_have_attribute("data-socket", "open")
    expect(other.locator('#run-status[data-finished="true"]')).to_have_text(
        "interrupted", timeout=WAIT
    )
    missed = [i for i in event_ids(other) if i > seen_before]
    assert missed
    assert last_event_id(page) == seen_before  # nothing reached the closed socket

    page.evaluate("() => window.__socket.reconnect()")

    expect(page.locator("#activity")).to_have_attribute("data-socket", "open")
    assert f"after={seen_before}" in sockets[1].url
    expect(page.locator("#last-event-id")).to_have_attribute(
        "data-last-event", str(max(missed)), timeout=WAIT
    )
    ids = event_ids(page)
    assert sorted(i for i in ids if i > seen_before) == sorted(missed)  # all, once
    assert len(ids) == len(set(ids))
    assert console_errors == []
    other.close()


def test_without_the_socket_the_timeline_falls_back_to_polling(
    page: Page, server: LiveServer, console_errors: list[str], tmp_path: Path
) -> None:
    # A proxy that refuses WebSockets: the socket closes at once and stays closed.
    page.route_web_socket(
        re.compile(r"/ws/threads/"), lambda ws: ws.close(code=4000, reason="no")
    )
    sign_in(page, server, "/graphs/purchase/")
    with server.worker_held(tmp_path / "release"):
        start_purchase(page, "PO-LIVE-3")
        expect(page.locator(".timeline [data-fallback-poll]")).to_be_visible()
        expect(page.locator("#activity")).to_have_attribute("data-socket", "closed")
        expect(page.locator(".timeline__row")).to_have_count(0)

    expect(row(page, 2).locator(".badge--interrupted")).to_be_visible(timeout=WAIT)
    expect(page.locator(".timeline [data-fallback-poll]")).to_have_count(0)
    assert page.locator("#run-events li").count() == 0
    assert console_errors == []


def test_another_users_page_and_socket_of_the_thread_are_closed_to_them(
    page: Page, browser: Browser, server: LiveServer
) -> None:
    sign_in(page, server, "/graphs/purchase/")
    thread_url = start_purchase(page, "PO-LIVE-4")
    thread_id = thread_url.rstrip("/").rsplit("/", 1)[-1]
    socket_url = thread_url.replace("http://", "ws://").replace(
        f"/threads/{thread_id}/", f"/ws/threads/{thread_id}/?after=0"
    )
    server.create_user("mallory", "not-the-owner-42")
    context = browser.new_context()
    intruder = context.new_page()
    sign_in(intruder, server, "/", user="mallory", password="not-the-owner-42")

    response = intruder.goto(thread_url)
    close_code = intruder.evaluate(
        """(url) => new Promise((resolve) => {
          const socket = new WebSocket(url);
          socket.onmessage = () => resolve("message");
          socket.onclose = (event) => resolve(event.code);
        })""",
        socket_url,
    )

    assert response is not None and response.status == 404
    assert close_code == 4403
    context.close()


def test_the_activity_reads_without_javascript(
    page: Page, browser: Browser, server: LiveServer
) -> None:
    sign_in(page, server, "/graphs/purchase/")
    thread_url = start_purchase(page, "PO-LIVE-5")
    expect(page.locator("#run-status")).to_have_text("interrupted", timeout=WAIT)
    context = browser.new_context(java_script_enabled=False)
    context.add_cookies(page.context.cookies())
    plain = context.new_page()

    plain.goto(thread_url)

    expect(plain.locator("#run-events")).to_contain_text(
        "human_review is waiting for input"
    )
    expect(plain.locator("#run-status")).to_have_text("interrupted")
    expect(plain.locator(".activity__live")).to_be_hidden()  # no socket, no "live"
    expect(plain.locator("#step-panel .diff")).to_contain_text("budget_ok")
    context.close()

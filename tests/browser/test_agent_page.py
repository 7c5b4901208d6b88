"""The tool agent in a real browser: its answer arrives token by token on the thread page,
it asks before sending an email, and its owner answers on that page.

The run is queued behind a ``gate`` run (``LiveServer.worker_held``) so the thread page is
open before the first token; the demo model pauses a little between tokens.
"""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests._support.browser import THREAD_URL, sign_in
from tests._support.live_server import LiveServer

WAIT = 20_000

# Records the text of the answer being written each time it changes.
WATCH_STREAM = """() => {
  window.__streamed = [];
  new MutationObserver(() => {
    for (const item of document.querySelectorAll("#transcript-stream .message__text")) {
      window.__streamed.push(item.textContent);
    }
  }).observe(document.getElementById("transcript-stream"), {
    subtree: true, childList: true, characterData: true,
  });
}"""


def test_tokens_arrive_live_and_the_owner_answers_the_agents_question(
    page: Page, server: LiveServer, console_errors: list[str], tmp_path: Path
) -> None:
    sign_in(page, server, "/graphs/tool_agent/")
    with server.worker_held(tmp_path / "release"):
        page.get_by_label("Message").fill(
            "Email the total of A-1001 to ada@example.com <b>please</b>"
        )
        page.get_by_role("button", name="Start run", exact=True).click()
        expect(page).to_have_url(THREAD_URL)
        expect(page.locator("#activity")).to_have_attribute("data-socket", "open")
        expect(page.locator("#transcript")).to_be_visible()
        page.evaluate(WATCH_STREAM)

    # released: the answer is written in front of us, a few words at a time
    expect(page.locator("#transcript-settled")).to_contain_text(
        "I will email this to ada@example.com once you approve.", timeout=WAIT
    )
    streamed: list[str] = page.evaluate("() => window.__streamed")
    growing = [text for text in streamed if text.startswith("Order A-1001")]
    assert len(set(growing)) >= 3, streamed  # it grew token by token
    assert all(len(a) <= len(b) for a, b in zip(growing, growing[1:], strict=False))

    # the run paused: the question is on the page, the user's text shown as text
    question = page.locator(".agent-question")
    expect(question).to_contain_text("Send an email to ada@example.com", timeout=WAIT)
    expect(page.locator("#transcript-settled .message--user")).to_contain_text(
        "ada@example.com <b>please</b>"
    )
    expect(page.locator("#transcript-stream .message")).to_have_count(0)

    question.get_by_role("button", name="Approve").click()

    expect(page).to_have_url(THREAD_URL)
    expect(page.locator("body")).to_contain_text("Approved: the agent goes ahead.")
    expect(page.locator("#transcript-settled")).to_contain_text(
        "Done. Sent to ada@example.com", timeout=WAIT
    )
    expect(page.locator("#transcript-settled .message--tool").last).to_contain_text(
        re.compile(r"Sent to ada@example.com \(email #\d+, approved by demo\)")
    )
    expect(page.locator(".agent-question")).to_have_count(0)
    assert console_errors == []

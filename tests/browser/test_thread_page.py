"""The thread page in a real browser: timeline, step panel, highlights, fork with edits."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from tests._support.live_server import LiveServer

WAIT = 20_000


def sign_in(page: Page, server: LiveServer, path: str) -> None:
    page.goto(f"{server.url}{path}")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{server.url}{path}")


def start_purchase(
    page: Page, server: LiveServer, request_id: str, vendor: str = "Acme"
) -> str:
    """Start a purchase from the graph page; returns the thread page's address."""
    sign_in(page, server, "/graphs/purchase/")
    page.get_by_label("request_id").fill(request_id)
    page.get_by_label("approval_version").fill("1")
    page.get_by_label("amount_minor").fill("42000")  # CNY
    page.get_by_label("vendor").fill(vendor)
    page.get_by_role("button", name="Start run", exact=True).click()
    expect(page).to_have_url(re.compile(rf"{server.url}/threads/[0-9a-f-]{{36}}/"))
    return page.url


def row(page: Page, step: int):
    return page.locator(".timeline__row").filter(
        has=page.locator(".timeline__step", has_text=re.compile(rf"^step {step}$"))
    )


def test_purchase_reaches_review_then_a_fork_with_an_edited_reason_branches(
    page: Page, server: LiveServer, console_errors: list[str]
) -> None:
    thread_url = start_purchase(page, server, "PO-7")

    # the timeline follows the run until the review interrupts it
    expect(row(page, 2).locator(".badge--interrupted")).to_be_visible(timeout=WAIT)
    page.reload()
    expect(page.locator("#step-panel")).to_contain_text("Paused: waiting for an answer")
    expect(page.locator('[id="node-human_review"]')).to_have_class(
        re.compile(r"\bis-interrupted\b")
    )

    # step through the timeline: the budget step's diff and its nodes on the graph
    row(page, 2).locator(".timeline__link").click()
    expect(page.locator("#step-panel .diff")).to_contain_text("budget_ok")
    expect(page.locator('[id="node-budget"]')).to_have_class(re.compile(r"\bis-ran\b"))
    expect(page.locator('[id="node-compliance"]')).to_have_class(
        re.compile(r"\bis-ran\b")
    )
    row(page, 1).locator(".timeline__link").click()
    expect(page).to_have_url(re.compile(r"/checkpoints/"))
    expect(page.locator('[id="node-normalize"]')).to_have_class(
        re.compile(r"\bis-ran\b")
    )
    expect(page.locator('[id="node-budget"]')).to_have_class(re.compile(r"\bis-next\b"))
    expect(row(page, 1)).to_have_attribute("aria-current", "step")

    # fork step 1: what the review governs is read-only, the reason can be edited
    page.get_by_role("link", name="Fork with edits").click()
    expect(page.get_by_label("items")).to_have_attribute("readonly", "")
    expect(page.get_by_label("amount_minor")).to_have_attribute("readonly", "")
    expect(page.locator("#fork-as-node option", has_text="human_review")).to_have_count(
        0
    )
    page.get_by_label("reason", exact=True).fill("Urgent: the old desks broke")
    page.get_by_label("Then run from the new checkpoint").check()
    page.get_by_role("button", name="Create branch").click()

    expect(page.locator("#flash")).to_contain_text("Created a branch at step 2")
    expect(page.locator("#fork-tree")).to_contain_text("fork with edits by demo")
    # the timeline shows the new branch alone, and its run reaches the review again
    expect(page.locator("#branch-pick option:checked")).to_contain_text("branch 1")
    expect(page.locator(".timeline__row--inherited")).to_have_count(3)  # main's -1..1
    expect(
        page.locator(
            ".timeline__row:not(.timeline__row--inherited) .badge--interrupted"
        )
    ).to_have_count(1, timeout=WAIT)
    page.goto(thread_url)  # the newest step: the branch's review
    expect(page.locator("#step-panel")).to_contain_text("Urgent: the old desks broke")
    assert [e for e in console_errors if "422" not in e] == []


def test_thread_page_reads_without_javascript(
    page: Page, browser: Browser, server: LiveServer
) -> None:
    thread_url = start_purchase(
        page, server, "PO-8", vendor="<script>alert(1)</script>"
    )
    expect(row(page, 2).locator(".badge--interrupted")).to_be_visible(timeout=WAIT)
    context = browser.new_context(java_script_enabled=False)
    context.add_cookies(page.context.cookies())
    plain = context.new_page()

    plain.goto(thread_url)
    row(plain, 1).locator(".timeline__link").click()

    expect(plain).to_have_url(re.compile(r"/checkpoints/"))
    expect(plain.locator("#step-panel h2")).to_contain_text("Step 1")
    expect(plain.locator("#step-panel")).to_contain_text('"<script>alert(1)</script>"')
    assert plain.locator("#step-panel script").count() == 0
    context.close()

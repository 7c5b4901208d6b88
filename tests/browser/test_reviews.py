"""The reviewer console in a real browser: request, live queue, approve, outcome, double submit."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Browser, Page, expect

from tests._support.browser import sign_in
from tests._support.live_server import LiveServer


def _tab(browser: Browser) -> Page:
    context = browser.new_context(
        locale="en-US", viewport={"width": 1366, "height": 900}
    )
    context.set_default_timeout(10_000)
    return context.new_page()


def test_a_purchase_goes_from_request_to_review_to_executed(
    page: Page, browser: Browser, server: LiveServer, console_errors: list[str]
) -> None:
    reviewer = _tab(browser)
    sign_in(reviewer, server, "/reviews/", user="demo", password="demo")
    expect(reviewer.locator("#review-badge")).to_be_visible()

    # the requester asks for a purchase
    sign_in(page, server, "/purchases/new/", user="requester", password="requester")
    page.get_by_label("Amount").fill("480.50")
    page.get_by_label("Vendor").fill("Acme <Office>")
    page.get_by_label("Reason").fill("A chair for the new hire")
    page.get_by_role("button", name=re.compile("Submit|Request|Send", re.I)).click()
    expect(page).to_have_url(f"{server.url}/purchases/")
    request_id = re.search(
        r"PO-[0-9A-F]{8}", page.locator("#flash").inner_text()
    ).group(0)

    # the reviewer sees it arrive without reloading, and opens it in two tabs
    row = reviewer.locator("#review-queue").get_by_role(
        "link", name=re.compile(request_id)
    )
    expect(row).to_be_visible(timeout=15_000)
    row.click()
    expect(reviewer.get_by_text("480.50 CNY").first).to_be_visible()
    second = reviewer.context.new_page()
    second.goto(reviewer.url)
    # a restored or duplicated tab posts the same form, decision_id included
    first_id = reviewer.locator('input[name="decision_id"]').input_value()
    second.locator('input[name="decision_id"]').evaluate(
        "(input, value) => { input.value = value; }", first_id
    )

    reviewer.get_by_role("radio", name=re.compile("Approve")).check()
    reviewer.get_by_role("button", name="Record decision").click()
    expect(reviewer.locator("#flash")).to_contain_text(
        f"Approved {request_id} v1 by demo"
    )
    second.get_by_role("radio", name=re.compile("Approve")).check()
    second.get_by_role("button", name="Record decision").click()
    expect(second.locator("#flash")).to_contain_text(
        "This decision was already recorded"
    )
    expect(second.locator("#flash")).to_contain_text(
        f"Approved {request_id} v1 by demo"
    )

    # the requester sees the outcome
    deadline = time.monotonic() + 15
    mine = page.locator("tr", has_text=request_id)
    while "executed" not in mine.inner_text().lower() and time.monotonic() < deadline:
        time.sleep(0.3)
        page.reload()
    expect(mine).to_contain_text(re.compile("executed", re.I))
    expect(mine).to_contain_text("approved by demo")
    assert console_errors == []

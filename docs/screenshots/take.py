"""Take the README's screenshots of the real pages: ``.venv/bin/python docs/screenshots/take.py``.

Starts Daphne on a throwaway SQLite database (the browser tests' live server, demo
data seeded), drives Debian's Chromium through Playwright like a person would
(open the review queue, approve a seeded purchase, start a purchase, let it reach
the review, fork a step with an edited reason), and writes PNGs next to this file
at a 1280 px wide viewport:

    graphs.png          the graphs list
    graph-purchase.png  the purchase graph page: the start form generated from the
                        input schema (required markers, descriptions, examples, the
                        amount in CNY)
    start-form-errors.png the start form sent empty: the errors next to the fields
    reviews-queue.png   the reviewer console's queue (demo): the two seeded purchases
    review-decision.png the decision page of PO-1002 (two approval levels)
    thread-review.png   a purchase paused at human review, titled by its request:
                        step panel with the budget_ok diff, the Activity panel
                        (newest first, the run's outcome pinned), the marked drawing
    value-dialog.png    a value opened whole as pretty JSON, with its JSONPath and
                        a copy button
    fork-tree.png       the thread after a fork with an edited reason (written as
                        ``normalize``: the purchase graph is governed, its amount
                        is protected and cannot be forked with another value): the
                        timeline shows the new branch, main's earlier steps marked
    threads.png         the threads list: titles from the graphs' inputs, search
    thread-mobile.png   the thread page on a phone (390 px wide)
    waterfall.png       the step waterfall of the newest run (the branch's)
    compare.png         the two branches' review steps side by side
    purchases.png       requester's "My requests" after demo approved PO-1001
                        through the page and the purchase executed
    review-mobile.png   the decision page of PO-1002 on a phone (390 px wide)

Options: ``--out DIR`` (default: this folder), ``--keep`` (leave the server's
files in a temporary folder and print where).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests._support: the live server and browser helpers

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

from tests._support.browser import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    sign_in,
    start_purchase,
)
from tests._support.live_server import LiveServer, live_server  # noqa: E402

WIDTH = 1280
PHONE = {"width": 390, "height": 844}
WAIT = 30_000
FORKED_REASON = "Laptops for the three new engineers, and a spare for on-call"


def row(page: Page, step: int, nth: int = 0) -> object:
    return (
        page.locator(".timeline__row")
        .filter(
            has=page.locator(".timeline__step", has_text=re.compile(rf"^step {step}$"))
        )
        .nth(nth)
    )


def shoot(
    page: Page, out: Path, name: str, *, full_page: bool = False, element: str = ""
) -> None:
    """Screenshot the page (or only ``element``, a CSS selector) to ``out/name``."""
    path = out / name
    if element:
        page.locator(element).screenshot(path=str(path), animations="disabled")
    else:
        page.screenshot(path=str(path), full_page=full_page, animations="disabled")
    print(
        f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}"
        f"  {path.stat().st_size // 1024} KiB"
    )


def new_page(browser: Browser, **options: Any) -> Page:
    context = browser.new_context(locale="en-US", **options)
    context.set_default_timeout(WAIT)
    return context.new_page()


def review_url(page: Page, request_id: str) -> str:
    """From the queue (open): the decision page's address of ``request_id``."""
    link = page.locator("#review-queue").get_by_role(
        "link", name=re.compile(rf"^{re.escape(request_id)}\b")
    )
    href = link.get_attribute("href")
    assert href, f"{request_id} is not in the queue"
    return href


def take(server: LiveServer, out: Path) -> None:
    expect.set_options(timeout=WAIT)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        page = new_page(browser, viewport={"width": WIDTH, "height": 800})

        sign_in(page, server, "/")
        shoot(page, out, "graphs.png")

        # the reviewer console (demo is a reviewer): the seeded purchases wait
        page.goto(f"{server.url}/reviews/")
        queue = page.locator("#review-queue")
        expect(queue).to_contain_text("PO-1001")
        expect(queue).to_contain_text("PO-1002")
        shoot(page, out, "reviews-queue.png")
        first_url = f"{server.url}{review_url(page, 'PO-1001')}"
        second_url = f"{server.url}{review_url(page, 'PO-1002')}"

        page.goto(second_url)
        expect(page.get_by_role("button", name="Record decision")).to_be_visible()
        shoot(page, out, "review-decision.png", full_page=True)

        # approve PO-1001 through the page: the purchase executes
        page.goto(first_url)
        page.get_by_role("radio", name=re.compile("^Approve")).check()
        page.get_by_label(re.compile("^Reason")).fill(
            "Within budget; Acme is on the approved vendor list."
        )
        page.get_by_role("button", name="Record decision").click()
        expect(page.locator("#flash")).to_contain_text("Approved PO-1001 v1 by demo")

        page.goto(f"{server.url}/graphs/purchase/")
        page.set_viewport_size({"width": WIDTH, "height": 900})
        shoot(page, out, "graph-purchase.png", full_page=True)

        # the form sent empty: what the schema requires, said next to each field
        page.get_by_role("button", name="Start run", exact=True).click()
        expect(page.locator("#input-request_id-errors")).to_be_visible()
        shoot(page, out, "start-form-errors.png", element="#run-form")
        page.goto(f"{server.url}/graphs/purchase/")

        page.get_by_label("category").fill("it")
        page.get_by_label("reason").fill("Laptops for the three new engineers")
        thread_url = start_purchase(
            page, "PO-2048", amount_minor=4_200_000, vendor="Acme Office Supply"
        )
        expect(page.locator("#run-status")).to_have_text("interrupted")
        expect(page.locator("#step-panel")).to_contain_text("Paused")
        page.goto(thread_url)  # a fresh render: the newest events first
        expect(page.locator("#activity")).to_have_attribute("data-socket", "open")
        shoot(page, out, "thread-review.png", full_page=True)

        page.locator("#step-panel .diff [data-value-open]").first.click()
        expect(page.locator("#value-dialog")).to_be_visible()
        shoot(page, out, "value-dialog.png")
        page.keyboard.press("Escape")

        # fork step 1 with an edited reason, written as normalize (the purchase graph
        # is governed: its amount is protected), and run the branch to the review
        first_review = page.locator("#step-panel").get_attribute("data-checkpoint")
        row(page, 1).locator(".timeline__link").click()
        expect(page.locator("#step-panel h2")).to_contain_text("Step 1")
        page.get_by_role("link", name="Fork with edits").click()
        page.get_by_label("Write as node").select_option("normalize")
        page.get_by_label("reason", exact=True).fill(FORKED_REASON)
        page.get_by_label("Then run from the new checkpoint").check()
        page.get_by_role("button", name="Create branch").click()
        expect(page.locator("#fork-tree")).to_contain_text("fork with edits by demo")
        expect(page.locator("#branch-pick option:checked")).to_contain_text("branch 1")
        expect(
            page.locator(
                ".timeline__row:not(.timeline__row--inherited) .badge--interrupted"
            )
        ).to_have_count(1)
        page.goto(thread_url)
        expect(page.locator("#step-panel")).to_contain_text(FORKED_REASON)
        second_review = page.locator("#step-panel").get_attribute("data-checkpoint")
        shoot(page, out, "fork-tree.png")

        page.goto(f"{thread_url}waterfall/")
        expect(page.locator("h1")).to_contain_text("waterfall", ignore_case=True)
        shoot(page, out, "waterfall.png", full_page=True)

        page.goto(f"{thread_url}compare/?a={first_review}&b={second_review}")
        shoot(page, out, "compare.png", full_page=True)

        page.goto(f"{server.url}/threads/")
        expect(page.locator(".thread-table__title").first).to_be_visible()
        shoot(page, out, "threads.png")
        page.context.close()

        # the requester's list: PO-1001 approved and executed, PO-1002 waiting
        mine = new_page(browser, viewport={"width": WIDTH, "height": 800})
        sign_in(mine, server, "/purchases/", user="requester", password="requester")
        executed = mine.locator("tr", has_text="PO-1001")
        deadline = time.monotonic() + WAIT / 1000
        while "executed" not in executed.inner_text() and time.monotonic() < deadline:
            time.sleep(0.3)
            mine.reload()
        expect(executed).to_contain_text("executed")
        shoot(mine, out, "purchases.png")
        mine.context.close()

        # the decision page on a phone
        phone = new_page(
            browser,
            viewport=PHONE,
            device_scale_factor=2,
            is_mobile=True,
            has_touch=True,
        )
        sign_in(phone, server, second_url.removeprefix(server.url))
        expect(phone.get_by_role("button", name="Record decision")).to_be_visible()
        shoot(phone, out, "review-mobile.png", full_page=True)
        phone.goto(thread_url)
        expect(phone.locator("#activity")).to_have_attribute("data-socket", "open")
        shoot(phone, out, "thread-mobile.png")
        phone.context.close()

        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="graph-studio-screenshots-"))
    try:
        with live_server(workdir) as server:
            print(f"Daphne at {server.url}; screenshots:")
            take(server, args.out)
    finally:
        if args.keep:
            print(f"server files kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

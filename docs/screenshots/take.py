"""Take the README's screenshots of the real pages: ``.venv/bin/python docs/screenshots/take.py``.

Starts Daphne on a throwaway SQLite database (the browser tests' live server, demo
data seeded), drives Debian's Chromium through Playwright like a person would
(start a purchase, let it reach the review, fork a step with an edited amount), and
writes PNGs next to this file at a 1280 px wide viewport:

    graphs.png          the graphs list
    graph-purchase.png  the purchase graph page
    thread-review.png   a purchase paused at human review: step panel with the
                        budget_ok diff, the Activity panel, the marked drawing
    fork-tree.png       the thread after a fork with an edited amount
    waterfall.png       the step waterfall of the newest run (the branch's)
    compare.png         the two branches' review steps side by side

Options: ``--out DIR`` (default: this folder), ``--keep`` (leave the server's
files in a temporary folder and print where).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests._support: the live server and browser helpers

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from tests._support.browser import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    sign_in,
    start_purchase,
)
from tests._support.live_server import LiveServer, live_server  # noqa: E402

WIDTH = 1280
WAIT = 30_000


def row(page: Page, step: int, nth: int = 0) -> object:
    return (
        page.locator(".timeline__row")
        .filter(
            has=page.locator(".timeline__step", has_text=re.compile(rf"^step {step}$"))
        )
        .nth(nth)
    )


def shoot(page: Page, out: Path, name: str, *, full_page: bool = False) -> None:
    path = out / name
    page.screenshot(path=str(path), full_page=full_page, animations="disabled")
    print(
        f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}"
        f"  {path.stat().st_size // 1024} KiB"
    )


def take(server: LiveServer, out: Path) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        context = browser.new_context(
            locale="en-US", viewport={"width": WIDTH, "height": 800}
        )
        context.set_default_timeout(WAIT)
        page = context.new_page()

        sign_in(page, server, "/")
        shoot(page, out, "graphs.png")

        page.goto(f"{server.url}/graphs/purchase/")
        page.set_viewport_size({"width": WIDTH, "height": 900})
        shoot(page, out, "graph-purchase.png")

        page.get_by_label("category").fill("it")
        page.get_by_label("reason").fill("Laptops for the three new engineers")
        thread_url = start_purchase(
            page, "PO-2048", amount_minor=4_200_000, vendor="Acme Office Supply"
        )
        expect(page.locator("#run-status")).to_have_text("interrupted")
        expect(page.locator("#step-panel")).to_contain_text("Paused")
        page.goto(thread_url)  # a fresh render: the activity list scrolled to its end
        expect(page.locator("#activity")).to_have_attribute("data-socket", "open")
        page.locator("#run-events").evaluate(
            "list => list.scrollTop = list.scrollHeight"
        )
        shoot(page, out, "thread-review.png", full_page=True)

        # fork step 1 with an amount over the budget, and run the branch
        first_review = page.locator("#step-panel").get_attribute("data-checkpoint")
        row(page, 1).locator(".timeline__link").click()
        expect(page.locator("#step-panel h2")).to_contain_text("Step 1")
        page.get_by_role("link", name="Fork with edits").click()
        page.get_by_label("amount_minor").fill("20000000")
        page.get_by_label("Then run from the new checkpoint").check()
        page.get_by_role("button", name="Create branch").click()
        expect(page.locator("#fork-tree")).to_contain_text("fork with edits by demo")
        expect(page.locator(".timeline__row .badge--interrupted")).to_have_count(2)
        page.goto(thread_url)
        expect(page.locator("#step-panel")).to_contain_text("exceeds the limit")
        second_review = page.locator("#step-panel").get_attribute("data-checkpoint")
        shoot(page, out, "fork-tree.png")

        page.goto(f"{thread_url}waterfall/")
        expect(page.locator("h1")).to_contain_text("waterfall", ignore_case=True)
        shoot(page, out, "waterfall.png", full_page=True)

        page.goto(f"{thread_url}compare/?a={first_review}&b={second_review}")
        shoot(page, out, "compare.png", full_page=True)

        context.close()
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

"""What a new user tripped on (issue 14), in a real browser: every page on a phone,
the Activity feed, the branch switcher, the keyboard and focus, values, the start form.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests._support.browser import sign_in, start_purchase
from tests._support.live_server import LiveServer

WAIT = 20_000


def row(page: Page, step: int) -> Any:
    return page.locator(".timeline__row").filter(
        has=page.locator(".timeline__step", has_text=re.compile(rf"^step {step}$"))
    )


@pytest.fixture(scope="module")
def signed_in(browser: Browser, server: LiveServer) -> Iterator[BrowserContext]:
    """A signed-in session (demo, a reviewer) whose cookies other contexts reuse."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    context.set_default_timeout(WAIT)
    sign_in(context.new_page(), server, "/")
    yield context
    context.close()


@pytest.fixture(scope="module")
def replayed(signed_in: BrowserContext, server: LiveServer) -> dict[str, Any]:
    """A purchase paused at its review, replayed from step 1: main and branch 1."""
    page = signed_in.new_page()
    page.goto(f"{server.url}/graphs/purchase/")
    thread_url = start_purchase(page, "PO-UX-1", amount_minor=480_050)
    expect(page.locator("#run-status")).to_have_text("interrupted", timeout=WAIT)
    page.goto(thread_url)
    main = page.locator(".timeline__row").evaluate_all(
        "rows => rows.map(row => row.dataset.checkpoint)"
    )
    row(page, 1).locator(".timeline__link").click()
    expect(page.locator("#step-panel h2")).to_contain_text("Step 1")
    page.get_by_role("button", name="Replay from here").click()
    expect(page.locator("#flash")).to_contain_text("Queued a replay")
    expect(page.locator('#run-status[data-finished="true"]')).to_have_text(
        "interrupted", timeout=WAIT
    )
    page.goto(thread_url)
    expect(page.locator("#branch-pick option:checked")).to_contain_text("branch 1")
    page.close()
    return {
        "url": thread_url,
        "id": thread_url.rstrip("/").rsplit("/", 1)[-1],
        "main": main,
    }


def phone(browser: Browser, signed_in: BrowserContext, width: int) -> Page:
    context = browser.new_context(
        viewport={"width": width, "height": 800}, is_mobile=True, has_touch=True
    )
    context.set_default_timeout(WAIT)
    context.add_cookies(signed_in.cookies())
    return context.new_page()


# -- layout -----------------------------------------------------------------------------


@pytest.mark.parametrize("width", [360, 390])
def test_every_page_fits_a_phone_with_the_whole_header(
    browser: Browser,
    signed_in: BrowserContext,
    server: LiveServer,
    replayed: dict[str, Any],
    width: int,
) -> None:
    """Issue 14: at 390 px the header overflowed and "Sign out" was cut off."""
    thread, head = replayed["id"], replayed["main"][0]
    review = signed_in.new_page()
    review.goto(f"{server.url}/reviews/")
    decision = review.locator("#review-queue a").first.get_attribute("href")
    review.close()
    paths = [
        "/",
        "/graphs/purchase/",
        "/graphs/tool_agent/",
        "/threads/",
        f"/threads/{thread}/",
        f"/threads/{thread}/checkpoints/{head}/",
        f"/threads/{thread}/checkpoints/{replayed['main'][1]}/fork/",
        f"/threads/{thread}/checkpoints/{head}/blame/?key=checks",
        f"/threads/{thread}/checkpoints/{head}/blame/",
        f"/threads/{thread}/compare/?a={replayed['main'][-1]}&b={head}",
        f"/threads/{thread}/waterfall/",
        "/reviews/",
        decision,
        "/reviews/audit/",
        "/purchases/",
        "/purchases/new/",
        "/account/tokens/",
        "/api/docs",
    ]
    page = phone(browser, signed_in, width)
    too_wide = {}
    for path in paths:
        page.goto(f"{server.url}{path}")
        expect(page.locator("h1")).to_be_visible()
        scroll_width = page.evaluate("() => document.documentElement.scrollWidth")
        if scroll_width > width:
            too_wide[path] = scroll_width
        sign_out = page.get_by_role("button", name="Sign out").bounding_box()
        assert sign_out is not None and sign_out["x"] + sign_out["width"] <= width, path
    assert too_wide == {}
    page.context.close()


# -- the Activity feed and the branch switcher --------------------------------------------


def test_the_activity_opens_on_the_newest_events_under_the_pinned_outcome(
    signed_in: BrowserContext, replayed: dict[str, Any]
) -> None:
    """Issue 14: the box opened scrolled to the oldest events, "run paused" hidden."""
    page = signed_in.new_page()
    page.goto(replayed["url"])
    events = page.locator("#run-events")
    events.scroll_into_view_if_needed()

    expect(page.locator("#run-outcome")).to_contain_text(
        "run paused: waiting for input"
    )
    expect(page.locator("#run-outcome")).to_be_in_viewport()
    newest = events.locator("li").first
    expect(newest).to_contain_text("run paused: waiting for input")
    assert events.evaluate("list => list.scrollTop") == 0
    box, item = events.bounding_box(), newest.bounding_box()
    assert box and item and box["y"] <= item["y"] < box["y"] + box["height"]
    weight = newest.locator(".run-event__text").evaluate(
        "el => getComputedStyle(el).fontWeight"
    )
    assert int(weight) >= 600  # the run status line is bold: its class is styled
    page.close()


def test_events_that_arrive_live_are_newest_first_in_run_order(
    page: Page, server: LiveServer, console_errors: list[str], tmp_path: Path
) -> None:
    sign_in(page, server, "/graphs/purchase/")
    with server.worker_held(tmp_path / "release"):
        start_purchase(page, "PO-UX-LIVE")
        expect(page.locator("#activity")).to_have_attribute("data-socket", "open")

    expect(page.locator("#run-outcome")).to_contain_text(
        "run paused: waiting for input", timeout=WAIT
    )
    lines = page.locator("#run-events .run-event__text").all_inner_texts()
    assert lines[0] == "run paused: waiting for input"
    assert lines[-1] == "run running"
    assert (
        lines.index("normalize started (step 1)")
        < lines.index("checkpoint saved (step 0)")
        < lines.index("checkpoint saved (step -1)")
    )
    assert lines.index("budget started (step 2)") < lines.index(
        "checkpoint saved (step 1)"
    )
    assert console_errors == []


def test_the_branch_switcher_shows_one_line_at_a_time(
    signed_in: BrowserContext, replayed: dict[str, Any]
) -> None:
    """Issue 14: after a replay both branches' steps were interleaved."""
    page = signed_in.new_page()
    page.goto(replayed["url"])
    expect(page.locator(".timeline__row--inherited")).to_have_count(3)  # main's -1..1
    expect(page.locator(".branch-switcher__go")).to_be_hidden()  # it submits itself

    page.locator("#branch-pick").select_option(label="main")

    expect(page).to_have_url(re.compile(r"\?branch="))
    shown = page.locator(".timeline__row").evaluate_all(
        "rows => rows.map(row => row.dataset.checkpoint)"
    )
    assert shown == replayed["main"]
    expect(page.locator(".timeline__row--inherited")).to_have_count(0)
    expect(page.locator("#fork-tree .tree__label[aria-current]")).to_have_text("main")
    page.close()


# -- keyboard and focus ---------------------------------------------------------------------


def test_the_timeline_moves_with_j_k_and_the_arrow_keys_and_focus_is_visible(
    signed_in: BrowserContext, replayed: dict[str, Any], console_errors: list[str]
) -> None:
    page = signed_in.new_page()
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    page.goto(replayed["url"])
    rows = page.locator(".timeline__row")
    expect(rows.first).to_have_attribute("aria-current", "step")
    page.keyboard.press("Tab")  # from the top: the brand link, ringed
    assert (
        page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
        == "solid"
    )

    page.keyboard.press("j")
    expect(rows.nth(1)).to_have_attribute("aria-current", "step")
    expect(page.locator("#step-panel")).to_have_attribute(
        "data-checkpoint", rows.nth(1).get_attribute("data-checkpoint") or ""
    )
    focused = page.evaluate(
        "() => [document.activeElement.className, "
        "getComputedStyle(document.activeElement).outlineStyle, "
        "getComputedStyle(document.activeElement).outlineWidth]"
    )
    assert focused == ["timeline__link", "solid", "2px"]
    page.keyboard.press("ArrowDown")
    expect(rows.nth(2)).to_have_attribute("aria-current", "step")
    page.keyboard.press("k")
    page.keyboard.press("ArrowUp")
    expect(rows.first).to_have_attribute("aria-current", "step")
    page.keyboard.press("End")
    expect(rows.last).to_have_attribute("aria-current", "step")
    expect(page).to_have_url(re.compile(r"/checkpoints/"))
    assert console_errors == []
    page.close()


# -- values ---------------------------------------------------------------------------------


def test_a_value_opens_whole_as_pretty_json_and_copies(
    browser: Browser, signed_in: BrowserContext, replayed: dict[str, Any]
) -> None:
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    context.add_cookies(signed_in.cookies())
    page = context.new_page()
    page.goto(replayed["url"])
    opener = page.locator("#step-panel .diff [data-value-open]").first

    opener.click()

    dialog = page.locator("#value-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#value-dialog-path")).to_have_text("$.checks")
    text = page.locator("#value-dialog-text").inner_text()
    assert text.startswith('[\n  {\n    "check": "budget"')
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("#value-dialog-status")).to_have_text("Copied.")
    assert page.evaluate("() => navigator.clipboard.readText()") == text
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    context.close()


# -- the start form -------------------------------------------------------------------------


def test_an_empty_form_shows_errors_in_place_and_money_is_entered_in_cny(
    page: Page, server: LiveServer, console_errors: list[str]
) -> None:
    """Issue 14: an empty form queued a thread that failed with "request_id: Field
    required"; the amount was an int with no unit."""
    sign_in(page, server, "/graphs/purchase/")
    expect(page.locator("label[for=input-amount_minor] .field__unit")).to_have_text(
        "CNY"
    )

    page.get_by_role("button", name="Start run", exact=True).click()

    for key in ("request_id", "approval_version", "amount_minor"):
        expect(page.locator(f"#input-{key}-errors")).to_have_text(
            "This field is required."
        )
    expect(page).to_have_url(f"{server.url}/graphs/purchase/")
    expect(page.get_by_label("request_id")).to_have_attribute("aria-invalid", "true")

    page.get_by_label("request_id").fill("PO-UX-2")
    page.get_by_label("approval_version").fill("1")
    page.get_by_label("amount_minor").fill("480.5")
    page.get_by_label("vendor").fill("Acme")
    page.get_by_role("button", name="Start run", exact=True).click()

    expect(page).to_have_title("PO-UX-2 · Acme · 480.50 CNY · Graph Studio")
    expect(page.locator("h1")).to_have_text("PO-UX-2 · Acme · 480.50 CNY")
    page.goto(f"{server.url}/threads/")
    page.get_by_label("Search").fill("ux-2 ACME")  # every word, in any case
    expect(page.locator(".thread-table__title")).to_have_text(
        ["PO-UX-2 · Acme · 480.50 CNY"]
    )
    expect(page).to_have_url(re.compile(r"/threads/\?q=ux-2"))
    assert [e for e in console_errors if "422" not in e] == []

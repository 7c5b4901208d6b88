"""The graph page in a real browser: the drawing, and starting a run with htmx."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests._support.live_server import LiveServer


def sign_in(page: Page, server: LiveServer, path: str) -> None:
    page.goto(f"{server.url}{path}")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{server.url}{path}")


def test_purchase_graph_is_drawn_with_addressable_nodes(
    page: Page, server: LiveServer, console_errors: list[str]
) -> None:
    sign_in(page, server, "/graphs/purchase/")

    expect(page).to_have_title("purchase · Graph Studio")
    for name in ("normalize", "budget", "compliance", "human_review", "execute"):
        expect(page.locator(f'[id="node-{name}"]')).to_be_visible()
    expect(page.locator('[id="node-execute"]')).to_contain_text("↻ retry")
    assert page.locator("#graph-svg .edge--conditional").count() == 2
    box = page.locator("#graph-svg svg").bounding_box()
    assert box is not None and box["height"] > 250
    assert console_errors == []  # no CSP violation from the inline SVG


def test_invalid_input_shows_errors_in_place_then_a_valid_run_opens_its_thread(
    page: Page, server: LiveServer, console_errors: list[str]
) -> None:
    sign_in(page, server, "/graphs/purchase/")

    page.get_by_label("request_id").fill("R-42")
    page.get_by_label("approval_version").fill("1")
    page.get_by_label("amount_minor").fill("1200.00")  # CNY
    page.get_by_label("items").fill('[{"sku": 1')
    page.get_by_role("button", name="Start run", exact=True).click()

    expect(page.locator("#input-items-errors")).to_contain_text("Invalid JSON")
    expect(page).to_have_url(f"{server.url}/graphs/purchase/")  # swapped, not reloaded
    expect(page.get_by_label("request_id")).to_have_value("R-42")

    page.get_by_label("items").fill("")
    page.get_by_role("button", name="Start run", exact=True).click()

    expect(page).to_have_url(re.compile(rf"{server.url}/threads/[0-9a-f-]{{36}}/"))
    # The only console errors are the 422 responses htmx swapped in.
    assert [e for e in console_errors if "422" not in e] == []

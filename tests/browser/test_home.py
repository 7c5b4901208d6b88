"""What a person sees on a real server, in a real browser."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests._support.live_server import LiveServer


def test_home_page_asks_for_sign_in_then_lists_the_graphs(
    page: Page, server: LiveServer, console_errors: list[str]
) -> None:
    page.goto(f"{server.url}/")

    expect(page).to_have_url(f"{server.url}/accounts/login/?next=/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(f"{server.url}/")
    expect(page).to_have_title("Graphs · Graph Studio")
    expect(page.get_by_role("heading", level=1)).to_have_text("Graphs")
    for name in ("purchase", "research", "tool_agent"):
        expect(page.get_by_role("link", name=name, exact=True)).to_have_attribute(
            "href", f"/graphs/{name}/"
        )
    expect(page.get_by_text("6 nodes")).to_be_visible()
    # htmx 2 loaded from our static files and read its config from the meta tag.
    assert page.evaluate("() => window.htmx.version").startswith("2.")
    assert page.evaluate(
        "() => window.htmx.config.responseHandling.some(r => r.code === '^(409|422)$')"
    )
    # Our stylesheet applied (cards are bordered boxes, not bare text).
    assert (
        page.locator(".card").first.evaluate("el => getComputedStyle(el).borderStyle")
        == "solid"
    )
    assert console_errors == []


def test_demo_reviewer_signs_in_and_out(
    page: Page, server: LiveServer, console_errors: list[str]
) -> None:
    page.goto(f"{server.url}/")
    page.get_by_role("link", name="Sign in").click()
    expect(page).to_have_title("Sign in · Graph Studio")

    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(f"{server.url}/")
    expect(page.locator(".account__name")).to_have_text("Demo Reviewer")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    assert console_errors == []


def test_wrong_password_is_explained(page: Page, server: LiveServer) -> None:
    page.goto(f"{server.url}/accounts/login/")

    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("alert")).to_contain_text(
        "Please enter a correct username and password"
    )

"""What a person sees on a real server, in a real browser."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests._support.live_server import LiveServer


def test_home_page_shows_the_graphs_list_and_its_empty_state(
    page: Page, server: LiveServer, console_errors: list[str]
) -> None:
    page.goto(f"{server.url}/")

    expect(page).to_have_title("Graphs · Graph Studio")
    expect(page.get_by_role("heading", level=1)).to_have_text("Graphs")
    expect(page.get_by_text("No graphs registered yet")).to_be_visible()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    # htmx 2 loaded from our static files and read its config from the meta tag.
    assert page.evaluate("() => window.htmx.version").startswith("2.")
    assert page.evaluate(
        "() => window.htmx.config.responseHandling.some(r => r.code === '^(409|422)$')"
    )
    # Our stylesheet applied (the empty state is a bordered box, not bare text).
    assert (
        page.locator(".empty").evaluate("el => getComputedStyle(el).borderStyle")
        == "dashed"
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

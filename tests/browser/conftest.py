"""Browser fixtures: Debian's Chromium driven by Playwright, a live Daphne server.

Never ``playwright install``: these machines cannot download browsers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    sync_playwright,
)

from tests._support.browser import CHROMIUM, CHROMIUM_ARGS
from tests._support.live_server import TEST_GRAPHS, LiveServer, live_server
from tests._support.services import unavailable


@pytest.hookimpl(tryfirst=True)  # mark before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark browser tests, and run them last: the faster layers report first."""
    here = Path(__file__).parent
    ours = [item for item in items if here in item.path.parents]
    for item in ours:
        item.add_marker(pytest.mark.browser)
    items[:] = [item for item in items if item not in ours] + ours


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("live"), graphs=TEST_GRAPHS) as running:
        yield running


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    """Package-scoped: while open, the sync API runs an event loop in this thread,
    which would break async tests that ran after the browser tests."""
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing: apt-get install chromium (make deps does)")
    chromium = playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
    )
    yield chromium
    chromium.close()


@pytest.fixture
def console_errors() -> list[str]:
    """Errors the page logged (CSP violations land here); tests assert it stays empty."""
    return []


@pytest.fixture
def page(browser: Browser, console_errors: list[str]) -> Iterator[Page]:
    context = browser.new_context(
        locale="en-US", viewport={"width": 1280, "height": 800}
    )
    context.set_default_timeout(10_000)
    page = context.new_page()

    def record(message: ConsoleMessage) -> None:
        if message.type == "error":
            console_errors.append(message.text)

    page.on("console", record)
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    yield page
    context.close()

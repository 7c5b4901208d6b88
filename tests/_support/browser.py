"""Steps the browser tests share: signing in, starting a purchase from its graph page."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from playwright.sync_api import Page, expect

from tests._support.live_server import LiveServer

__all__ = ("CHROMIUM", "CHROMIUM_ARGS", "THREAD_URL", "sign_in", "start_purchase")

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium: ``playwright install`` cannot download browsers on these machines."""
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
THREAD_URL = re.compile(r"/threads/[0-9a-f-]{36}/$")


def sign_in(
    page: Page,
    server: LiveServer,
    path: str,
    *,
    user: str = "demo",
    password: str = "demo",
) -> None:
    """Open ``path``, sign in on the login page it redirects to, land on ``path``."""
    page.goto(f"{server.url}{path}")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{server.url}{path}")


def start_purchase(
    page: Page, request_id: str, *, amount_minor: int = 4_200_000, vendor: str = "Acme"
) -> str:
    """From the purchase graph page (open, signed in): start a run; its thread's URL.

    The form takes the amount in CNY (the schema's ``amount_minor`` is in fen).
    """
    page.get_by_label("request_id").fill(request_id)
    page.get_by_label("approval_version").fill("1")
    page.get_by_label("amount_minor").fill(f"{Decimal(amount_minor) / 100:.2f}")
    page.get_by_label("vendor").fill(vendor)
    page.get_by_role("button", name="Start run", exact=True).click()
    expect(page).to_have_url(THREAD_URL)
    return page.url

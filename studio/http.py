"""Request typing and the one helper that picks a full page or a partial."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

__all__ = ("HtmxHttpRequest", "template_for")


class HtmxHttpRequest(HttpRequest):
    """An ``HttpRequest`` that went through ``django_htmx.middleware.HtmxMiddleware``."""

    htmx: HtmxDetails


def template_for(request: HtmxHttpRequest, page: str, *, partial: str) -> str:
    """The full page for normal (and boosted) requests; only the named partial for htmx swaps."""
    return f"{page}#{partial}" if request.htmx and not request.htmx.boosted else page

"""Request typing and the one helper that picks a full page or a partial."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseRedirect
from django_htmx.middleware import HtmxDetails

__all__ = ("HtmxHttpRequest", "HttpResponseSeeOther", "template_for")


class HtmxHttpRequest(HttpRequest):
    """An ``HttpRequest`` that went through ``django_htmx.middleware.HtmxMiddleware``."""

    htmx: HtmxDetails


def template_for(request: HtmxHttpRequest, page: str, *, partial: str) -> str:
    """The full page for normal (and boosted) requests; only the named partial for htmx swaps."""
    return f"{page}#{partial}" if request.htmx and not request.htmx.boosted else page


class HttpResponseSeeOther(HttpResponseRedirect):
    """303: after a successful POST, GET the new resource (never re-POST on refresh)."""

    status_code = 303

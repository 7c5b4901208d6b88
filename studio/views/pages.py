"""Top-level pages."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio.http import HtmxHttpRequest
from studio.services import registered_graphs


@login_required
@require_GET
def index(request: HtmxHttpRequest) -> HttpResponse:
    """The graphs list: every entry of ``STUDIO_GRAPHS``, or an empty state.

    Like every studio page it needs a signed-in user: graph names, modules and
    descriptions are internal information.
    """
    return render(
        request, "pages/index.html", {"graphs": registered_graphs.list_graphs()}
    )

"""Top-level pages."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio import registry
from studio.http import HtmxHttpRequest


@require_GET
def index(request: HtmxHttpRequest) -> HttpResponse:
    """The graphs list: every entry of ``STUDIO_GRAPHS``, or an empty state."""
    graphs = [
        {"name": name, "spec": spec} for name, spec in registry.graph_specs().items()
    ]
    return render(request, "pages/index.html", {"graphs": graphs})

"""Graph pages: topology, its downloads, recent threads, and starting a run.

Parse -> service -> render; no engine imports (import-linter). Every page needs
a signed-in user. Unknown graphs are 404 and broken registry entries 503, both
rendered by ``StudioErrorMiddleware``.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from studio.http import HtmxHttpRequest, HttpResponseSeeOther, template_for
from studio.services import registered_graphs, runs

__all__ = ("graph_detail", "graph_mermaid", "graph_svg", "run_start")


@login_required
@require_GET
def graph_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """The topology, a start-a-run form and the user's recent threads of this graph."""
    page = registered_graphs.graph_page(name, request.user)
    form = registered_graphs.input_form(name).blank()
    context = {"page": page, "form": form, "graph_name": name}
    return render(request, "graphs/detail.html", context)


@login_required
@require_GET
def graph_svg(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """The topology as a standalone SVG file."""
    response = HttpResponse(
        registered_graphs.draw_svg_document(name),
        content_type="image/svg+xml; charset=utf-8",
    )
    response["Content-Disposition"] = _inline(f"{name}.svg")
    return response


@login_required
@require_GET
def graph_mermaid(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """The topology as Mermaid text."""
    response = HttpResponse(
        registered_graphs.draw_mermaid(name), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = _inline(f"{name}.mmd")
    return response


@login_required
@require_POST
def run_start(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """Queue a run with the submitted input, then go to its thread.

    Invalid input re-renders the form with the errors next to the fields (422):
    the form partial for htmx, the whole page otherwise. Nothing is queued.
    """
    form = registered_graphs.input_form(name).bind(request.POST)
    if not form.is_valid:
        template = template_for(request, "graphs/detail.html", partial="run-form")
        context = {"form": form, "graph_name": name}
        if template == "graphs/detail.html":
            context["page"] = registered_graphs.graph_page(name, request.user)
        return render(request, template, context, status=422)
    run = runs.start_run(graph=name, user=request.user, input=form.input)
    url = f"/threads/{run.thread_id}/"
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponseSeeOther(url)


def _inline(filename: str) -> str:
    """Shown in the browser; saved under ``filename`` (quoted/encoded as needed)."""
    return content_disposition_header(False, filename) or "inline"

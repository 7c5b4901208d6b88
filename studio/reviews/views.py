"""Reviewer console pages: the queue, one decision, the audit log. Parse -> service -> render.

Every page needs a signed-in user. The queue and the audit log are for members
of ``reviewers`` / ``senior-reviewers`` (and superusers, for the audit log);
others get 404 as for any page that is not theirs. The decision form posts to
the decision page; the outcome (or the refusal, rendered by the error
middleware) comes back as a redirect with a message, so reloading never
re-posts. An agent's question (``Governance.answered_by == "owner"``) is asked
on its thread page, whose form posts here too: its outcome redirects back there.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from studio.http import HtmxHttpRequest, HttpResponseSeeOther, template_for
from studio.reviews import console
from studio.reviews.audit import AuditFilters, audit_page, csv_rows
from studio.reviews.decisions import decide

__all__ = ("audit_log", "review_detail", "review_queue")


@login_required
@require_GET
def review_queue(request: HtmxHttpRequest) -> HttpResponse:
    page = console.queue_page(
        request.user,
        vendor=request.GET.get("vendor", ""),
        category=request.GET.get("category", ""),
        level=request.GET.get("level", ""),
    )
    template = template_for(request, "reviews/queue.html", partial="review-queue")
    return render(request, template, {"page": page})


@login_required
@require_http_methods(["GET", "POST"])
def review_detail(request: HtmxHttpRequest, thread_id: str) -> HttpResponse:
    if request.method == "POST":
        outcome = decide(request.user, thread_id, request.POST, strings=True)
        messages.success(request, outcome.message)
        if outcome.answered_by == "owner":  # asked and answered on the thread page
            return HttpResponseSeeOther(_thread_page(thread_id))
        return HttpResponseSeeOther(request.path)
    if console.answered_on_thread_page(request.user, thread_id):
        return redirect(_thread_page(thread_id))
    page = console.review_page(request.user, thread_id)
    return render(request, "reviews/detail.html", {"page": page})


def _thread_page(thread_id: str) -> str:
    return reverse("studio:thread-detail", args=[thread_id])


@login_required
@require_GET
def audit_log(request: HtmxHttpRequest) -> HttpResponseBase:
    console.require_auditor(request.user)
    filters = AuditFilters.parse(request.GET)
    if request.GET.get("format") == "csv":
        response = StreamingHttpResponse(
            csv_rows(filters), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = 'attachment; filename="review-audit.csv"'
        return response
    page = audit_page(filters, request.GET.get("page", 1))
    return render(request, "reviews/audit.html", {"page": page, "filters": filters})

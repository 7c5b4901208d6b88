"""The requester's pages: my requests, a new request, change a request.

Parse -> service -> render; no engine imports. Every page needs a signed-in
user. An invalid form is shown again with the errors next to its fields (422)
and nothing is queued; ``StudioError`` (404 not yours, 409 executed or running)
is rendered by ``StudioErrorMiddleware``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from studio.http import HttpResponseSeeOther
from studio.purchases import forms, services

__all__ = ("purchase_change", "purchase_list", "purchase_new")


@login_required
@require_GET
def purchase_list(request: HttpRequest) -> HttpResponse:
    """My requests: their current version, status, decisions and outcome."""
    context = {"rows": services.my_requests(request.user), "limit": services.LIMIT}
    return render(request, "purchases/list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def purchase_new(request: HttpRequest) -> HttpResponse:
    """A new request: version 1 under a request id the server chooses."""
    if request.method == "GET":
        return _form_page(request, forms.blank())
    form = forms.bind(request.POST)
    if not form.is_valid:
        return _form_page(request, form, status=422)
    run = services.new_request(request.user, form)
    inputs: dict[str, Any] = run.input or {}
    request_id = inputs["request_id"]
    messages.success(
        request, f"Request {request_id} was submitted. Its checks run now."
    )
    return HttpResponseSeeOther(reverse("purchases:list"))


@login_required
@require_http_methods(["GET", "POST"])
def purchase_change(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The next version of one of my requests, prefilled with the current one."""
    target = services.change_form_initial(request.user, thread_id)
    if request.method == "GET":
        return _form_page(request, forms.initial(target.initial), target=target)
    form = forms.bind(request.POST)
    if not form.is_valid:
        return _form_page(request, form, target=target, status=422)
    run = services.change_request(request.user, thread_id, form)
    inputs: dict[str, Any] = run.input or {}
    version = inputs["approval_version"]
    messages.success(
        request,
        f"Request {target.request_id} version {version} was submitted. "
        "It goes through the checks and the review again.",
    )
    return HttpResponseSeeOther(reverse("purchases:list"))


def _form_page(
    request: HttpRequest,
    form: forms.BoundPurchase,
    *,
    target: services.ChangeTarget | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {"form": form, "change": target}
    return render(request, "purchases/new.html", context, status=status)

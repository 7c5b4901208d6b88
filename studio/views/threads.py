"""Thread pages and time-travel actions. Parse -> service -> render; no engine imports.

Reading works without JavaScript: every htmx request has a plain-link twin
that renders the full page. htmx requests get the partial that replaces the
element they target (``#timeline``, ``#step-panel``, ``#thread-body``); on the
thread's address that is the timeline, or the newest step's panel when the
request targets ``#step-panel`` (the live page refreshes both when a run ends), or
the conversation's messages when it targets ``#transcript-settled``.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from studio.http import HtmxHttpRequest
from studio.presenters import ForkFormView
from studio.services import blame as blame_service
from studio.services import compare, threads, time_travel, transcript, waterfall

DETAIL = "threads/detail.html"


def _partial(request: HtmxHttpRequest) -> bool:
    return bool(request.htmx) and not request.htmx.boosted


@login_required
@require_GET
def thread_list(request: HtmxHttpRequest) -> HttpResponse:
    page = threads.list_threads(
        request.user,
        graph=request.GET.get("graph", ""),
        status=request.GET.get("status", ""),
        q=request.GET.get("q", ""),
        page=request.GET.get("page", 1),
    )
    template = (
        "threads/list.html#thread-table" if _partial(request) else "threads/list.html"
    )
    return render(request, template, {"page": page})


@login_required
@require_GET
def thread_detail(request: HtmxHttpRequest, thread_id: str) -> HttpResponse:
    before = request.GET.get("before", "")
    if _partial(request) and request.htmx.target == "step-panel":
        # the live page asks for the newest step when a run finishes
        panel = threads.newest_panel(request.user, thread_id)
        return render(
            request, f"{DETAIL}#step-panel", {"panel": panel, "thread_id": thread_id}
        )
    if _partial(request) and request.htmx.target == "transcript-settled":
        # the live page refreshes the conversation as checkpoints are saved
        conversation = transcript.transcript(request.user, thread_id)
        if conversation is None:
            return HttpResponse(status=204)
        return render(
            request,
            "threads/_transcript.html#transcript-settled",
            {"transcript": conversation},
        )
    branch = request.GET.get("branch", "")
    if _partial(request):
        line = threads.timeline(
            request.user,
            thread_id,
            before=before,
            selected=request.GET.get("selected", ""),
            branch=branch,
        )
        return render(request, f"{DETAIL}#timeline", {"timeline": line})
    page = threads.thread_page(request.user, thread_id, before=before, branch=branch)
    return render(request, DETAIL, {"page": page})


@login_required
@require_GET
def checkpoint_detail(
    request: HtmxHttpRequest, thread_id: str, checkpoint_id: str
) -> HttpResponse:
    before = request.GET.get("before", "")
    branch = request.GET.get("branch", "")
    if _partial(request):
        panel = threads.step_panel(
            request.user, thread_id, checkpoint_id, before=before, branch=branch
        )
        return render(request, f"{DETAIL}#step-panel", {"panel": panel})
    page = threads.thread_page(
        request.user,
        thread_id,
        checkpoint_id=checkpoint_id,
        before=before,
        branch=branch,
    )
    return render(request, DETAIL, {"page": page})


@login_required
@require_POST
def checkpoint_replay(
    request: HtmxHttpRequest, thread_id: str, checkpoint_id: str
) -> HttpResponse:
    outcome = time_travel.replay(request.user, thread_id, checkpoint_id)
    notice = f"Queued a replay from step {outcome.step} (run {outcome.run_id[:8]})."
    return _updated(request, thread_id, checkpoint_id, notice)


@login_required
@require_http_methods(["GET", "POST"])
def checkpoint_fork(
    request: HtmxHttpRequest, thread_id: str, checkpoint_id: str
) -> HttpResponse:
    if request.method == "GET":
        form = time_travel.fork_form(request.user, thread_id, checkpoint_id)
        return _fork_page(request, thread_id, checkpoint_id, form, status=200)
    outcome = time_travel.fork(
        request.user, thread_id, checkpoint_id, request.POST.dict()
    )
    if not outcome.created:
        return _fork_page(request, thread_id, checkpoint_id, outcome.form, status=422)
    notice = f"Created a branch at step {outcome.form.step + 1}."
    if outcome.run_id:
        notice += f" Queued a run from it (run {outcome.run_id[:8]})."
    response = _updated(request, thread_id, outcome.checkpoint_id, notice)
    if _partial(request):
        response = reswap(retarget(response, "#thread-body"), "outerHTML")
    return response


@login_required
@require_GET
def checkpoint_blame(
    request: HtmxHttpRequest, thread_id: str, checkpoint_id: str
) -> HttpResponse:
    view = blame_service.blame(
        request.user,
        thread_id,
        checkpoint_id,
        request.GET.get("key", ""),
        start=request.GET.get("from", ""),
    )
    return render(request, "threads/blame.html", {"blame": view})


@login_required
@require_GET
def thread_compare(request: HtmxHttpRequest, thread_id: str) -> HttpResponse:
    view = compare.compare(
        request.user, thread_id, request.GET.get("a", ""), request.GET.get("b", "")
    )
    return render(request, "threads/compare.html", {"compare": view})


@login_required
@require_GET
def thread_waterfall(request: HtmxHttpRequest, thread_id: str) -> HttpResponse:
    view = waterfall.for_run(request.user, thread_id, request.GET.get("run", ""))
    return render(request, "threads/waterfall.html", {"waterfall": view})


# -- responses ----------------------------------------------------------------------------


def _updated(
    request: HtmxHttpRequest, thread_id: str, checkpoint_id: str, notice: str
) -> HttpResponse:
    """After an action: the thread body and a flash (htmx), or a redirect (plain POST)."""
    if not _partial(request):
        messages.success(request, notice)
        return redirect(
            reverse("studio:checkpoint-detail", args=(thread_id, checkpoint_id))
        )
    page = threads.thread_page(request.user, thread_id, checkpoint_id=checkpoint_id)
    return render(request, "threads/_updated.html", {"page": page, "notice": notice})


def _fork_page(
    request: HtmxHttpRequest,
    thread_id: str,
    checkpoint_id: str,
    form: ForkFormView,
    *,
    status: int,
) -> HttpResponse:
    if _partial(request):
        return render(request, f"{DETAIL}#fork-form", {"form": form}, status=status)
    page = threads.thread_page(request.user, thread_id, checkpoint_id=checkpoint_id)
    return render(request, DETAIL, {"page": page, "form": form}, status=status)

"""``/account/tokens/``: list, create and revoke your personal API tokens.

Parse -> service (``studio.services.api_tokens``) -> render. A new token's secret is in
the response to the POST that created it and nowhere else: the page is not
cached (``never_cache``), and the database keeps only its SHA-256. Refusals
(a bad name: 422; another user's token: 404) are rendered by the error
middleware.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from studio.account.forms import NewToken
from studio.http import HttpResponseSeeOther
from studio.services import api_tokens

__all__ = ("token_list", "token_revoke")


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    issued = None
    if request.method == "POST":
        form = NewToken.from_data(request.POST)
        issued = api_tokens.issue(request.user, form.name)
    context = {"tokens": api_tokens.tokens_of(request.user), "issued": issued}
    return render(request, "account/tokens.html", context)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    revoked = api_tokens.revoke(request.user, token_id)
    messages.success(
        request,
        f"Revoked the token “{revoked.name}” ({revoked.prefix}…): "
        "programs using it are refused from now on.",
    )
    return HttpResponseSeeOther(reverse("account:tokens"))

"""``POST /api/reviews/<thread_id>/decision``: a reviewer's decision, as JSON.

The JSON twin of the reviewer console's form (DESIGN.md, "Approvals"): the body
is exactly ``request_id``, ``approval_version``, ``decision_id``, ``action``
(``approve`` | ``reject``) and ``reason``, validated strictly (``"1"`` is not
an int, ``true`` is not an action); the reviewer is the token's or session's
user. The decision protocol (``studio.reviews.decisions.decide``) does the rest.

Answers: 201 and the outcome for a new decision; 200 and the same outcome
(``"duplicate": true``) for a repeated ``decision_id``; errors as
``{"detail": ...}`` with 401, 403, 404, 409, 413 or 422.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from studio.api import schemas
from studio.api.http import api_view, read_json_object
from studio.api.routes import Route, register
from studio.reviews.decisions import DecisionForm, decide

__all__ = ("review_decision", "urlpatterns")


@api_view("POST")
def review_decision(request: HttpRequest, thread_id: str) -> HttpResponse:
    body = read_json_object(request)
    outcome = decide(request.user, thread_id, body, strings=False)
    return JsonResponse(outcome.as_json(), status=200 if outcome.duplicate else 201)


urlpatterns = register(
    Route(
        "POST",
        "/reviews/{thread_id}/decision",
        review_decision,
        name="review-decision",
        summary="Decide a governed review (approve or reject)",
        tag="reviews",
        body=DecisionForm,
        response=schemas.DecisionOutcome,
        status=201,
        statuses={200: "The same decision_id again: the first outcome."},
        errors=(401, 403, 404, 409, 422),
        description="The JSON twin of the reviewer console's form. The "
        "reviewer is the token's or session's user (a sent reviewer is 422).",
        raw=True,
    )
)

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

from studio.api.http import api_view, read_json_object
from studio.reviews.decisions import decide

__all__ = ("review_decision",)


@api_view("POST")
def review_decision(request: HttpRequest, thread_id: str) -> HttpResponse:
    body = read_json_object(request)
    outcome = decide(request.user, thread_id, body, strings=False)
    return JsonResponse(outcome.as_json(), status=200 if outcome.duplicate else 201)

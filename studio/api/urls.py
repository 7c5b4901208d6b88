"""The JSON API under ``/api/``: namespace ``api``.

Each resource module (``assistants``, ``threads``, ``runs``) registers its
operations in the route table (``studio.api.routes.register``) and exports the
resulting ``urlpatterns``; this module puts them together, with the review
decision address, the OpenAPI description (``openapi.json``, ``docs``) and the
catch-all. Every address answers JSON, an unknown one included
(``{"detail": ...}``, 404), except the docs page.
"""

from __future__ import annotations

from django.urls import path, re_path

from studio.api import assistants, openapi, reviews, runs, schemas, threads
from studio.api.routes import Route, register
from studio.api.views import not_found
from studio.reviews.decisions import DecisionForm

app_name = "api"

urlpatterns = [
    *assistants.urlpatterns,
    *threads.urlpatterns,
    *runs.urlpatterns,
    *register(
        Route(
            "POST",
            "/reviews/{thread_id}/decision",
            reviews.review_decision,
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
    ),
    path("openapi.json", openapi.openapi_json, name="openapi"),
    path("docs", openapi.api_docs, name="docs"),
    # Last: anything else under /api/ is a JSON 404, not the HTML page.
    re_path(r"^.*$", not_found),
]

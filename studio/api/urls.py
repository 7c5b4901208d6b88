"""The JSON API under ``/api/``: namespace ``api``.

Every address answers JSON, an unknown one included (``{"detail": ...}``, 404).
"""

from __future__ import annotations

from django.urls import path, re_path

from studio.api import reviews
from studio.api.views import not_found

app_name = "api"

urlpatterns = [
    path(
        "reviews/<str:thread_id>/decision",
        reviews.review_decision,
        name="review-decision",
    ),
    # Last: anything else under /api/ is a JSON 404, not the HTML page.
    re_path(r"^.*$", not_found),
]

"""The JSON API under ``/api/``: namespace ``api``.

Each resource module (``assistants``, ``threads``, ``runs``, ``reviews``)
registers its operations in the route table (``studio.api.routes.register``) and
exports the resulting ``urlpatterns``; this module puts them together, with the
OpenAPI description (``openapi.json``, ``docs``) and the
catch-all. Every address answers JSON, an unknown one included
(``{"detail": ...}``, 404), except the docs page.
"""

from __future__ import annotations

from django.urls import path, re_path

from studio.api import assistants, openapi, reviews, runs, threads
from studio.api.views import not_found

app_name = "api"

urlpatterns = [
    *assistants.urlpatterns,
    *threads.urlpatterns,
    *runs.urlpatterns,
    *reviews.urlpatterns,
    path("openapi.json", openapi.openapi_json, name="openapi"),
    path("docs", openapi.api_docs, name="docs"),
    # Last: anything else under /api/ is a JSON 404, not the HTML page.
    re_path(r"^.*$", not_found),
]

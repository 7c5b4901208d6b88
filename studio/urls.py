"""HTTP addresses (DESIGN.md, "Addresses"); WebSocket ones are in ``studio.routing``.

This is the project URLconf. The studio's own pages live in the ``studio`` namespace
(``{% url "studio:index" %}``); Django's auth views stay un-namespaced, where
``LOGIN_URL`` and the views themselves look them up ("login", "logout").
"""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from studio.observability import views as observability
from studio.views import graphs, pages, threads

app_name = "studio"

studio_patterns = [
    path("", pages.index, name="index"),
    path("graphs/<str:name>/", graphs.graph_detail, name="graph-detail"),
    path("graphs/<str:name>/graph.svg", graphs.graph_svg, name="graph-svg"),
    path("graphs/<str:name>/graph.mmd", graphs.graph_mermaid, name="graph-mermaid"),
    path("graphs/<str:name>/runs/", graphs.run_start, name="run-start"),
    path("threads/", threads.thread_list, name="thread-list"),
    path("threads/<str:thread_id>/", threads.thread_detail, name="thread-detail"),
    path(
        "threads/<str:thread_id>/compare/",
        threads.thread_compare,
        name="thread-compare",
    ),
    path(
        "threads/<str:thread_id>/waterfall/",
        threads.thread_waterfall,
        name="thread-waterfall",
    ),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>/",
        threads.checkpoint_detail,
        name="checkpoint-detail",
    ),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>/replay/",
        threads.checkpoint_replay,
        name="checkpoint-replay",
    ),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>/fork/",
        threads.checkpoint_fork,
        name="checkpoint-fork",
    ),
    path(
        "threads/<str:thread_id>/checkpoints/<str:checkpoint_id>/blame/",
        threads.checkpoint_blame,
        name="checkpoint-blame",
    ),
]

urlpatterns = [
    path("", include((studio_patterns, app_name))),
    path("reviews/", include("studio.reviews.urls")),
    path("purchases/", include("studio.purchases.urls")),
    path("api/", include("studio.api.urls")),
    path("account/", include("studio.account.urls")),
    path("healthz", observability.healthz, name="healthz"),
    path("readyz", observability.readyz, name="readyz"),
    path("metrics", observability.metrics_export, name="metrics"),
    # Only the auth views we ship templates for (no e-mail, so no password reset).
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]

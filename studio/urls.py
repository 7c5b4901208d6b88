"""HTTP addresses (DESIGN.md, "Addresses"); WebSocket ones are in ``studio.routing``.

This is the project URLconf. The studio's own pages live in the ``studio`` namespace
(``{% url "studio:index" %}``); Django's auth views stay un-namespaced, where
``LOGIN_URL`` and the views themselves look them up ("login", "logout").
"""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from studio.views import pages

app_name = "studio"

studio_patterns = [
    path("", pages.index, name="index"),
]

urlpatterns = [
    path("", include((studio_patterns, app_name))),
    # Only the auth views we ship templates for (no e-mail, so no password reset).
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]

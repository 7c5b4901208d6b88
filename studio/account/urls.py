"""The account pages' addresses (DESIGN.md, "Addresses"): namespace ``account``."""

from __future__ import annotations

from django.urls import path

from studio.account import views

app_name = "account"

urlpatterns = [
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]

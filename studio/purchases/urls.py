"""The requester's addresses: namespace ``purchases``."""

from __future__ import annotations

from django.urls import path

from studio.purchases import views

app_name = "purchases"

urlpatterns = [
    path("", views.purchase_list, name="list"),
    path("new/", views.purchase_new, name="new"),
    path("<str:thread_id>/change/", views.purchase_change, name="change"),
]

"""The reviewer console's addresses (DESIGN.md, "Addresses"): namespace ``reviews``."""

from __future__ import annotations

from django.urls import path

from studio.reviews import views

app_name = "reviews"

urlpatterns = [
    path("", views.review_queue, name="queue"),
    path("audit/", views.audit_log, name="audit"),
    path("<str:thread_id>/", views.review_detail, name="detail"),
]

from __future__ import annotations

from django.apps import AppConfig


class StudioConfig(AppConfig):
    name = "studio"
    verbose_name = "Graph Studio"
    default_auto_field = "django.db.models.BigAutoField"

from __future__ import annotations

from django.apps import AppConfig


class StudioConfig(AppConfig):
    name = "studio"
    verbose_name = "Graph Studio"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # OpenTelemetry, when OTEL_* asks for it (README, "Operating it")
        from studio.observability.tracing import setup  # noqa: PLC0415

        setup()
        # /metrics reads the run queue and the review queue at each scrape
        from studio.observability.metrics import add_scrape_collector  # noqa: PLC0415
        from studio.observability.queue_gauges import QueueGauges  # noqa: PLC0415

        add_scrape_collector(QueueGauges())

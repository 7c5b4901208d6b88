"""Gauges read from the database at each scrape: runs pending or running, reviews waiting.

Kept apart from :mod:`studio.observability.metrics` (the instruments, which services
count into) because it reads through the services: registered by the app's
``ready()`` with :func:`~studio.observability.metrics.add_scrape_collector`.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from studio.reviews.queue import waiting_totals
from studio.services.runs import active_counts

__all__ = ("QueueGauges",)


class QueueGauges(Collector):
    """``studio_runs``, ``studio_reviews_waiting``, ``studio_reviews_oldest_wait_seconds``."""

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "studio_runs", "Runs pending or running now.", labels=["graph", "status"]
        )
        for graph, status, count in active_counts():
            runs.add_metric([graph, status], count)
        yield runs
        waiting, oldest = waiting_totals()
        yield GaugeMetricFamily(
            "studio_reviews_waiting",
            "Interrupts waiting for a reviewer's decision.",
            value=waiting,
        )
        age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
        yield GaugeMetricFamily(
            "studio_reviews_oldest_wait_seconds",
            "How long the oldest waiting review has waited (0 when none).",
            value=age,
        )

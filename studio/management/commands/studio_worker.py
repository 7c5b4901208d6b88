"""``manage.py studio_worker``: run queued runs (scale-out; start as many as you like)."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from studio.services.worker import LEASE_SECONDS, Worker


class Command(BaseCommand):
    help = "Claim and execute queued runs until stopped (SIGINT/SIGTERM)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--name", default=None, help="lease owner name (default host:pid)"
        )
        parser.add_argument(
            "--once", action="store_true", help="run queued runs, then exit"
        )
        parser.add_argument(
            "--lease-seconds",
            type=float,
            default=LEASE_SECONDS,
            help="how long a claimed run stays this worker's without a heartbeat "
            "(heartbeats every third of it, at most every 5 s); a run whose worker "
            "died is queued again after this (default %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        lease = options["lease_seconds"]
        if not lease > 0:
            raise CommandError("--lease-seconds must be more than 0.")
        worker = Worker(name=options["name"], lease_seconds=lease)
        try:
            self._work(worker, once=options["once"])
        finally:
            worker.close()
            self.stdout.write(f"worker {worker.name}: stopped, connections closed")

    def _work(self, worker: Worker, *, once: bool) -> None:
        if once:
            while worker.run_once():
                pass
            return

        def stop(*_: Any) -> None:
            worker.drain("worker stopping")  # the run in progress ends at its next step

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"worker {worker.name}: waiting for runs")
        worker.run_forever()

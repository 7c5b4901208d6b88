"""``manage.py studio_worker``: run queued runs (scale-out; start as many as you like)."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand

from studio.services.worker import Worker


class Command(BaseCommand):
    help = "Claim and execute queued runs until stopped (SIGINT/SIGTERM)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--name", default=None, help="lease owner name (default host:pid)"
        )
        parser.add_argument(
            "--once", action="store_true", help="run queued runs, then exit"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        worker = Worker(name=options["name"])
        if options["once"]:
            while worker.run_once():
                pass
            return

        def stop(*_: Any) -> None:
            worker.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"worker {worker.name}: waiting for runs")
        worker.run_forever()

"""``manage.py seed_demo``: the demo login and demo runs for embedded mode. Safe to run again.

The first time (when the demo user has no threads) it also queues one run of
each shipped demo graph, so the studio opens with something to look at: a
purchase paused at its review step, a finished research fan-out and a finished
tool agent conversation. The in-process worker runs them once the server starts.
``--no-runs`` skips them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from studio.models import Thread

REVIEWER_GROUPS = ("reviewers", "senior-reviewers")
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"

DEMO_RUNS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "purchase",
        {
            "request_id": "PO-1001",
            "approval_version": 1,
            "amount_minor": 4_800_000,
            "vendor": "Acme Office Supply",
            "category": "office",
            "reason": "Standing desks for the new team room",
        },
    ),
    ("research", {"question": "How do pricing and latency affect adoption?"}),
    ("tool_agent", {"messages": [{"role": "user", "content": "What is order A-1001 in EUR?"}]}),
)


class Command(BaseCommand):
    help = (
        "Create the demo reviewer (demo / demo) and the reviewer groups, if missing; "
        "queue one demo run per shipped graph the first time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-runs", action="store_true", help="do not queue demo runs")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        groups = {
            name: Group.objects.get_or_create(name=name)[0] for name in REVIEWER_GROUPS
        }
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=DEMO_USERNAME,
            defaults={"first_name": "Demo", "last_name": "Reviewer"},
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
        user.groups.add(groups["reviewers"])
        verb = "Created" if created else "Kept"
        self.stdout.write(f"{verb} demo user {DEMO_USERNAME!r} (group: reviewers).")
        if not options.get("no_runs") and not Thread.objects.filter(owner=user).exists():
            self._queue_demo_runs(user)

    def _queue_demo_runs(self, user: Any) -> None:
        from studio.services.runs import start_run  # noqa: PLC0415 - needs the app ready

        registered = set(getattr(settings, "STUDIO_GRAPHS", {}))
        queued = []
        for graph, payload in DEMO_RUNS:
            if graph in registered:
                start_run(graph=graph, user=user, input=payload)
                queued.append(graph)
        if queued:
            self.stdout.write(f"Queued demo runs: {', '.join(queued)}.")

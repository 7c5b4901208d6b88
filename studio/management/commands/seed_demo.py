"""``manage.py seed_demo``: demo accounts, one per role, and demo runs for embedded mode. Safe to run again.

Accounts (created once; an existing account's password is never changed):

- ``demo`` / ``demo``: a reviewer (group ``reviewers``), owner of the demo
  research and tool-agent runs;
- ``requester`` / ``requester``: in no group; owner of the demo purchases;
- ``senior`` / ``senior``: a senior reviewer (group ``senior-reviewers``), who
  approves after a reviewer above the second-level amount.

The first time (when an account has no threads) it also queues its demo runs:
two purchases paused at their review step (48,000 CNY: one reviewer decides;
72,500 CNY: a reviewer, then a senior reviewer), a research fan-out and a tool
agent conversation. The in-process worker runs them once the server starts.
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

DEMO_ACCOUNTS: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    # username, password, first name, last name, groups
    (DEMO_USERNAME, DEMO_PASSWORD, "Demo", "Reviewer", ("reviewers",)),
    ("requester", "requester", "Rita", "Requester", ()),
    ("senior", "senior", "Sam", "Senior", ("senior-reviewers",)),
)

DEMO_RUNS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "requester",
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
    (
        "requester",
        "purchase",
        {
            "request_id": "PO-1002",
            "approval_version": 1,
            "amount_minor": 7_250_000,
            "vendor": "Northwind Servers",
            "category": "hardware",
            "reason": "Two build servers for the CI farm",
        },
    ),
    (
        DEMO_USERNAME,
        "research",
        {"question": "How do pricing and latency affect adoption?"},
    ),
    (
        DEMO_USERNAME,
        "tool_agent",
        {"messages": [{"role": "user", "content": "What is order A-1001 in EUR?"}]},
    ),
    (  # waits for demo to approve or reject the email on its thread page
        DEMO_USERNAME,
        "tool_agent",
        {
            "messages": [
                {
                    "role": "user",
                    "content": "Email the total of A-1002 to finance@example.com",
                }
            ]
        },
    ),
)


class Command(BaseCommand):
    help = (
        "Create the demo accounts (demo, requester, senior; password = username) and "
        "the reviewer groups, if missing; queue the demo runs the first time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-runs", action="store_true", help="do not queue demo runs"
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        groups = {
            name: Group.objects.get_or_create(name=name)[0] for name in REVIEWER_GROUPS
        }
        user_model = get_user_model()
        users = {}
        for username, password, first, last, member_of in DEMO_ACCOUNTS:
            user, created = user_model.objects.get_or_create(
                username=username, defaults={"first_name": first, "last_name": last}
            )
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
            for name in member_of:
                user.groups.add(groups[name])
            users[username] = (user, created)
            verb = "Created" if created else "Kept"
            role = f"group: {', '.join(member_of)}" if member_of else "requester"
            self.stdout.write(
                f"{verb} demo user {username!r} ({role}; password {password!r} when created)."
            )
        if not options.get("no_runs"):
            fresh = {
                name
                for name, (user, _) in users.items()
                if not Thread.objects.filter(owner=user).exists()
            }
            self._queue_demo_runs({name: users[name][0] for name in fresh})

    def _queue_demo_runs(self, owners: dict[str, Any]) -> None:
        from studio.services.runs import start_run  # noqa: PLC0415 - needs the app ready

        registered = set(getattr(settings, "STUDIO_GRAPHS", {}))
        queued = []
        for owner, graph, payload in DEMO_RUNS:
            if graph in registered and owner in owners:
                metadata = (
                    {"request_id": payload["request_id"]}
                    if "request_id" in payload
                    else {}
                )
                start_run(
                    graph=graph,
                    user=owners[owner],
                    input=payload,
                    thread_metadata=metadata,
                )
                queued.append(graph)
        if queued:
            self.stdout.write(f"Queued demo runs: {', '.join(queued)}.")

"""``manage.py seed_demo``: the demo login for embedded mode. Safe to run again."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

REVIEWER_GROUPS = ("reviewers", "senior-reviewers")
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"


class Command(BaseCommand):
    help = "Create the demo reviewer (demo / demo) and the reviewer groups, if missing."

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

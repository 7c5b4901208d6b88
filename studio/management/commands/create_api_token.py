"""``manage.py create_api_token <username> [--name NAME]``: print a new personal API token.

The secret goes to stdout alone (``TOKEN=$(python manage.py create_api_token ada)``)
and is shown only this once: the database keeps its SHA-256. Programs send it as
``x-api-key`` or ``Authorization: Bearer``. Revoke it at ``/account/tokens/``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from studio.errors import InvalidInput
from studio.services import api_tokens


class Command(BaseCommand):
    help = "Create a personal API token for a user and print its secret (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="The account the token acts as.")
        parser.add_argument(
            "--name",
            default="default",
            help="A label for the token, e.g. where it is used (default: %(default)s).",
        )

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        model = get_user_model()
        user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"There is no user {username!r}.")
        if not user.is_active:
            raise CommandError(
                f"User {username!r} is inactive: a token would not authenticate."
            )
        try:
            issued = api_tokens.issue(user, name)
        except InvalidInput as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(issued.secret)
        self.stderr.write(
            f"Created the token {issued.token.name!r} ({issued.token.prefix}…) for "
            f"{username}. Store it now: it is not shown again.",
            style_func=str,  # a note, not an error: no red
        )

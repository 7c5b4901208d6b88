"""Personal API tokens: issue, list, revoke, and resolve a secret to its user.

Only the SHA-256 of a secret is stored (``ApiToken.digest``); the secret is
returned once, by :func:`issue`, and never again. Revoking deletes the row, so
a revoked token is answered exactly like one that never existed. Creating and
revoking are audited (``token.created``, ``token.revoked``) with the token's
prefix, never its secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from studio.errors import InvalidInput, NotFound
from studio.models import ApiToken
from studio.reviews import audit

__all__ = (
    "LAST_USED_RESOLUTION",
    "MAX_SECRET_LENGTH",
    "IssuedToken",
    "TokenRow",
    "clean_name",
    "issue",
    "revoke",
    "tokens_of",
    "user_for",
)

MAX_SECRET_LENGTH = 256
"""Longer strings are not tokens of ours: refused without a database lookup."""

LAST_USED_RESOLUTION = timedelta(minutes=1)
"""``last_used_at`` is written at most once a minute per token, not on every request."""

_NAME_MAX = 64


@dataclass(frozen=True, slots=True)
class TokenRow:
    """One token as the account page lists it (no secret: it is not stored)."""

    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A new token and its secret: show the secret once, then forget it."""

    token: TokenRow
    secret: str


def _row(token: ApiToken) -> TokenRow:
    return TokenRow(
        id=token.pk,
        name=token.name,
        prefix=token.prefix,
        created_at=token.created_at,
        last_used_at=token.last_used_at,
    )


def clean_name(name: str) -> str:
    """The token's label, trimmed; 1 to 64 printable characters.

    Raises:
        InvalidInput: empty, too long, or with control characters.
    """
    name = name.strip()
    if not name:
        raise InvalidInput("name: give the token a name (where you will use it).")
    if len(name) > _NAME_MAX:
        raise InvalidInput(f"name: at most {_NAME_MAX} characters.")
    if not name.isprintable():
        raise InvalidInput("name: use printable characters only.")
    return name


def issue(user: Any, name: str) -> IssuedToken:
    """Create a token for ``user``; the secret is in the result and nowhere else.

    Raises:
        InvalidInput: a bad name (see :func:`clean_name`).
    """
    token, secret = ApiToken.issue(user, name=clean_name(name))
    audit.record(
        user, "token.created", token_id=token.pk, name=token.name, prefix=token.prefix
    )
    return IssuedToken(token=_row(token), secret=secret)


def tokens_of(user: Any) -> list[TokenRow]:
    """The user's own tokens, newest first."""
    return [
        _row(t)
        for t in ApiToken.objects.filter(user=user).order_by("-created_at", "-pk")
    ]


def revoke(user: Any, token_id: int) -> TokenRow:
    """Delete one of ``user``'s tokens; requests carrying it get 401 from now on.

    Raises:
        NotFound: no such token among the user's own (another user's is not theirs).
    """
    token = ApiToken.objects.filter(pk=token_id, user=user).first()
    if token is None:
        raise NotFound(f"You have no API token {token_id}.")
    row = _row(token)
    token.delete()
    audit.record(
        user, "token.revoked", token_id=row.id, name=row.name, prefix=row.prefix
    )
    return row


def user_for(secret: str) -> Any | None:
    """The active user a token secret belongs to (None: unknown, revoked, inactive user).

    Marks the token used (``last_used_at``, at minute resolution).
    """
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=ApiToken.hash(secret))
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True)
            | Q(last_used_at__lte=now - LAST_USED_RESOLUTION)
        ).update(last_used_at=now)
    return token.user

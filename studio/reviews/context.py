"""Template context for every page: is the user a reviewer, and how many reviews wait for them."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from studio.reviews.queue import pending_count
from studio.services.access import review_levels

__all__ = ("review_badge",)


def review_badge(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not review_levels(user):
        return {"is_reviewer": False, "review_count": 0}
    return {"is_reviewer": True, "review_count": pending_count(user)}

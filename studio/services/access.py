"""Who may see and who may change a thread: the one place with these rules.

- The owner (who started the thread) sees and changes it; a superuser sees and
  changes every thread.
- Members of the ``reviewers`` group (level 1) and ``senior-reviewers`` (level 2)
  may *read* a thread of a governed graph that reached its review (it has a
  ``ReviewRequest``: waiting, decided or closed) unless they requested it, so a
  reviewer who comes late learns who decided. They answer it only through the
  reviewer console (``studio.reviews``), never by replaying or forking it: those
  need :func:`writable_thread`.
- Everyone else gets ``ThreadNotFound`` (404), as for a thread that does not
  exist: no existence leak.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from studio.errors import Forbidden, ThreadNotFound
from studio.models import ApprovalDecision, ReviewRequest, Thread

__all__ = (
    "REVIEWER_GROUPS",
    "can_change",
    "can_see",
    "review_levels",
    "visible_thread",
    "visible_threads",
    "writable_thread",
)

REVIEWER_GROUPS: dict[int, str] = {1: "reviewers", 2: "senior-reviewers"}
"""Approval level -> the Django group whose members decide it."""


def _signed_in(user: Any) -> bool:
    return user is not None and bool(getattr(user, "is_authenticated", False))


def review_levels(user: Any) -> frozenset[int]:
    """The approval levels this user may decide (by group membership, read fresh)."""
    if not _signed_in(user):
        return frozenset()
    names = set(
        user.groups.filter(name__in=REVIEWER_GROUPS.values()).values_list(
            "name", flat=True
        )
    )
    return frozenset(level for level, name in REVIEWER_GROUPS.items() if name in names)


def _reviewable(user: Any) -> Q:
    """Threads a reviewer may read: reviews they did not request, and any they decided."""
    if not review_levels(user):
        return Q(pk__in=())
    reviews = ReviewRequest.objects.filter(thread=OuterRef("pk")).exclude(
        requester_id=user.pk
    )
    decided = ApprovalDecision.objects.filter(
        thread=OuterRef("pk"), reviewer_id=user.pk
    )
    return Q(Exists(reviews)) | Q(Exists(decided))


def visible_threads(user: Any) -> QuerySet[Thread]:
    """The threads this user may see: the queryset twin of :func:`can_see`."""
    if not _signed_in(user):
        return Thread.objects.none()
    threads = Thread.objects.all()
    if user.is_superuser:
        return threads
    return threads.filter(Q(owner_id=user.pk) | _reviewable(user))


def can_see(user: Any, thread: Thread) -> bool:
    """Owners see their threads, superusers every thread, reviewers what they may decide."""
    if not _signed_in(user):
        return False
    if user.is_superuser or thread.owner_id == user.pk:
        return True
    return Thread.objects.filter(pk=thread.pk).filter(_reviewable(user)).exists()


def can_change(user: Any, thread: Thread) -> bool:
    """Only the owner (or a superuser) replays, forks or starts runs on a thread."""
    return _signed_in(user) and (bool(user.is_superuser) or thread.owner_id == user.pk)


def visible_thread(user: Any, thread_id: str) -> Thread:
    """The thread, if this user may see it; otherwise ThreadNotFound (never 403: no leak)."""
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None or not can_see(user, thread):
        raise ThreadNotFound(f"There is no thread {thread_id!r}.", thread_id=thread_id)
    return thread


def writable_thread(user: Any, thread_id: str) -> Thread:
    """The thread, if this user may change it.

    Raises:
        ThreadNotFound: the user may not even see it.
        Forbidden: a reviewer who may read it (they answer through the console).
    """
    thread = visible_thread(user, thread_id)
    if not can_change(user, thread):
        raise Forbidden(
            "You can read this thread because it waits for your review, but only "
            "its owner can replay, fork or run it. Decide it in the reviewer console.",
            thread_id=thread_id,
        )
    return thread

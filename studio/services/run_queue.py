"""The run queue's candidates: due pending runs of threads with no running run.

A worker asks for the first of them before every run it claims. Building and
compiling that ORM query took 1.2 ms of the worker's CPU a claim, more than the
rest of the claim; :func:`first_candidate` compiles it once per database and
runs the SQL with the claim's time, the only value in it that changes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from django.db import connection
from django.db.models import DateTimeField, Exists, OuterRef, QuerySet

from studio.models import Run

__all__ = ("candidates", "first_candidate")

_earlier_pending = Run.objects.filter(
    thread=OuterRef("thread"),
    status=Run.Status.PENDING,
    created_at__lt=OuterRef("created_at"),
)


def candidates(now: Any) -> QuerySet[Run]:
    """Due pending runs of threads with no running run, oldest first: read in
    that order through the ``(status, created_at)`` index (``studio_run_queue_order``),
    so a claim stops at the first that can go and never reads a finished run."""
    return (
        Run.objects.filter(status=Run.Status.PENDING, not_before__lte=now)
        .exclude(thread__runs__status=Run.Status.RUNNING)
        .exclude(Exists(_earlier_pending))  # a thread's runs go in order
        .order_by("created_at")
    )


def first_candidate(now: Any, busy: set[str], *, lock: bool) -> str | None:
    """The id of the first of :func:`candidates` at ``now`` not on a thread of
    ``busy``; with ``lock``, locked (``FOR UPDATE SKIP LOCKED``, inside the
    caller's transaction: Postgres), skipping runs another claim holds."""
    compiled = None if busy else _compiled(lock)  # busy: a retry, rare
    if compiled is None:
        return _query(now, busy, lock).first()
    sql, params, slots = compiled
    values = list(params)
    adapted = _adapt_time(now)
    for slot in slots:
        values[slot] = adapted
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        row = cursor.fetchone()
    return None if row is None else str(row[0])


def _query(now: Any, busy: set[str], lock: bool) -> QuerySet[Any]:
    query = candidates(now).exclude(thread_id__in=busy).values_list("pk", flat=True)
    if lock:
        query = query.select_for_update(skip_locked=True, of=("self",))
    return query


_SAMPLES = (
    datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC),
    datetime(2002, 3, 4, 5, 6, 7, 8, tzinfo=UTC),
)
"""Two times the query is compiled with: its parameters that differ are the time."""

_cache: dict[tuple[Any, ...], tuple[str, tuple[Any, ...], tuple[int, ...]] | None] = {}


def _compiled(lock: bool) -> tuple[str, tuple[Any, ...], tuple[int, ...]] | None:
    """The first candidate's SQL, its parameters and where the time goes in them;
    None when compiling it twice does not tell (then the ORM runs each time).

    Keyed by the database and by :func:`candidates` itself, so a test that
    replaces the function gets its own query."""
    key = (candidates, connection.alias, connection.settings_dict["NAME"], lock)
    if key in _cache:
        return _cache[key]
    first, second = (
        _query(when, set(), lock)[:1].query.sql_with_params() for when in _SAMPLES
    )
    slots = tuple(
        i for i, (a, b) in enumerate(zip(first[1], second[1], strict=True)) if a != b
    )
    understood = (
        first[0] == second[0]
        and bool(slots)
        and all(first[1][i] == _adapt_time(_SAMPLES[0]) for i in slots)
        and all(second[1][i] == _adapt_time(_SAMPLES[1]) for i in slots)
    )
    _cache[key] = (first[0], tuple(first[1]), slots) if understood else None
    return _cache[key]


def _adapt_time(when: Any) -> Any:
    """``when`` as the database's driver takes a ``not_before`` value."""
    field = cast("DateTimeField[Any, Any]", Run._meta.get_field("not_before"))
    return field.get_db_prep_value(when, connection)

"""Races on a real Postgres: the cases run in a child pytest.

Two reviewers at once (``review_race_cases.py``); the run queue's races and
dying workers (``run_race_cases.py``, also collected on SQLite by
``test_run_races.py``).

The studio tests' Django database is SQLite unless ``TEST_DATABASE_URL`` says
otherwise, and SQLite serializes writers; the race needs a server database whose
transactions overlap, so ``review_race_cases.py`` runs in a child process with
``TEST_DATABASE_URL`` pointing at a throwaway Postgres database.
"""

from __future__ import annotations

import pytest

from tests._support.postgres import studio_cases_on_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_two_reviewers_deciding_at_once_on_postgres() -> None:
    assert "2 passed" in studio_cases_on_postgres("review_race_cases.py")


def test_run_queue_races_and_dying_workers_on_postgres() -> None:
    """``run_race_cases.py``: one running run per thread (the partial unique index),
    two workers claiming one run 1,000 times, a run whose worker dies every time,
    the same resume twice at once (API, and API with the form), one
    ``Idempotency-Key`` sent twice at once."""
    assert "10 passed" in studio_cases_on_postgres("run_race_cases.py", timeout=600)

"""A claim (``services.runs.claim``) on the suite's database (SQLite by default)
and, in a child pytest, on a real Postgres (``run_queue_claim_cases.py``)."""

from __future__ import annotations

import pytest

from tests._support.postgres import studio_cases_on_postgres
from tests.studio.run_queue_claim_cases import *  # noqa: F403 - the cases, collected here


@pytest.mark.postgres
@pytest.mark.slow
def test_the_claim_cases_on_postgres() -> None:
    assert "12 passed" in studio_cases_on_postgres("run_queue_claim_cases.py")

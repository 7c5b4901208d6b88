"""The run queue's races and dying workers on the suite's database (SQLite by
default); ``test_review_race.py`` runs the same cases on a real Postgres."""

from __future__ import annotations

from tests.studio.run_race_cases import *  # noqa: F403 - the cases, collected here
from tests.studio.run_race_cases import _graphs  # noqa: F401 - the graphs they serve

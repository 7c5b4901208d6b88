"""Root conftest: kept minimal. Shared helpers live in tests/_support/.

Django is configured by pytest-django from ``tests.settings`` (pyproject.toml);
nothing here imports Django, so pure engine tests stay pure.
"""

from __future__ import annotations

import os

import pytest


def pytest_report_header(config: pytest.Config) -> list[str]:
    services = {
        name: "set" if os.environ.get(name) else "unset"
        for name in ("ENGINE_TEST_PG_DSN", "TEST_REDIS_URL")
    }
    listed = ", ".join(f"{name} {state}" for name, state in services.items())
    return [f"graph-studio: CI={os.environ.get('CI', '')!r}, {listed}"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove this process's throwaway SQLite files (see tests/settings.py)."""
    import tempfile  # noqa: PLC0415 - only at the end of the session
    from pathlib import Path  # noqa: PLC0415

    folder = Path(tempfile.gettempdir()) / "graph-studio-tests"
    for pattern in (
        f"checkpoints-{os.getpid()}.sqlite3*",
        f"test-{os.getpid()}.sqlite3*",
    ):
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)

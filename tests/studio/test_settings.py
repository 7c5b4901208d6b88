"""studio.settings read from the environment, imported fresh in a subprocess each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from django.conf import settings

PROBE = """
import json
from studio import settings as s
print(json.dumps({
    "db": s.DATABASES["default"]["ENGINE"],
    "layer": s.CHANNEL_LAYERS["default"]["BACKEND"],
    "debug": s.DEBUG,
    "embedded": s.EMBEDDED,
    "serve_static": s.SERVE_STATIC,
    "hosts": s.ALLOWED_HOSTS,
}))
"""
_CLEARED = (
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "SERVE_STATIC",
)


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        env=base | env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=False,
    )


def _values(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    values: dict[str, Any] = json.loads(result.stdout)
    return values


def test_embedded_defaults() -> None:
    values = _values(_settings(SECRET_KEY="k"))

    assert values == {
        "db": "django.db.backends.sqlite3",
        "layer": "studio.layers.EmbeddedChannelLayer",
        "debug": False,
        "embedded": True,
        "serve_static": True,
        "hosts": ["localhost", "127.0.0.1", "[::1]"],
    }


def test_scale_out_uses_postgres_and_redis() -> None:
    values = _values(
        _settings(
            SECRET_KEY="k",
            DATABASE_URL="postgresql://studio@db:5432/studio",
            REDIS_URL="redis://cache:6379/0",
            ALLOWED_HOSTS="studio.example.com",
        )
    )

    assert values["db"] == "django.db.backends.postgresql"
    assert values["layer"] == "studio.layers.RedisLayer"  # channels-redis, outage-proof
    assert (values["embedded"], values["serve_static"]) == (False, False)
    assert values["hosts"] == ["studio.example.com"]


def test_scale_out_refuses_to_start_without_a_secret_key() -> None:
    result = _settings(REDIS_URL="redis://cache:6379/0")

    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr

"""Read settings from the environment: booleans, lists and database URLs.

Kept apart from ``settings.py`` so the parsing is plain functions with tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

__all__ = (
    "database_from_url",
    "env_bool",
    "env_list",
    "is_postgres_url",
    "postgres_pool_options",
)

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_POSTGRES_SCHEMES = frozenset({"postgres", "postgresql"})


def env_bool(
    name: str, default: bool = False, environ: Mapping[str, str] = os.environ
) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case); anything else is an error."""
    raw = environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1 or 0.")


def env_list(
    name: str, default: str, environ: Mapping[str, str] = os.environ
) -> list[str]:
    """A comma-separated list, blanks dropped."""
    return [
        item.strip() for item in environ.get(name, default).split(",") if item.strip()
    ]


def is_postgres_url(url: str) -> bool:
    return urlsplit(url).scheme in _POSTGRES_SCHEMES


def postgres_pool_options(max_size: int) -> dict[str, Any]:
    """Django's Postgres connection pool (``OPTIONS["pool"]``) for the studio.

    A connection is checked as it is lent (one empty query): after a Postgres
    restart every idle connection is dead, and without the check the first
    request on each answered 500.
    """
    from psycopg_pool import ConnectionPool  # noqa: PLC0415 (Postgres only)

    return {
        "min_size": 1,
        "max_size": max_size,
        "timeout": 20,
        "check": ConnectionPool.check_connection,
    }


def database_from_url(url: str, *, base_dir: Path) -> dict[str, Any]:
    """Turn ``DATABASE_URL`` into a ``DATABASES["default"]`` entry.

    - ``sqlite:///db.sqlite3`` is relative to ``base_dir``; ``sqlite:////abs/path`` is absolute.
    - ``postgres://user:password@host:port/name?sslmode=require`` (or ``postgresql://``);
      query parameters become psycopg connection options.
    """
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        name = (
            unquote(parts.path)[1:]
            if parts.path.startswith("/")
            else unquote(parts.path)
        )
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL {url!r} names no SQLite file.")
        path = Path(name)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path if path.is_absolute() else base_dir / path,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    if parts.scheme in _POSTGRES_SCHEMES:
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(
                f"DATABASE_URL {_redact(url)!r} names no database."
            )
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": dict(parse_qsl(parts.query)),
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL {_redact(url)!r}: use sqlite:///path or postgresql://user@host:port/name."
    )


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)

"""The process's checkpoint saver, from settings: SQLite file embedded, Postgres scale-out.

One saver per process, created on first use and shared by the web views and
the workers of that process.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

from django.conf import settings

from engine.checkpoint.base import BaseCheckpointSaver
from studio.observability.metrics import CountingSerializer

__all__ = ("get_saver", "reset_saver")

_lock = threading.Lock()
_saver: BaseCheckpointSaver | None = None
_closer: Any = None


def _postgres_dsn() -> str | None:
    url = getattr(settings, "STUDIO_CHECKPOINT_URL", "") or ""
    if url:
        return str(url)
    database = settings.DATABASES["default"]
    if "postgresql" not in database["ENGINE"]:
        return None
    host = database.get("HOST") or "127.0.0.1"
    port = database.get("PORT") or 5432
    user = database.get("USER") or "postgres"
    password = database.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else f"{user}@"
    return f"postgresql://{auth}{host}:{port}/{database['NAME']}"


def get_saver() -> BaseCheckpointSaver:
    """The checkpointer every studio graph is compiled with (set up on first use)."""
    global _saver, _closer
    if _saver is not None:
        return _saver
    with _lock:
        if _saver is None:
            dsn = _postgres_dsn()
            manager: AbstractContextManager[BaseCheckpointSaver]
            if dsn is not None:
                from engine.checkpoint.postgres import PostgresSaver  # noqa: PLC0415

                manager = PostgresSaver.from_conn_string(dsn)
            else:
                from engine.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415

                path = settings.STUDIO_CHECKPOINT_DB
                manager = SqliteSaver.from_conn_string(str(path))
            saver = manager.__enter__()
            saver.setup()
            saver.serde = CountingSerializer(saver.serde)  # checkpoint bytes
            _closer = manager
            _saver = saver
    return _saver


def reset_saver() -> None:
    """Close the saver (tests switch databases between cases)."""
    global _saver, _closer
    with _lock:
        if _closer is not None:
            _closer.__exit__(None, None, None)
        _saver = None
        _closer = None

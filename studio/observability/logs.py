"""Log lines that tie a run together: readable text by default, JSON on request.

Every line logged while a run executes carries the run's ids, wherever it comes
from (the worker, the engine, a node's own ``logging`` calls), so one run can be
followed across processes with ``grep run_id=...`` or a log store's filter:

- the worker puts ``thread_id``, ``run_id``, ``attempt`` and ``graph`` in a
  context variable for the run (:func:`run_context`); the engine copies context
  variables into the threads that run tasks, so node code sees them too;
- inside a task, ``node``, ``task_id``, ``step`` and ``checkpoint_id`` come from
  the engine's public accessors (``get_config()``, ``get_runtime()``): the
  engine knows nothing of this module;
- a caller may also pass any of them in ``extra=``, which wins.

:class:`RunContextFilter` stamps the ids on each record; :class:`TextFormatter`
appends them as ``key=value``; JSON lines come from ``python-json-logger``
(``LOG_FORMAT=json``), one object per line with the ids as top-level keys.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

__all__ = (
    "RUN_FIELDS",
    "RunContextFilter",
    "TextFormatter",
    "logging_config",
    "run_context",
)

RUN_FIELDS = (
    "graph",
    "thread_id",
    "run_id",
    "attempt",
    "node",
    "task_id",
    "step",
    "checkpoint_id",
)
"""The ids a line of a run may carry, in the order text lines show them."""

_run: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "studio_log_run", default=None
)


@contextlib.contextmanager
def run_context(**ids: Any) -> Iterator[None]:
    """Stamp ``ids`` on every line logged in this context (and the tasks it starts)."""
    known = {k: v for k, v in ids.items() if v is not None}
    token = _run.set({**(_run.get() or {}), **known})
    try:
        yield
    finally:
        _run.reset(token)


def _task_ids() -> dict[str, Any]:
    """The running engine task's ids, or nothing outside a task."""
    from engine.config import get_config  # noqa: PLC0415 - settings import this module
    from engine.runtime import get_runtime  # noqa: PLC0415

    try:
        metadata = get_config().get("metadata", {})
        info = get_runtime().execution_info
    except RuntimeError:  # not inside a task
        return {}
    ids: dict[str, Any] = {
        "node": metadata.get("langgraph_node"),
        "step": metadata.get("langgraph_step"),
    }
    if info is not None:
        ids.update(
            task_id=info.task_id,
            attempt=info.node_attempt,
            checkpoint_id=info.checkpoint_id or None,
            thread_id=info.thread_id,
        )
    return ids


class RunContextFilter(logging.Filter):
    """Adds the run's ids (:data:`RUN_FIELDS`) known at the call to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        found = {**(_run.get() or {}), **_task_ids()}
        for name in RUN_FIELDS:
            value = found.get(name)
            if value is not None and getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...`` with the run's ids that are known."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(
            f"{name}={value}"
            for name in RUN_FIELDS
            if (value := getattr(record, name, None)) is not None
        )
        if not ids:
            return line
        head, newline, trace = line.partition("\n")  # keep a traceback below
        return f"{head} {ids}{newline}{trace}"


_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_JSON = "%(asctime)s %(levelname)s %(name)s %(message)s"


def logging_config(log_format: str = "text", level: str = "INFO") -> dict[str, Any]:
    """Django's ``LOGGING`` for ``LOG_FORMAT`` (``text`` or ``json``) and ``LOG_LEVEL``."""
    log_format = log_format.strip().lower() or "text"
    if log_format == "text":
        formatter: dict[str, Any] = {"()": TextFormatter, "format": _TEXT}
    elif log_format == "json":
        formatter = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": _JSON,
            "rename_fields": {
                "asctime": "time",
                "levelname": "level",
                "name": "logger",
            },
            "timestamp": False,
        }
    else:
        raise ImproperlyConfigured(f"LOG_FORMAT={log_format!r}: use text or json.")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"run": {"()": RunContextFilter}},
        "formatters": {"studio": formatter},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "studio",
                "filters": ["run"],
            }
        },
        "root": {"handlers": ["console"], "level": level.upper()},
    }

"""Log lines of a run carry its ids, as text by default and as JSON on request."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from studio.models import Run
from studio.observability.logs import RunContextFilter, logging_config, run_context
from studio.services import runs
from studio.services.worker import Worker
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs({"observed": "tests.studio.observability_graphs:observed"})
REPO = Path(__file__).resolve().parents[2]


def _handler(log_format: str) -> tuple[logging.Handler, io.StringIO]:
    """The console handler ``logging_config`` describes, writing to a buffer."""
    spec = dict(logging_config(log_format)["formatters"]["studio"])
    factory = spec.pop("()")
    if isinstance(factory, str):
        factory = import_string(factory)
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(factory(fmt=spec.pop("format"), **spec))
    handler.addFilter(RunContextFilter())
    return handler, buffer


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    handler, buffer = _handler("json")
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _records(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line]


def test_every_line_of_a_run_carries_its_ids(json_lines: io.StringIO) -> None:
    user = User.objects.create_user("ops")
    run = runs.start_run(graph="observed", user=user, input={"log": []})

    assert Worker(name="w-logs").run_once()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCESS, run.error
    lines = [r for r in _records(json_lines) if r.get("run_id") == run.run_id]
    messages = [r["message"] for r in lines]
    assert "run queued" in messages
    assert any(m.startswith("run started (attempt 1") for m in messages)
    assert any(m.startswith("run finished: success") for m in messages)
    executed = [r for r in lines if r["message"] != "run queued"]
    for record in executed:  # the worker's lines, the engine's and the node's own
        assert record["thread_id"] == run.thread_id, record
        assert record["attempt"] == 1, record
        assert record["graph"] == "observed", record
    node_line = next(r for r in lines if r["message"] == "planning")
    assert node_line["logger"] == "tests.node"
    assert node_line["node"] == "plan" and node_line["step"] == 1
    assert node_line["task_id"] and node_line["checkpoint_id"]
    task_lines = [r for r in lines if r["message"].startswith("task ")]
    assert {r["node"] for r in task_lines} == {"plan", "flaky", "review"}
    assert all(r["task_id"] and r["step"] >= 1 for r in task_lines)
    saved = [r for r in lines if r["message"].startswith("checkpoint saved")]
    assert saved and all(r["checkpoint_id"] for r in saved)
    assert {"time", "level", "logger", "message"} <= set(node_line)


def test_lines_outside_a_run_carry_no_run_ids(json_lines: io.StringIO) -> None:
    logging.getLogger("tests.plain").warning("nothing to do with a run")

    (record,) = [r for r in _records(json_lines) if r["logger"] == "tests.plain"]
    assert record["level"] == "WARNING"
    assert not {"run_id", "thread_id", "node"} & set(record)


def test_text_lines_end_with_the_known_ids() -> None:
    handler, buffer = _handler("text")
    log = logging.getLogger("tests.text")
    log.addHandler(handler)
    log.propagate = False
    try:
        with run_context(run_id="r-1", thread_id="t-1", attempt=2):
            log.warning("slow step", extra={"step": 3})
            try:
                raise KeyError("k")
            except KeyError:
                log.exception("oops")
    finally:
        log.removeHandler(handler)
        log.propagate = True

    first, second, *trace = buffer.getvalue().splitlines()
    assert first.endswith(
        "WARNING tests.text: slow step thread_id=t-1 run_id=r-1 attempt=2 step=3"
    )
    assert second.endswith("oops thread_id=t-1 run_id=r-1 attempt=2")
    assert trace[0] == "Traceback (most recent call last):"


def test_log_format_json_configures_json_lines_from_settings() -> None:
    script = (
        "import django, logging; django.setup(); "
        "from studio.observability.logs import run_context\n"
        "with run_context(run_id='r-9', thread_id='t-9'):\n"
        "    logging.getLogger('studio.check').warning('hello')"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "LOG_FORMAT": "json",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stderr.strip().splitlines()[-1])
    assert record["message"] == "hello" and record["level"] == "WARNING"
    assert record["run_id"] == "r-9" and record["thread_id"] == "t-9"


def test_an_unknown_log_format_is_refused() -> None:
    with pytest.raises(ImproperlyConfigured, match="LOG_FORMAT='xml'"):
        logging_config("xml")

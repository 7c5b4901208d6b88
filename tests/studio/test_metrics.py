"""``/metrics``: refused without the configured credential; counters move as runs go."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client import REGISTRY

from studio.models import Run, Thread
from studio.observability.asgi import CountConnections
from studio.services import runs
from studio.services.worker import Worker
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs({"observed": "tests.studio.observability_graphs:observed"})
REPO = Path(__file__).resolve().parents[2]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_are_off_until_configured(client: Client) -> None:
    assert client.get("/metrics").status_code == 404


@override_settings(STUDIO_METRICS_TOKEN="s3cret")
def test_metrics_want_the_token(client: Client) -> None:
    missing = client.get("/metrics")
    wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
    right = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})

    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert wrong.status_code == 401
    assert right.status_code == 200
    assert right["Content-Type"].startswith("text/plain; version=")
    assert b"# TYPE studio_runs_queued_total counter" in right.content


@override_settings(STUDIO_METRICS_ALLOW=["10.0.0.0/8"])
def test_metrics_refuse_an_address_outside_the_allow_list(client: Client) -> None:
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.5").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200


def test_counters_and_histograms_move_as_runs_go_through() -> None:
    user = User.objects.create_user("ops")
    before = {
        "queued": sample("studio_runs_queued_total", graph="observed"),
        "started": sample("studio_runs_started_total", graph="observed"),
        "success": sample(
            "studio_runs_finished_total", graph="observed", status="success"
        ),
        "error": sample("studio_runs_finished_total", graph="observed", status="error"),
        "waits": sample("studio_run_queue_wait_seconds_count", graph="observed"),
        "runs": sample(
            "studio_run_duration_seconds_count", graph="observed", status="success"
        ),
        "plan": sample(
            "studio_task_duration_seconds_count", graph="observed", node="plan"
        ),
        "steps": sample("studio_step_duration_seconds_count", graph="observed"),
        "saves": sample("studio_checkpoint_save_seconds_count", graph="observed"),
        "bytes": sample("studio_checkpoint_bytes_written_total"),
        "interrupt": sample(
            "studio_tasks_finished_total",
            graph="observed",
            node="review",
            outcome="interrupt",
        ),
        "failed": sample(
            "studio_tasks_finished_total",
            graph="observed",
            node="finish",
            outcome="error",
        ),
    }

    first = runs.start_run(graph="observed", user=user, input={"fail": True})
    assert Worker().run_once()
    runs.start_run(
        graph="observed",
        user=user,
        thread_id=first.thread_id,
        command={"resume": "yes"},
    )
    assert Worker().run_once()

    assert sample("studio_runs_queued_total", graph="observed") == before["queued"] + 2
    assert (
        sample("studio_runs_started_total", graph="observed") == before["started"] + 2
    )
    assert (
        sample("studio_runs_finished_total", graph="observed", status="success")
        == before["success"] + 1
    )
    assert (
        sample("studio_runs_finished_total", graph="observed", status="error")
        == before["error"] + 1
    )
    assert (
        sample("studio_run_queue_wait_seconds_count", graph="observed")
        == before["waits"] + 2
    )
    assert (
        sample("studio_run_duration_seconds_count", graph="observed", status="success")
        == before["runs"] + 1
    )
    assert (
        sample("studio_task_duration_seconds_count", graph="observed", node="plan")
        == before["plan"] + 1
    )
    assert (
        sample("studio_step_duration_seconds_count", graph="observed")
        >= before["steps"] + 3
    )
    assert (
        sample("studio_checkpoint_save_seconds_count", graph="observed")
        >= before["saves"] + 3
    )
    assert sample("studio_checkpoint_bytes_written_total") > before["bytes"]
    assert (
        sample(
            "studio_tasks_finished_total",
            graph="observed",
            node="review",
            outcome="interrupt",
        )
        == before["interrupt"] + 1
    )
    assert (
        sample(
            "studio_tasks_finished_total",
            graph="observed",
            node="finish",
            outcome="error",
        )
        == before["failed"] + 1
    )


@override_settings(STUDIO_METRICS_TOKEN="t")
def test_queue_gauges_come_from_the_database(client: Client) -> None:
    user = User.objects.create_user("ops")
    runs.start_run(graph="observed", user=user, input={})
    auth = {"Authorization": "Bearer t"}

    pending = client.get("/metrics", headers=auth).content.decode()
    assert 'studio_runs{graph="observed",status="pending"} 1.0' in pending
    assert "studio_reviews_waiting 0.0" in pending
    assert "studio_reviews_oldest_wait_seconds 0.0" in pending

    Worker().run_once()
    done = client.get("/metrics", headers=auth).content.decode()
    assert 'studio_runs{graph="observed"' not in done


def test_a_lease_taken_over_is_counted() -> None:
    thread = Thread.objects.create(graph="observed")
    Run.objects.create(
        thread=thread,
        graph="observed",
        status=Run.Status.RUNNING,
        lease_owner="dead",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    before = sample("studio_worker_leases_taken_over_total")

    assert Worker().requeue_expired() == 1

    assert sample("studio_worker_leases_taken_over_total") == before + 1


def test_open_websockets_and_sse_streams_are_counted() -> None:
    seen: list[float] = []

    async def app(scope, receive, send):
        if scope["type"] == "websocket":
            await send({"type": "websocket.accept"})
        else:
            headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
            await send(
                {"type": "http.response.start", "status": 200, "headers": headers}
            )
        seen.append(sample("studio_open_connections", kind=kind))

    async def nothing(message):
        return None

    for kind in ("websocket", "sse"):
        before = sample("studio_open_connections", kind=kind)
        scope_type = "websocket" if kind == "websocket" else "http"
        asyncio.run(CountConnections(app)({"type": scope_type}, None, nothing))
        assert seen[-1] == before + 1
        assert sample("studio_open_connections", kind=kind) == before


def test_plain_http_responses_are_not_counted_as_streams() -> None:
    async def app(scope, receive, send):
        headers = [(b"content-type", b"text/html")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        assert sample("studio_open_connections", kind="sse") == before

    async def nothing(message):
        return None

    before = sample("studio_open_connections", kind="sse")
    asyncio.run(CountConnections(app)({"type": "http"}, None, nothing))


def test_several_processes_add_up_in_multiprocess_mode(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
    }
    setup = "import django; django.setup(); from studio.observability import metrics\n"

    def python(code: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", setup + code],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    python("metrics.RUNS_QUEUED.labels('multi').inc(2)")
    python("metrics.RUNS_QUEUED.labels('multi').inc(3)")
    scrape = python(
        "metrics._SCRAPE_TIME.clear()  # no database in this process\n"
        "print(metrics.exposition().decode())"
    )
    assert 'studio_runs_queued_total{graph="multi"} 5.0' in scrape


@override_settings(STUDIO_METRICS_TOKEN="t")
def test_the_grafana_dashboard_only_uses_metrics_that_exist(client: Client) -> None:
    dashboard = json.loads((REPO / "docs/operating/grafana-dashboard.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bstudio_[a-z_]+", target["expr"])
    }
    exposed = client.get("/metrics", headers={"Authorization": "Bearer t"}).content
    declared = set(re.findall(rb"^# TYPE (studio_[a-z_]+) (\w+)", exposed, re.M))
    names: set[str] = set()
    for name, kind in declared:
        base = name.decode()
        names.add(base)
        if kind == b"counter":
            names.add(f"{base}_total")
        if kind == b"histogram":
            names.update(f"{base}_{part}" for part in ("bucket", "sum", "count"))
    assert used and used <= names, used - names

"""``/healthz`` and ``/readyz``: what each check looks at, and that failures say which."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client, override_settings
from django.utils import timezone

from studio.models import WorkerHeartbeat
from studio.observability import health, heartbeats
from studio.services.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alive_worker() -> None:
    heartbeats.beat("worker-a")


def test_healthz_answers_without_a_session(client: Client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_readyz_is_ready_when_every_check_passes(client: Client, alive_worker) -> None:
    response = client.get("/readyz")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "migrations", "channel_layer", "workers"}
    assert all(check["ok"] for check in body["checks"].values())
    assert body["checks"]["workers"]["detail"] == "1 alive"


def test_readyz_fails_without_a_recent_worker_heartbeat(client: Client) -> None:
    WorkerHeartbeat.objects.create(
        name="gone", seen_at=timezone.now() - timedelta(minutes=5)
    )

    response = client.get("/readyz")

    assert response.status_code == 503
    workers = response.json()["checks"]["workers"]
    assert workers["ok"] is False
    assert "no worker heartbeat in the last 30 s" in workers["detail"]


@override_settings(STUDIO_EXPECT_WORKERS=False)
def test_readyz_skips_the_worker_check_when_no_workers_are_expected(
    client: Client,
) -> None:
    response = client.get("/readyz")

    assert response.status_code == 200
    assert "workers" not in response.json()["checks"]


def test_readyz_names_a_migration_that_is_not_applied(
    client: Client, alive_worker
) -> None:
    MigrationRecorder(connection).record_unapplied("studio", "0006_worker_heartbeat")
    try:
        response = client.get("/readyz")
    finally:
        MigrationRecorder(connection).record_applied("studio", "0006_worker_heartbeat")

    assert response.status_code == 503
    migrations = response.json()["checks"]["migrations"]
    assert migrations == {
        "ok": False,
        "detail": "1 not applied: studio.0006_worker_heartbeat",
        "ms": migrations["ms"],
    }


@pytest.mark.redis
def test_readyz_fails_when_the_channel_layer_is_unreachable(
    client: Client, alive_worker
) -> None:
    unreachable = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    with override_settings(CHANNEL_LAYERS=unreachable):
        response = client.get("/readyz")

    assert response.status_code == 503
    layer = response.json()["checks"]["channel_layer"]
    assert layer["ok"] is False
    assert layer["detail"].startswith("failed (")
    assert "127.0.0.1" not in layer["detail"]  # no addresses in a public answer


@override_settings(STUDIO_READYZ_TIMEOUT=0.2)
def test_readyz_gives_up_on_a_check_that_hangs(
    client: Client, alive_worker, monkeypatch
) -> None:
    def hang() -> str:
        time.sleep(1.0)
        return "too late"

    monkeypatch.setattr(health, "_database", hang)
    started = time.monotonic()

    response = client.get("/readyz")

    assert time.monotonic() - started < 0.9
    assert response.status_code == 503
    assert response.json()["checks"]["database"]["detail"] == "no answer within 0.2 s"


def test_a_running_worker_beats_and_forgets_its_row_when_it_stops() -> None:
    worker = Worker(name="beating")
    thread = threading.Thread(target=worker.run_forever, kwargs={"poll": 0.05})
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not heartbeats.recent(5) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(WorkerHeartbeat.objects.values_list("name", flat=True)) == [
            "beating"
        ]
    finally:
        worker.stopping.set()
        thread.join(timeout=10)
    assert not WorkerHeartbeat.objects.exists()

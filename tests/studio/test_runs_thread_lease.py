"""The run queue under the engine's thread lease: a worker waits for a lease it
cannot take yet (a dead worker's, until it expires) instead of failing the run,
and the engine's lease lasts as long as the worker's own."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from studio.models import Run
from studio.services import runs
from studio.services.saver import get_saver
from studio.services.worker import LEASE_SECONDS, Worker
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs({"slow": "tests.studio.engine_graphs_for_tests:slow"})


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password="x")


def test_requeued_run_takes_over_the_dead_workers_expired_thread_lease(
    alice: User,
) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    assert Worker(name="dead-worker", lease_seconds=1.0).claim() is not None
    # the dead worker's run held the thread when it died: its claim has run out,
    # its thread lease (renewed a little later) runs out a moment after
    saver = get_saver()
    saver.acquire_lease(run.thread_id, "", "dead-worker:run", 1.0)
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    started = time.monotonic()

    assert Worker(name="rescuer", lease_seconds=1.0).run_once()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCESS, run.error
    assert run.attempt == 2
    assert time.monotonic() - started >= 0.5  # it waited for the thread lease
    assert saver.lease_seconds == 1.0
    assert saver.get_lease(run.thread_id, "") is None


def test_worker_waits_for_a_thread_another_process_holds(alice: User) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    saver = get_saver()
    saver.acquire_lease(run.thread_id, "", "library-run", 0.5)  # then it dies

    assert Worker(name="w", lease_seconds=LEASE_SECONDS).run_once()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCESS, run.error


def test_worker_runs_wait_for_a_busy_thread_whatever_the_client_asked(
    alice: User,
) -> None:
    run = runs.start_run(graph="slow", user=alice, input={"text": "a"})
    run.config = {"configurable": {"on_busy": "raise"}}

    config = Worker()._config(run)

    assert config["configurable"]["on_busy"] == "wait"


def test_engine_lease_default_is_the_workers() -> None:
    from engine.checkpoint._lease import DEFAULT_LEASE_SECONDS  # noqa: PLC0415

    assert DEFAULT_LEASE_SECONDS == LEASE_SECONDS

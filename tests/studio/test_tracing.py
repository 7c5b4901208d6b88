"""Traces through the studio: the request that queues a run is the run span's parent."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from studio.models import Run
from studio.observability import tracing
from studio.services import runs
from studio.services.worker import Worker
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db(transaction=True)

_graphs = serve_graphs({"observed": "tests.studio.observability_graphs:observed"})


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield provider, exporter
    finally:
        tracing.use_provider(None)


def test_tracing_is_off_without_otel_variables() -> None:
    assert tracing.setup({}) is False
    assert (
        tracing.setup(
            {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}
        )
        is False
    )
    assert not tracing.enabled()
    assert tracing.current_carrier() == {}
    assert tracing.engine_tracer() is None


def test_untraced_runs_store_no_trace_context() -> None:
    run = runs.start_run(graph="observed", user=User.objects.create_user("u"), input={})

    assert run.trace_context == {}


def test_the_run_span_continues_the_trace_of_the_request_that_queued_it(
    provider,
) -> None:
    sdk, exporter = provider
    user = User.objects.create_user("ops")
    with sdk.get_tracer("web").start_as_current_span("POST /api/runs") as request:
        run = runs.start_run(graph="observed", user=user, input={"fail": True})
    assert Run.objects.get(pk=run.pk).trace_context["traceparent"].split("-")[1] == (
        f"{request.get_span_context().trace_id:032x}"
    )

    assert Worker().run_once()

    spans = exporter.get_finished_spans()
    (run_span,) = [s for s in spans if s.name == "run observed"]
    assert run_span.parent.span_id == request.get_span_context().span_id
    assert run_span.attributes["engine.run_id"] == run.run_id
    assert run_span.attributes["engine.thread_id"] == run.thread_id
    names = {s.name for s in spans}
    assert {"task plan", "task flaky", "task review", "checkpoint save"} <= names
    assert {s.context.trace_id for s in spans} == {request.get_span_context().trace_id}


def test_django_requests_get_spans_from_the_instrumentation(
    provider, client: Client
) -> None:
    from opentelemetry.instrumentation.django import DjangoInstrumentor  # noqa: PLC0415

    sdk, exporter = provider
    instrumentor = DjangoInstrumentor()
    instrumentor.instrument(tracer_provider=sdk)
    try:
        assert Client().get("/healthz").status_code == 200
    finally:
        instrumentor.uninstrument()

    (span,) = [s for s in exporter.get_finished_spans() if "healthz" in s.name]
    assert span.name == "GET healthz"


def test_an_otlp_endpoint_turns_tracing_on_at_startup() -> None:
    script = (
        "import django; django.setup()\n"
        "from opentelemetry import trace\n"
        "from studio.observability import tracing\n"
        "print(tracing.enabled(), type(trace.get_tracer_provider()).__module__)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_SERVICE_NAME": "studio-test",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "opentelemetry.sdk.trace"]
    assert "tracing on: spans go to OTLP as service studio-test" in done.stderr

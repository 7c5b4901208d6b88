"""OpenTelemetry for the studio: off unless ``OTEL_*`` turns it on.

Tracing starts (:func:`setup`, from the app's ``ready()``) when
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set
and ``OTEL_SDK_DISABLED`` is not true. Then the SDK exports spans over OTLP/HTTP
(the ``observability`` extra installs it), Django's request spans come from its
instrumentation, and the other standard variables (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_HEADERS``,
...) are read by the SDK as usual. Off, nothing of OpenTelemetry is imported.

A run is traced across processes: the request that queues it stores its trace
context on the run row (:func:`current_carrier` -> ``Run.trace_context``); the
worker continues that trace (:func:`continue_trace`) and hands the engine a
tracer (:func:`engine_tracer`), whose run span is then a child of the request's.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = (
    "continue_trace",
    "current_carrier",
    "enabled",
    "engine_tracer",
    "setup",
    "use_provider",
)

log = logging.getLogger(__name__)

_provider: Any = None
"""The TracerProvider spans go to while tracing is on; None when off."""


def _configured(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup(environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on when the environment asks for it; whether it is on."""
    if _provider is not None or not _configured(environ):
        return _provider is not None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not "
            "installed: install graph-studio[observability]; tracing stays off"
        )
        return False
    service = environ.get("OTEL_SERVICE_NAME") or "graph-studio"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use_provider(provider, set_global=True)
    try:
        from opentelemetry.instrumentation.django import (  # noqa: PLC0415
            DjangoInstrumentor,
        )
    except ImportError:
        log.warning("opentelemetry-instrumentation-django is missing: no request spans")
    else:
        DjangoInstrumentor().instrument(tracer_provider=provider)
    log.info("tracing on: spans go to OTLP as service %s", service)
    return True


def use_provider(provider: Any, *, set_global: bool = False) -> None:
    """Send spans to ``provider`` (None: tracing off). Tests pass an in-memory one."""
    global _provider
    _provider = provider
    if provider is not None and set_global:
        from opentelemetry import trace  # noqa: PLC0415

        trace.set_tracer_provider(provider)


def enabled() -> bool:
    return _provider is not None


def engine_tracer() -> Any:
    """The tracer the engine traces runs with, or None when tracing is off."""
    if _provider is None:
        return None
    return _provider.get_tracer("engine")


def current_carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``...); {} when off."""
    if _provider is None:
        return {}
    from opentelemetry import propagate  # noqa: PLC0415

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


@contextlib.contextmanager
def continue_trace(carrier: Mapping[str, str] | None) -> Iterator[None]:
    """Make the trace context in ``carrier`` current (nothing when off or empty)."""
    if _provider is None or not carrier:
        yield
        return
    from opentelemetry import context, propagate  # noqa: PLC0415

    token = context.attach(propagate.extract(dict(carrier)))
    try:
        yield
    finally:
        context.detach(token)

"""What operators watch: health checks, Prometheus metrics, structured logs, traces.

- :mod:`.health` answers ``/healthz`` and ``/readyz`` (database, migrations,
  channel layer, worker heartbeats); :mod:`.heartbeats` keeps the workers' rows.
- :mod:`.metrics` defines the Prometheus metrics and serves ``/metrics``
  (several processes through ``PROMETHEUS_MULTIPROC_DIR``).
- :mod:`.logs` formats log lines as text or JSON and stamps every line of a run
  with its ids.
- :mod:`.tracing` sets up OpenTelemetry when ``OTEL_*`` says so and carries a
  request's trace context through the run row to the worker.

Views live in :mod:`.views`; they call these modules and nothing else.
"""

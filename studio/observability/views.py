"""``/healthz``, ``/readyz`` and ``/metrics``: parse, call the service, answer.

The health views are async: a check waiting on a dead database must not take
the thread that runs the studio's synchronous views. None of them needs a
session; ``/metrics`` is guarded by :func:`studio.observability.metrics.allowed`.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from studio.observability import health, metrics

__all__ = ("healthz", "metrics_export", "readyz")


@never_cache
@require_GET
async def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse(health.liveness())


@never_cache
@require_GET
async def readyz(request: HttpRequest) -> HttpResponse:
    readiness = await health.readiness()
    return JsonResponse(readiness.as_dict(), status=200 if readiness.ready else 503)


@never_cache
@require_GET
def metrics_export(request: HttpRequest) -> HttpResponse:
    verdict = metrics.access(
        request.headers.get("Authorization", ""), request.META.get("REMOTE_ADDR", "")
    )
    if verdict.status != 200:
        response = HttpResponse(verdict.reason, status=verdict.status)
        if verdict.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics.exposition(), content_type=metrics.CONTENT_TYPE_LATEST)

"""Small API endpoints that belong to no resource."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from studio.api.errors import json_error

__all__ = ("not_found",)


@csrf_exempt
def not_found(request: HttpRequest) -> HttpResponse:
    """Any address under ``/api/`` that is not one: JSON 404, whatever the method."""
    return json_error(f"There is no API address {request.path!r}.", 404)

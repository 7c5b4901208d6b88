"""The API's route table: every operation once, used for URL routing and the OpenAPI document.

A resource module lists its operations as :class:`Route` values and turns them
into URL patterns with one call, :func:`register`; ``studio/api/urls.py``
includes each module's ``urlpatterns``. ``/api/openapi.json`` and ``/api/docs``
(``studio.api.openapi``) are generated from the same table, with the same
pydantic models the requests are validated with. Registering the runs, for
example (``studio/api/runs.py``, whose ``urlpatterns`` ``urls.py`` includes)::

    from studio.api.routes import Route, register

    def run_get(request, thread_id, run_id) -> dict:          # parsed for you
        return api_runs.get(request.user, thread_id, run_id)

    urlpatterns = register(
        # a view that parses its own request (an api_view): routed and documented
        Route("POST", "/threads/{thread_id}/runs/stream", runs_stream, raw=True,
              name="run-stream-create", summary="Create a run and stream it",
              tag="runs", body=RunCreate, media_type="text/event-stream",
              errors=(401, 403, 404, 409, 422)),
        # literal segments before {params} that would match them
        Route("POST", "/threads/{thread_id}/runs/wait", ...),
        Route("GET", "/threads/{thread_id}/runs/{run_id}", run_get,
              name="run-get", summary="Get a run", tag="runs",
              response=Run, errors=(401, 404)),
    )

Response models may live in the resource's own module; a model's name is its
component name in the document, so two different models may not share one.

How a route is served (unless ``raw``):

- the method is checked per address (405 with ``Allow`` otherwise), then the
  caller is authenticated and errors are rendered as ``{"detail": ...}``
  (``studio.api.http.api_view``);
- ``body`` (a :class:`~studio.api.schemas.Body`) is validated from the JSON
  body (an empty body is ``{}``) and passed as ``body=``; ``query`` (a
  :class:`~studio.api.schemas.Query`) from the query string, passed as
  ``query=``; path parameters are passed by name; a bad body or query is 422
  and the view is not called;
- the view returns an ``HttpResponse`` (sent as is: SSE, extra headers), or
  ``None`` (an empty answer with ``status``, e.g. 204), or JSON-able data
  (sent with ``status``).

``raw=True`` routes are only routed and documented: the view is an
``api_view`` already and reads the request itself (the review decision).

Paths are relative to ``/api`` and written as in OpenAPI (``{thread_id}``, one
path segment each). Register literal paths before parameterised ones that
would match them (``/threads/search`` before ``/threads/{thread_id}``): Django
tries patterns in order. Operations of one path may come from several
modules; each path gets one URL pattern, named after its first route.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.urls import URLPattern, path
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel

from studio.api.errors import MethodNotAllowed, error_response
from studio.api.http import api_view, read_json_object

__all__ = ("TABLE", "Method", "Route", "RouteTable", "register")

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]

_PARAM = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_PATH = re.compile(r"^(/([A-Za-z0-9._-]+|\{[a-z_][a-z0-9_]*\}))+$")


@dataclass(frozen=True, slots=True)
class Route:
    """One operation: a method on a path, its view, and what it takes and answers."""

    method: Method
    path: str
    """Relative to ``/api``, OpenAPI style: ``/threads/{thread_id}/state``."""
    view: Callable[..., Any]
    name: str
    """The operation id, unique: ``thread-get`` (also the URL name of the path's first route)."""
    summary: str
    tag: str
    """The resource it belongs to: ``assistants``, ``threads``, ``runs``, ``reviews``."""
    body: type[BaseModel] | None = None
    """The JSON body's model (validated and passed as ``body=``)."""
    query: type[BaseModel] | None = None
    """The query string's model (validated and passed as ``query=``)."""
    response: Any = None
    """What a success answers: a model, ``list[Model]``, ``dict[str, Model]``; None: no JSON."""
    status: int = 200
    errors: tuple[int, ...] = (401, 422)
    """The error statuses the operation may answer (all ``{"detail": ...}``)."""
    statuses: Mapping[int, str] = field(default_factory=dict)
    """Other success statuses and what they mean (same ``response``)."""
    media_type: str = "application/json"
    """Of the success answer: ``text/event-stream`` for streams."""
    description: str = ""
    headers: tuple[str, ...] = ()
    """Request headers it reads, by name (``studio.api.openapi.HEADER_PARAMETERS``)."""
    raw: bool = False
    """The view authenticates, parses and renders errors itself (an ``api_view``)."""

    def __post_init__(self) -> None:
        if not _PATH.match(self.path):
            raise ValueError(f"Route path {self.path!r}: use /segments and {{params}}")

    @property
    def parameters(self) -> tuple[str, ...]:
        """The path's parameter names, in order."""
        return tuple(_PARAM.findall(self.path))

    @property
    def django_path(self) -> str:
        return _PARAM.sub(r"<str:\1>", self.path.removeprefix("/"))


class RouteTable:
    """Every registered operation, in registration order (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._routes: dict[tuple[str, str], Route] = {}
        self._handlers: dict[tuple[str, str], Callable[..., HttpResponseBase]] = {}
        self.version = 0
        """Bumped on every change (the OpenAPI document is cached on it)."""

    def add(self, route: Route) -> bool:
        """Add ``route``; True when its path is new (it needs a URL pattern).

        The same operation registered again (a module reloaded) replaces the first.

        Raises:
            ValueError: another operation already answers this method and path,
                or already uses this name.
        """
        key = (route.method, route.path)
        with self._lock:
            existing = self._routes.get(key)
            if existing is not None and existing.name != route.name:
                raise ValueError(
                    f"{route.method} {route.path} is already {existing.name!r}"
                )
            for other in self._routes.values():
                if other.name == route.name and (other.method, other.path) != key:
                    raise ValueError(f"Route name {route.name!r} is already used")
            new_path = all(p != route.path for _, p in self._routes)
            self._routes[key] = route
            self._handlers[key] = _handler(route)
            self.version += 1
        return new_path

    def routes(self) -> list[Route]:
        with self._lock:
            return list(self._routes.values())

    def methods(self, path_template: str) -> dict[str, Callable[..., HttpResponseBase]]:
        """Method -> handler for one path."""
        with self._lock:
            return {
                method: self._handlers[(method, p)]
                for method, p in self._routes
                if p == path_template
            }


TABLE = RouteTable()
"""The API's one route table."""


def register(*routes: Route, table: RouteTable = TABLE) -> list[URLPattern]:
    """Add ``routes`` to ``table`` (the API's); the URL patterns of the paths that are new.

    Raises:
        ValueError: a method and path, or a name, already taken by another route.
    """
    patterns = []
    for route in routes:
        if table.add(route):
            patterns.append(
                path(route.django_path, _dispatcher(table, route.path), name=route.name)
            )
    return patterns


def _dispatcher(
    table: RouteTable, path_template: str
) -> Callable[..., HttpResponseBase]:
    @csrf_exempt  # token clients send no CSRF token; api_view checks session callers
    def dispatch(request: HttpRequest, **params: str) -> HttpResponseBase:
        handlers = table.methods(path_template)
        handler = handlers.get(str(request.method))
        if handler is None:
            return error_response(
                request, MethodNotAllowed(str(request.method), tuple(handlers))
            )
        return handler(request, **params)

    dispatch.__name__ = f"dispatch_{path_template}"
    return dispatch


def _handler(route: Route) -> Callable[..., HttpResponseBase]:
    if route.raw:
        return route.view

    def serve(request: HttpRequest, **params: str) -> HttpResponseBase:
        kwargs: dict[str, Any] = dict(params)
        if route.body is not None:
            kwargs["body"] = route.body.model_validate(_body(request))
        if route.query is not None:
            given = {key: request.GET[key] for key in request.GET}
            kwargs["query"] = route.query.model_validate_strings(given)
        answer = route.view(request, **kwargs)
        if isinstance(answer, HttpResponseBase):  # SSE streams included
            return answer
        if answer is None:
            return HttpResponse(status=route.status)
        if isinstance(answer, BaseModel):
            answer = answer.model_dump(mode="json")
        return JsonResponse(answer, status=route.status, safe=False)

    serve.__name__ = route.view.__name__
    serve.__doc__ = route.view.__doc__
    return api_view(route.method)(serve)


def _body(request: HttpRequest) -> dict[str, Any]:
    """The JSON object sent; ``{}`` for an empty body (``threads.copy`` sends none)."""
    if (request.META.get("CONTENT_LENGTH") or "0") == "0" and not request.body:
        return {}
    return read_json_object(request)  # 413 before reading a body declared too large

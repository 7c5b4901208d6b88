"""``/api/openapi.json`` and ``/api/docs``: the API described from its route table.

Nothing here is written per path: :func:`document` walks ``studio.api.routes.TABLE``
(every resource module registers its operations there, see that module) and
turns each route's pydantic models (``studio.api.schemas``) into OpenAPI 3.1
with ``TypeAdapter(...).json_schema()``: the request schemas in the document
are the models the requests are validated with. ``/api/docs`` renders the same
document as a page (``templates/api/docs.html``): every path, method, summary,
parameter and request/response schema, without scripts (the CSP forbids inline
ones and the page needs none).

Both addresses are public, as the reference server's: they describe the API
and hold no data.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from pydantic import BaseModel, TypeAdapter

from studio.api import assistants, reviews, runs, schemas, threads
from studio.api.routes import TABLE, Route

_RESOURCES = (assistants, reviews, runs, threads)
"""Imported for their routes: each registers its operations on import."""

__all__ = ("ERROR_STATUSES", "api_docs", "document", "openapi_json")

REF = "#/components/schemas/{model}"
TITLE = "Graph Studio API"
VERSION = "1"

ERROR_STATUSES: dict[int, str] = {
    400: "The engine refused the request (an ambiguous state update).",
    401: "No credentials, or an unknown, revoked or malformed token.",
    403: "Not allowed: a reviewer changing a thread, a governed write, a missing CSRF token.",
    404: "No such thing, or not yours (another user's thread is 404, never 403).",
    405: "Method not allowed here.",
    409: "Conflict: the id is taken, a run is active, the thread is governed.",
    413: "The body is larger than STUDIO_API_MAX_BODY_BYTES.",
    422: "Invalid input: malformed JSON, wrong types, unknown fields.",
    503: "The graph's registry entry cannot be imported or compiled.",
}
TAGS = {
    "assistants": "One assistant per registered graph: its id is uuid5 of the graph name.",
    "threads": "Threads, their state, history and time travel.",
    "runs": "Runs of a graph on a thread: background, wait, stream, join, cancel.",
    "reviews": "The reviewer console's decision protocol, for programs.",
}
SECURITY_SCHEMES = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
        "description": "A personal API token (what langgraph-sdk sends for api_key=).",
    },
    "Bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "The same token as Authorization: Bearer <token>.",
    },
    "Session": {
        "type": "apiKey",
        "in": "cookie",
        "name": "sessionid",
        "description": "The browser's session; unsafe methods need the CSRF token.",
    },
}

PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "assistant_id": {"type": "string", "format": "uuid"},
}
"""Path parameters with more to say than ``string`` (others are plain strings)."""
PATH_DESCRIPTIONS = {
    "assistant_id": "The assistant's UUID, or the graph's name; anything else is 422.",
}

SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event: its name and its data (JSON text).",
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string"},
        "id": {"type": "string"},
    },
    "required": ["data"],
}
"""The schema of each event of a ``text/event-stream`` answer (as OpenAPI 3.2's
``itemSchema`` says; clients of 3.1 read it per event too)."""

HEADER_PARAMETERS: dict[str, dict[str, Any]] = {
    "Idempotency-Key": {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[\\x21-\\x7e]+$",
        },
        "description": "Makes the request safe to send again: the same key from "
        "the same user (from the token or session) with the same thread and body "
        "answers the run it created first and queues nothing (two such requests "
        "at once make one run). The same key with another body or thread is 422; "
        "keys are per user (another user's key never names your run). 1 to 255 "
        "visible ASCII characters; kept as long as the run is.",
    },
}
"""Request headers an operation may read (``Route.headers`` names them)."""

_lock = threading.Lock()
_cache: dict[int, dict[str, Any]] = {}


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every registered route (cached per table version).

    Raises:
        ValueError: two different schemas share a name (a bug in the models).
    """
    version = TABLE.version
    with _lock:
        if version not in _cache:
            _cache.clear()
            _cache[version] = _build(TABLE.routes())
        return _cache[version]


@require_GET
def openapi_json(request: HttpRequest) -> HttpResponse:
    return JsonResponse(document())


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    doc = document()
    return render(request, "api/docs.html", _page(doc))


# -- the document ----------------------------------------------------------------------


class _Components:
    """The document's ``components.schemas``, filled as types are described."""

    def __init__(self) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}

    def describe(self, kind: Any) -> dict[str, Any]:
        """A schema for ``kind``: a ``$ref`` for a model, inline otherwise."""
        schema = TypeAdapter(kind).json_schema(ref_template=REF)
        for name, definition in schema.pop("$defs", {}).items():
            self._add(name, definition)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            if set(schema) != {"$ref"}:  # a recursive model is already a $ref
                self._add(kind.__name__, schema)
            return {"$ref": REF.format(model=kind.__name__)}
        return schema

    def _add(self, name: str, schema: dict[str, Any]) -> None:
        known = self.schemas.get(name)
        if known is not None and known != schema:
            raise ValueError(f"Two different schemas are named {name!r}")
        self.schemas[name] = schema


def _build(routes: Iterable[Route]) -> dict[str, Any]:
    components = _Components()
    error = components.describe(schemas.ErrorDetail)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(
            route, components, error
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": TITLE,
            "version": VERSION,
            "description": "The Agent Server protocol (LangGraph), served by Graph "
            "Studio: usable with langgraph-sdk at url='<host>/api'. Errors are "
            '{"detail": "..."}.',
        },
        "servers": [{"url": "/api"}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "security": [{name: []} for name in SECURITY_SCHEMES],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.schemas.items())),
            "securitySchemes": SECURITY_SCHEMES,
        },
    }


def _operation(
    route: Route, components: _Components, error: dict[str, Any]
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": route.name,
        "summary": route.summary,
        "tags": [route.tag],
    }
    if route.description:
        operation["description"] = route.description
    parameters: list[dict[str, Any]] = []
    for name in route.parameters:
        parameter = {
            "name": name,
            "in": "path",
            "required": True,
            "schema": dict(PATH_PARAMETERS.get(name, {"type": "string"})),
        }
        if name in PATH_DESCRIPTIONS:
            parameter["description"] = PATH_DESCRIPTIONS[name]
        parameters.append(parameter)
    if route.query is not None:
        parameters.extend(_query_parameters(route.query))
    parameters.extend(dict(HEADER_PARAMETERS[name]) for name in route.headers)
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        required = any(f.is_required() for f in route.body.model_fields.values())
        operation["requestBody"] = {
            "required": required,
            "content": {
                "application/json": {"schema": components.describe(route.body)}
            },
        }
    responses: dict[str, Any] = {}
    for status, meaning in {route.status: "", **route.statuses}.items():
        responses[str(status)] = _success(route, components, status, meaning)
    errors = set(route.errors) | ({413} if route.body is not None else set())
    for status in sorted(errors):
        responses[str(status)] = {
            "description": ERROR_STATUSES.get(status, "Error."),
            "content": {"application/json": {"schema": error}},
        }
    operation["responses"] = responses
    return operation


def _success(
    route: Route, components: _Components, status: int, meaning: str
) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": meaning or "Success."}
    if status == 204:
        answer["description"] = meaning or "Done: no content."
        return answer
    if route.response is not None:
        schema = components.describe(route.response)
        answer["content"] = {route.media_type: {"schema": schema}}
    elif route.media_type == "text/event-stream":
        answer["content"] = {route.media_type: {"schema": SSE_EVENT}}
    elif route.media_type != "application/json":
        answer["content"] = {route.media_type: {"schema": {"type": "string"}}}
    return answer


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = TypeAdapter(model).json_schema(ref_template=REF)
    required = set(schema.get("required", ()))
    parameters = []
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        description = prop.pop("description", "")
        prop.pop("title", None)
        parameter: dict[str, Any] = {
            "name": name,
            "in": "query",
            "required": name in required,
            "schema": prop,
        }
        if description:
            parameter["description"] = description
        parameters.append(parameter)
    return parameters


# -- the page -----------------------------------------------------------------------------


def _page(doc: dict[str, Any]) -> dict[str, Any]:
    """The docs template's context: operations by tag, then every schema."""
    by_tag: dict[str, list[dict[str, Any]]] = {name: [] for name in TAGS}
    components = doc["components"]["schemas"]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            body = op.get("requestBody")
            by_tag.setdefault(op["tags"][0], []).append(
                {
                    "id": op["operationId"],
                    "method": method.upper(),
                    "path": path,
                    "summary": op["summary"],
                    "description": op.get("description", ""),
                    "parameters": [
                        {
                            "name": p["name"],
                            "where": p["in"],
                            "required": p["required"],
                            "type": _type_name(p["schema"]),
                            "description": p.get("description", ""),
                        }
                        for p in op.get("parameters", [])
                    ],
                    "body": _shown(
                        body["content"]["application/json"]["schema"], components
                    )
                    if body
                    else None,
                    "body_required": bool(body and body["required"]),
                    "responses": [
                        {
                            "status": status,
                            "description": answer["description"],
                            "media_type": next(iter(answer.get("content", {})), ""),
                            "schema": _shown(
                                next(iter(answer["content"].values()))["schema"],
                                components,
                            )
                            if answer.get("content")
                            else None,
                        }
                        for status, answer in op["responses"].items()
                    ],
                }
            )
    return {
        "title": doc["info"]["title"],
        "description": doc["info"]["description"],
        "tags": [
            {"name": name, "description": TAGS.get(name, ""), "operations": ops}
            for name, ops in by_tag.items()
            if ops
        ],
        "schemas": [
            {"name": name, "json": json.dumps(schema, indent=2, sort_keys=True)}
            for name, schema in doc["components"]["schemas"].items()
        ],
    }


def _shown(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """A schema as the page shows it: a named model links to its section, and its
    JSON is the model's (not the ``$ref``)."""
    ref = schema.get("$ref")
    full = components.get(str(ref).rsplit("/", 1)[-1], schema) if ref else schema
    return {
        "name": _ref_name(schema),
        "label": _type_name(schema),
        "json": json.dumps(full, indent=2, sort_keys=True),
    }


def _ref_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    for key in ("items", "additionalProperties"):
        inner = schema.get(key)
        if isinstance(inner, dict):
            return _ref_name(inner)
    return ""


def _type_name(schema: dict[str, Any]) -> str:
    """``Thread``, ``array of Thread``, ``string``, ``boolean | integer``..."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type_name(s) for s in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type_name(schema['items'])}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type_name(schema['additionalProperties'])}"
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    return str(kind or "any")

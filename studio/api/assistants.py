"""The assistants resource: one assistant per registered graph (``studio.services.assistants``).

Every operation needs an authenticated caller (token or session); the graphs
are the same for everyone, as on the graphs page. ``{assistant_id}`` is the
assistant's UUID or the graph's name.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from studio.api import schemas
from studio.api.routes import Route, register
from studio.services import assistants

__all__ = ("urlpatterns",)

_ID_ERRORS = (401, 404, 422, 503)


def assistant_search(
    request: HttpRequest, *, body: schemas.AssistantSearch
) -> JsonResponse:
    found, more = assistants.search(**body.model_dump())
    response = JsonResponse(found, safe=False)
    if more:
        response["X-Pagination-Next"] = str(body.offset + body.limit)
    return response


def assistant_count(request: HttpRequest, *, body: schemas.AssistantCount) -> int:
    return assistants.count(**body.model_dump())


def assistant_get(request: HttpRequest, assistant_id: str) -> dict[str, Any]:
    return assistants.get(assistant_id)


def assistant_graph(
    request: HttpRequest, assistant_id: str, *, query: schemas.GraphQuery
) -> dict[str, Any]:
    return assistants.drawing(assistant_id, xray=query.xray)


def assistant_schemas(request: HttpRequest, assistant_id: str) -> dict[str, Any]:
    return assistants.json_schemas(assistant_id)


def assistant_subgraphs(
    request: HttpRequest, assistant_id: str, *, query: schemas.SubgraphsQuery
) -> dict[str, Any]:
    return assistants.subgraphs(assistant_id, recurse=query.recurse)


def assistant_subgraphs_of(
    request: HttpRequest,
    assistant_id: str,
    namespace: str,
    *,
    query: schemas.SubgraphsQuery,
) -> dict[str, Any]:
    return assistants.subgraphs(
        assistant_id, namespace=namespace, recurse=query.recurse
    )


urlpatterns = register(
    Route(
        "POST",
        "/assistants/search",
        assistant_search,
        name="assistant-search",
        summary="Search assistants (one per registered graph)",
        tag="assistants",
        body=schemas.AssistantSearch,
        response=list[schemas.Assistant],
        errors=(401, 404, 422),
        description="An unknown graph_id is 404, not an empty list (as the "
        "reference). X-Pagination-Next gives the next offset when there are more.",
    ),
    Route(
        "POST",
        "/assistants/count",
        assistant_count,
        name="assistant-count",
        summary="Count assistants",
        tag="assistants",
        body=schemas.AssistantCount,
        response=int,
        errors=(401, 404, 422),
    ),
    Route(
        "GET",
        "/assistants/{assistant_id}",
        assistant_get,
        name="assistant-get",
        summary="Get an assistant",
        tag="assistants",
        response=schemas.Assistant,
        errors=_ID_ERRORS,
        description="assistant_id: the assistant's UUID or the graph's name; "
        "anything else is 422 'Invalid assistant ID: must be a UUID'.",
    ),
    Route(
        "GET",
        "/assistants/{assistant_id}/graph",
        assistant_graph,
        name="assistant-graph",
        summary="Get the graph's nodes and edges",
        tag="assistants",
        query=schemas.GraphQuery,
        response=schemas.GraphDrawing,
        errors=_ID_ERRORS,
    ),
    Route(
        "GET",
        "/assistants/{assistant_id}/schemas",
        assistant_schemas,
        name="assistant-schemas",
        summary="Get the graph's JSON Schemas",
        tag="assistants",
        response=schemas.GraphSchemas,
        errors=_ID_ERRORS,
    ),
    Route(
        "GET",
        "/assistants/{assistant_id}/subgraphs",
        assistant_subgraphs,
        name="assistant-subgraphs",
        summary="Get the schemas of the graph's subgraphs",
        tag="assistants",
        query=schemas.SubgraphsQuery,
        response=dict[str, schemas.GraphSchemas],
        errors=_ID_ERRORS,
    ),
    Route(
        "GET",
        "/assistants/{assistant_id}/subgraphs/{namespace}",
        assistant_subgraphs_of,
        name="assistant-subgraphs-of",
        summary="Get the schemas of the subgraphs under a namespace",
        tag="assistants",
        query=schemas.SubgraphsQuery,
        response=dict[str, schemas.GraphSchemas],
        errors=_ID_ERRORS,
    ),
)

"""``/api/openapi.json`` and ``/api/docs``: generated from the route table and the
pydantic models the views validate with; and the route table's own rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import StreamingHttpResponse
from django.test import Client, RequestFactory
from pydantic import BaseModel

from studio.api import schemas
from studio.api.openapi import REF, document
from studio.api.routes import TABLE, Route, RouteTable, register
from studio.reviews.decisions import DecisionForm
from tests._support.api_calls import Api, token_for

pytestmark = pytest.mark.django_db

EXPECTED = {
    ("POST", "/assistants/search"),
    ("POST", "/assistants/count"),
    ("GET", "/assistants/{assistant_id}"),
    ("GET", "/assistants/{assistant_id}/graph"),
    ("GET", "/assistants/{assistant_id}/schemas"),
    ("GET", "/assistants/{assistant_id}/subgraphs"),
    ("GET", "/assistants/{assistant_id}/subgraphs/{namespace}"),
    ("POST", "/threads"),
    ("POST", "/threads/search"),
    ("POST", "/threads/count"),
    ("GET", "/threads/{thread_id}"),
    ("PATCH", "/threads/{thread_id}"),
    ("DELETE", "/threads/{thread_id}"),
    ("POST", "/threads/{thread_id}/copy"),
    ("GET", "/threads/{thread_id}/state"),
    ("POST", "/threads/{thread_id}/state"),
    ("POST", "/threads/{thread_id}/state/checkpoint"),
    ("GET", "/threads/{thread_id}/state/{checkpoint_id}"),
    ("POST", "/threads/{thread_id}/history"),
    ("POST", "/reviews/{thread_id}/decision"),
}


@pytest.fixture
def doc() -> dict[str, Any]:
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    return json.loads(response.content)


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, methods in doc["paths"].items()
        for method in methods
    }


def component(model: type[BaseModel]) -> dict[str, Any]:
    """The model's own JSON Schema, as the document's components hold it."""
    schema = model.model_json_schema(ref_template=REF)
    defs = schema.pop("$defs", {})
    if set(schema) == {"$ref"}:  # a recursive model is defined among its $defs
        return defs[model.__name__]
    return schema


def refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = {value["$ref"]} if isinstance(value.get("$ref"), str) else set()
        return found.union(*(refs(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(refs(v) for v in value))
    return set()


def test_openapi_lists_every_registered_route(doc: dict[str, Any]) -> None:
    listed = operations(doc)

    assert doc["openapi"] == "3.1.0"
    assert doc["servers"] == [{"url": "/api"}]
    assert listed >= EXPECTED
    assert {(r.method, r.path) for r in TABLE.routes()} == listed
    for path, methods in doc["paths"].items():
        for op in methods.values():
            assert op["summary"] and op["operationId"] and op["tags"]
            assert set(op["responses"]) >= {"401"}
            names = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert names == {part[1:-1] for part in path.split("/") if "{" in part}


def test_openapi_request_schemas_are_the_models_the_views_validate_with(
    doc: dict[str, Any],
) -> None:
    components = doc["components"]["schemas"]
    body = doc["paths"]["/threads"]["post"]["requestBody"]

    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ThreadCreate"
    }
    for route in TABLE.routes():
        if route.body is not None:
            assert components[route.body.__name__] == component(route.body)
    assert components["ThreadCreate"] == component(schemas.ThreadCreate)
    assert components["DecisionForm"] == component(DecisionForm)
    assert components["ThreadSearch"]["additionalProperties"] is False
    assert components["ThreadSearch"]["properties"]["limit"]["maximum"] == 1000


def test_openapi_response_schemas_and_refs_resolve(doc: dict[str, Any]) -> None:
    components = doc["components"]["schemas"]
    ok = doc["paths"]["/threads/search"]["post"]["responses"]["200"]

    assert ok["content"]["application/json"]["schema"] == {
        "type": "array",
        "items": {"$ref": "#/components/schemas/Thread"},
    }
    assert components["Thread"] == component(schemas.Thread)
    assert components["ThreadState"] == component(schemas.ThreadState)
    for ref in refs(doc):
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[-1] in components
    errors = doc["paths"]["/threads/{thread_id}/state"]["post"]["responses"]
    assert {"400", "403", "404", "409", "413", "422"} <= set(errors)
    assert errors["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorDetail"
    }
    assert "204" in doc["paths"]["/threads/{thread_id}"]["delete"]["responses"]


def test_openapi_query_parameters_come_from_the_query_models(
    doc: dict[str, Any],
) -> None:
    graph = doc["paths"]["/assistants/{assistant_id}/graph"]["get"]
    state = doc["paths"]["/threads/{thread_id}/state"]["get"]

    query = {p["name"]: p for p in graph["parameters"] if p["in"] == "query"}
    assert set(query) == {"xray"} and query["xray"]["required"] is False
    assert [p["name"] for p in state["parameters"]] == ["thread_id", "subgraphs"]
    assert state["parameters"][1]["schema"]["type"] == "boolean"


def test_openapi_describes_authentication(doc: dict[str, Any]) -> None:
    schemes = doc["components"]["securitySchemes"]

    assert schemes["ApiKey"] == {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
        "description": schemes["ApiKey"]["description"],
    }
    assert {"ApiKey": []} in doc["security"]


def test_openapi_is_served_without_authentication_and_only_to_get() -> None:
    assert Client().get("/api/openapi.json").status_code == 200
    assert Client().post("/api/openapi.json").status_code == 405


def test_api_docs_page_lists_every_path_method_summary_and_schema(ada: User) -> None:
    response = Client().get("/api/docs")

    html = response.content.decode()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    for route in TABLE.routes():
        assert f"<code>{route.path}</code>" in html
        assert f'id="op-{route.name}"' in html
        assert route.summary.replace("'", "&#x27;") in html
    for name in document()["components"]["schemas"]:
        assert f'id="schema-{name}"' in html
    assert '<a href="#schema-ThreadCreate"><code>ThreadCreate</code></a>' in html
    assert "<script>" not in html and " style=" not in html
    assert "Content-Security-Policy" in response


# -- the route table -------------------------------------------------------------------


def _view(request: Any) -> dict[str, Any]:
    return {}


def test_route_table_refuses_a_second_view_for_one_method_and_path() -> None:
    table = RouteTable()
    table.add(Route("GET", "/things", _view, name="thing-list", summary="s", tag="t"))

    with pytest.raises(ValueError, match="already 'thing-list'"):
        table.add(
            Route("GET", "/things", _view, name="thing-all", summary="s", tag="t")
        )
    with pytest.raises(ValueError, match="already used"):
        table.add(
            Route("POST", "/things", _view, name="thing-list", summary="s", tag="t")
        )


def test_route_paths_are_checked() -> None:
    with pytest.raises(ValueError, match="Route path"):
        Route("GET", "threads/<id>", _view, name="x", summary="s", tag="t")


def test_a_path_answers_405_for_other_methods_with_allow(ada: User) -> None:
    response = Api(ada).call("PUT", "/threads/x")

    assert response.status_code == 405
    assert set(response["Allow"].split(", ")) == {"GET", "PATCH", "DELETE"}
    assert "PUT" in response.json()["detail"]


def test_register_returns_one_pattern_per_new_path() -> None:
    table = RouteTable()

    def route(method: Any, name: str) -> Route:
        return Route(method, "/things/{item}", _view, name=name, summary="s", tag="t")

    patterns = register(
        route("GET", "thing-get"), route("DELETE", "thing-delete"), table=table
    )
    again = register(route("GET", "thing-get"), table=table)

    assert [p.pattern.describe() for p in patterns] == [
        "'things/<str:item>' [name='thing-get']"
    ]
    assert again == []
    assert [r.name for r in table.routes()] == ["thing-get", "thing-delete"]
    assert "/things/{item}" not in {r.path for r in TABLE.routes()}


def test_a_route_view_may_answer_a_stream_and_gets_its_parsed_query(ada: User) -> None:
    table = RouteTable()

    def stream(request: Any, thread_id: str, *, query: Any) -> StreamingHttpResponse:
        chunks = [f"data: {thread_id} {query.subgraphs}\n\n".encode()]
        return StreamingHttpResponse(iter(chunks), content_type="text/event-stream")

    [pattern] = register(
        Route(
            "GET",
            "/streams/{thread_id}",
            stream,
            name="stream",
            summary="s",
            tag="t",
            query=schemas.StateQuery,
            media_type="text/event-stream",
        ),
        table=table,
    )
    request = RequestFactory().get(
        "/api/streams/t1?subgraphs=true", headers={"x-api-key": token_for(ada)}
    )

    response = pattern.callback(request, thread_id="t1")

    assert b"".join(response.streaming_content) == b"data: t1 True\n\n"

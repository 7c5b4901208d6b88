"""``/api/assistants/...``: one assistant per registered graph, the reference's ids,
shapes and status codes, through the test client and through ``langgraph-sdk``."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError
from pydantic import TypeAdapter

from studio.api import schemas
from tests._support.api_calls import Api, sdk_client, token_for
from tests._support.studio import serve_graphs

pytestmark = pytest.mark.django_db

GRAPHS = {
    "purchase": "studio.demo_graphs.purchase:build",
    "markers": "tests.studio.ui_graphs_for_tests:markers",
    "typed_input": "tests.studio.ui_graphs_for_tests:typed_input",
    "broken": "tests.studio.ui_graphs_for_tests:broken",
}
_graphs = serve_graphs(GRAPHS)

PURCHASE_ID = "ff2c5b94-ed56-55ab-b444-e28b4ff8af58"
"""What the reference server answers for the purchase graph."""
ASSISTANT_KEYS = {
    "assistant_id",
    "graph_id",
    "config",
    "context",
    "metadata",
    "name",
    "created_at",
    "updated_at",
    "version",
    "description",
}


@pytest.fixture
def api(ada: User) -> Api:
    return Api(ada)


# -- authentication -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/assistants/search"),
        ("POST", "/assistants/count"),
        ("GET", f"/assistants/{PURCHASE_ID}"),
        ("GET", f"/assistants/{PURCHASE_ID}/graph"),
        ("GET", f"/assistants/{PURCHASE_ID}/schemas"),
        ("GET", f"/assistants/{PURCHASE_ID}/subgraphs"),
    ],
)
def test_assistants_need_an_authenticated_user(method: str, path: str) -> None:
    response = Api(token="").call(method, path, {} if method == "POST" else None)

    assert response.status_code == 401
    assert "token" in response.json()["detail"]


def test_assistants_refuse_a_revoked_token(ada: User) -> None:
    api = Api(token="gs_not-a-token")

    assert api.post("/assistants/search", {}).status_code == 401


# -- search ---------------------------------------------------------------------------


def test_assistant_search_lists_one_assistant_per_graph(api: Api) -> None:
    response = api.post("/assistants/search", {"limit": 10, "offset": 0})

    assert response.status_code == 200
    found = response.json()
    assert sorted(a["graph_id"] for a in found) == sorted(GRAPHS)
    purchase = next(a for a in found if a["graph_id"] == "purchase")
    assert set(purchase) == ASSISTANT_KEYS
    assert purchase["assistant_id"] == PURCHASE_ID
    assert purchase["name"] == "purchase"
    assert purchase["metadata"] == {"created_by": "system"}
    assert (purchase["config"], purchase["context"], purchase["version"]) == ({}, {}, 1)
    assert purchase["created_at"].endswith("+00:00")
    TypeAdapter(list[schemas.Assistant]).validate_python(found)
    for assistant in found:
        graph = assistant["graph_id"]
        assert assistant["assistant_id"] == str(
            uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), graph)
        )


def test_assistant_search_by_graph_id(api: Api) -> None:
    found = api.post("/assistants/search", {"graph_id": "purchase"}).json()

    assert [a["assistant_id"] for a in found] == [PURCHASE_ID]


def test_assistant_search_for_an_unknown_graph_is_404_not_an_empty_list(
    api: Api,
) -> None:
    response = api.post("/assistants/search", {"graph_id": "nope"})

    assert response.status_code == 404
    assert response.json() == {"detail": "Graph 'nope' not found"}


def test_assistant_search_filters_metadata_by_containment_and_name(api: Api) -> None:
    system = api.post("/assistants/search", {"metadata": {"created_by": "system"}})
    other = api.post("/assistants/search", {"metadata": {"created_by": "someone"}})
    named = api.post("/assistants/search", {"name": "PURCH"})

    assert len(system.json()) == len(GRAPHS)
    assert other.json() == []
    assert [a["name"] for a in named.json()] == ["purchase"]


def test_assistant_search_pages_sorts_and_selects(api: Api) -> None:
    first = api.post(
        "/assistants/search",
        {"limit": 2, "offset": 0, "sort_by": "graph_id", "sort_order": "asc"},
    )
    rest = api.post(
        "/assistants/search",
        {"limit": 2, "offset": 2, "sort_by": "graph_id", "sort_order": "asc"},
    )
    selected = api.post(
        "/assistants/search", {"select": ["assistant_id", "name"], "limit": 1}
    )

    names = [a["graph_id"] for a in first.json() + rest.json()]
    assert names == sorted(GRAPHS)
    assert first["X-Pagination-Next"] == "2"
    assert not rest.has_header("X-Pagination-Next")
    assert set(selected.json()[0]) == {"assistant_id", "name"}


def test_assistant_count(api: Api) -> None:
    assert api.post("/assistants/count", {}).json() == len(GRAPHS)
    assert api.post("/assistants/count", {"graph_id": "markers"}).json() == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('{"limit": ', "not valid JSON"),
        ("[]", "Send a JSON object"),
        ({"limit": "10"}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"offset": -1}, "offset"),
        ({"sort_by": "colour"}, "sort_by"),
        ({"graph": "purchase"}, "graph"),
        ({"metadata": ["created_by"]}, "metadata"),
    ],
)
def test_assistant_search_refuses_malformed_bodies_with_422(
    api: Api, body: object, problem: str
) -> None:
    response = api.post("/assistants/search", body)

    assert response.status_code == 422
    assert problem in response.json()["detail"]


def test_assistant_search_answers_only_post(api: Api) -> None:
    response = api.get("/assistants/search")

    assert response.status_code == 405
    assert response["Allow"] == "POST"


# -- one assistant ----------------------------------------------------------------------


def test_assistant_get_by_id_and_by_graph_name(api: Api) -> None:
    by_id = api.get(f"/assistants/{PURCHASE_ID}")
    by_upper_id = api.get(f"/assistants/{PURCHASE_ID.upper()}")
    by_name = api.get("/assistants/purchase")

    assert by_id.status_code == by_name.status_code == by_upper_id.status_code == 200
    assert by_id.json() == by_name.json() == by_upper_id.json()
    schemas.Assistant.model_validate(by_id.json())


def test_assistant_get_refuses_an_id_that_is_neither_a_uuid_nor_a_graph(
    api: Api,
) -> None:
    response = api.get("/assistants/not-a-graph")

    assert response.status_code == 422
    assert response.json() == {"detail": "Invalid assistant ID: must be a UUID"}


def test_assistant_get_of_an_unknown_uuid_is_404(api: Api) -> None:
    unknown = str(uuid.uuid4())

    response = api.get(f"/assistants/{unknown}")

    assert response.status_code == 404
    assert unknown in response.json()["detail"]


def test_assistant_graph_has_start_end_runnable_nodes_and_conditional_edges(
    api: Api,
) -> None:
    response = api.get(f"/assistants/{PURCHASE_ID}/graph")

    assert response.status_code == 200
    drawing = response.json()
    nodes = {n["id"]: n for n in drawing["nodes"]}
    assert {"__start__", "__end__", "normalize", "human_review"} <= set(nodes)
    assert nodes["budget"] == {
        "id": "budget",
        "type": "runnable",
        "data": {"name": "budget"},
    }
    edges = drawing["edges"]
    assert {"source": "__start__", "target": "normalize"} in edges
    assert {"source": "normalize", "target": "budget"} in edges
    assert {
        "source": "human_review",
        "target": "execute",
        "conditional": True,
    } in edges
    assert all(set(e) <= {"source", "target", "data", "conditional"} for e in edges)
    schemas.GraphDrawing.model_validate(drawing)


@pytest.mark.parametrize("xray", ["true", "1"])
def test_assistant_graph_xray_expands_subgraphs(api: Api, xray: str) -> None:
    flat = api.get("/assistants/markers/graph").json()
    expanded = api.get("/assistants/markers/graph", xray=xray).json()

    assert "sub:fetch" not in {n["id"] for n in flat["nodes"]}
    assert {"sub:fetch", "sub:parse"} <= {n["id"] for n in expanded["nodes"]}
    assert {"source": "sub:fetch", "target": "sub:parse"} in expanded["edges"]


def test_assistant_graph_refuses_a_bad_xray(api: Api) -> None:
    response = api.get("/assistants/markers/graph", xray="deep")

    assert response.status_code == 422
    assert "xray" in response.json()["detail"]


def test_assistant_graph_of_a_graph_that_cannot_load_is_503(api: Api) -> None:
    assert api.get("/assistants/broken").status_code == 200
    response = api.get("/assistants/broken/graph")

    assert response.status_code == 503
    assert "broken" in response.json()["detail"]


def test_assistant_schemas_are_json_schemas(api: Api) -> None:
    response = api.get(f"/assistants/{PURCHASE_ID}/schemas")

    assert response.status_code == 200
    found = response.json()
    assert set(found) == {
        "graph_id",
        "input_schema",
        "output_schema",
        "state_schema",
        "config_schema",
        "context_schema",
    }
    assert found["graph_id"] == "purchase"
    assert found["input_schema"]["type"] == "object"
    assert {"request_id", "amount_minor"} <= set(found["input_schema"]["properties"])
    assert "budget_ok" in found["state_schema"]["properties"]
    assert "result" in found["output_schema"]["properties"]
    assert found["config_schema"] is None and found["context_schema"] is None
    schemas.GraphSchemas.model_validate(found)


def test_assistant_subgraphs(api: Api) -> None:
    found = api.get("/assistants/markers/subgraphs").json()
    under = api.get("/assistants/markers/subgraphs/sub").json()
    none = api.get(f"/assistants/{PURCHASE_ID}/subgraphs").json()

    assert list(found) == ["sub"] == list(under)
    assert found["sub"]["state_schema"]["properties"]["log"]["type"] == "array"
    assert none == {}


# -- the official client ---------------------------------------------------------------


def test_langgraph_sdk_reads_assistants(ada: User) -> None:
    client = sdk_client(token_for(ada))

    found = client.assistants.search(graph_id="purchase")
    assistant = client.assistants.get(PURCHASE_ID)
    drawing = client.assistants.get_graph("purchase", xray=False)
    graph_schemas = client.assistants.get_schemas(PURCHASE_ID)
    paged = client.assistants.search(limit=1, response_format="object")

    assert found == [assistant]
    assert {n["id"] for n in drawing["nodes"]} >= {"__start__", "__end__"}
    assert graph_schemas["graph_id"] == "purchase"
    assert paged["next"] == "1" and len(paged["assistants"]) == 1
    with pytest.raises(UnprocessableEntityError):
        client.assistants.get("not a graph")
    with pytest.raises(NotFoundError):
        client.assistants.search(graph_id="nope")

"""The official ``langgraph-sdk`` against a real Daphne serving the studio (embedded worker).

One server for the package: a throwaway SQLite database seeded with the demo
accounts; tokens are issued with ``manage.py create_api_token``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.live_server import LiveServer, live_server

TEST_GRAPHS = {"slow_steps": "tests.sdk.graphs_for_sdk:slow_steps"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("sdk"), graphs=TEST_GRAPHS) as running:
        yield running


def issue_token(server: LiveServer, username: str) -> str:
    return server.manage("create_api_token", username).strip()


@pytest.fixture(scope="package")
def requester_token(server: LiveServer) -> str:
    return issue_token(server, "requester")


@pytest.fixture(scope="package")
def reviewer_token(server: LiveServer) -> str:
    return issue_token(server, "demo")

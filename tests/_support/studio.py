"""Studio test helpers that are not fixtures of their own."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from django.test import override_settings

__all__ = ("serve_graphs",)


def serve_graphs(graphs: Mapping[str, str]) -> Callable[..., Any]:
    """An autouse fixture that serves ``graphs`` as ``STUDIO_GRAPHS`` to every test
    of the module that assigns it (``_graphs = serve_graphs(GRAPHS)``)."""

    @pytest.fixture(autouse=True)
    def _graphs() -> Iterator[None]:
        with override_settings(STUDIO_GRAPHS=dict(graphs)):
            yield

    return _graphs

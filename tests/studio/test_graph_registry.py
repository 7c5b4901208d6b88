from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.test.utils import override_settings

from studio import graph_registry as registry
from studio.errors import GraphNotFound
from tests.studio import graphs_for_tests

MODULE = "tests.studio.graphs_for_tests"


@pytest.fixture(autouse=True)
def _fresh_registry() -> None:
    registry.clear_cache()
    graphs_for_tests.calls.clear()


def test_empty_registry_has_no_names() -> None:
    assert registry.graph_names() == []


@override_settings(STUDIO_GRAPHS={"b": f"{MODULE}:graph", "a": f"{MODULE}:build"})
def test_names_are_sorted_and_listing_them_imports_nothing() -> None:
    assert registry.graph_names() == ["a", "b"]
    assert graphs_for_tests.calls == []


@override_settings(STUDIO_GRAPHS={"pre": f"{MODULE}:graph"})
def test_a_compiled_graph_attribute_is_used_as_is() -> None:
    assert registry.get_graph("pre") is graphs_for_tests.graph


@override_settings(STUDIO_GRAPHS={"built": f"{MODULE}:build"})
def test_a_factory_is_called_once_and_cached() -> None:
    first = registry.get_graph("built")

    assert first.name == "built"
    assert registry.get_graph("built") is first
    assert graphs_for_tests.calls == ["build"]


def test_a_file_path_entry_is_loaded_relative_to_the_repository() -> None:
    relative = Path(graphs_for_tests.__file__).relative_to(settings.BASE_DIR).as_posix()
    with override_settings(STUDIO_GRAPHS={"file": f"{relative}:graph"}):
        assert registry.get_graph("file").name == "prebuilt"


def test_an_unknown_name_is_graph_not_found() -> None:
    with pytest.raises(GraphNotFound, match="no graph named 'nope'"):
        registry.get_graph("nope")


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("no_colon_here", "expected"),
        ("tests.studio.no_such_module:graph", "import failed: ModuleNotFoundError"),
        ("tests/studio/missing.py:graph", "import failed: FileNotFoundError"),
        (f"{MODULE}:missing", "has no attribute 'missing'"),
        (f"{MODULE}:broken", "broken() failed: RuntimeError('no model configured')"),
        (f"{MODULE}:not_a_graph", "not_a_graph is not a compiled graph (int)"),
    ],
)
def test_bad_entries_raise_graph_load_error_naming_the_entry(
    spec: str, reason: str
) -> None:
    with (
        override_settings(STUDIO_GRAPHS={"bad": spec}),
        pytest.raises(registry.GraphLoadError) as info,
    ):
        registry.get_graph("bad")

    assert str(info.value).startswith(f"STUDIO_GRAPHS['bad'] = {spec!r}: ")
    assert reason in str(info.value)
    assert (info.value.name, info.value.spec) == ("bad", spec)


def test_changing_the_setting_drops_loaded_graphs() -> None:
    with override_settings(STUDIO_GRAPHS={"g": f"{MODULE}:build"}):
        registry.get_graph("g")
    with override_settings(STUDIO_GRAPHS={"g": f"{MODULE}:build"}):
        registry.get_graph("g")

    assert graphs_for_tests.calls == ["build", "build"]


def _graphs_file(path: Path, graphs: dict[str, str]) -> None:
    path.write_text(json.dumps({"graphs": graphs}))


def test_a_graphs_file_is_read_again_only_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graphs = tmp_path / "langgraph.json"
    _graphs_file(graphs, {"one": f"{MODULE}:graph"})
    reads: list[Path] = []
    read = registry._read_graphs_file
    monkeypatch.setattr(
        registry, "_read_graphs_file", lambda path: reads.append(path) or read(path)
    )

    with override_settings(STUDIO_GRAPHS_FILE=str(graphs)):
        assert registry.graph_names() == ["one"]
        assert registry.graph_names() == ["one"]
        assert len(reads) == 1  # unchanged: not read again

        _graphs_file(graphs, {"one": f"{MODULE}:graph", "two": f"{MODULE}:build"})
        later = graphs.stat().st_mtime_ns + 1_000_000_000  # whatever the clock's step
        os.utime(graphs, ns=(later, later))
        assert registry.graph_names() == ["one", "two"]
        assert len(reads) == 2

        graphs.unlink()
        with pytest.raises(
            registry.GraphLoadError, match="cannot read the graphs file"
        ):
            registry.graph_names()


def test_a_graphs_files_py_entries_resolve_next_to_it_and_import_once(
    tmp_path: Path,
) -> None:
    source = Path(graphs_for_tests.__file__)
    (tmp_path / "agent.py").write_text(source.read_text())
    graphs = tmp_path / "langgraph.json"
    _graphs_file(graphs, {"agent": "./agent.py:graph"})

    with override_settings(STUDIO_GRAPHS_FILE=str(graphs)):
        spec = registry.graph_specs()["agent"]
        assert spec == f"{(tmp_path / 'agent.py').resolve()}:graph"
        first = registry.get_graph("agent")
        assert registry.declared("agent", "graph") is first
        assert registry.import_file(spec.rpartition(":")[0]).graph is first

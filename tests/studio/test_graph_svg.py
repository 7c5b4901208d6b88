"""Graphviz drawing: shapes, edges, clusters, markers, escaping and the cache."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import graphviz
import pytest
from django.utils.safestring import SafeString

from engine.prebuilt import ScriptedChatModel, create_react_agent
from engine.pregel._draw import DrawableGraph, Edge, Node
from studio.demo_graphs import purchase, research, tool_agent
from studio.services import graph_svg
from tests.studio import ui_graphs_for_tests as ui


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    graph_svg.clear_cache()


@pytest.fixture
def dot_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the times ``dot`` really runs."""
    calls: list[str] = []
    real = graph_svg._run_dot

    def counting(dot: Any) -> str:
        calls.append(dot.source)
        return real(dot)

    monkeypatch.setattr(graph_svg, "_run_dot", counting)
    return calls


def group(svg: str, dom_id: str) -> str:
    """The ``<g>`` element with this id (Graphviz writes '-' as '&#45;')."""
    escaped = dom_id.replace("-", "&#45;")
    match = re.search(
        rf'<g id="{re.escape(escaped)}" class="([^"]*)">(.*?)</g>', svg, re.S
    )
    assert match, f"no <g id={dom_id!r}> in the SVG"
    return match.group(0)


def test_render_svg_gives_every_node_a_stable_id_and_class() -> None:
    svg = graph_svg.render_svg(purchase.build().get_graph())

    assert svg.startswith('<svg class="graph-svg" width="')
    for name in ("normalize", "budget", "compliance", "human_review", "execute"):
        assert 'class="node node&#45;&#45;step' in group(svg, f"node-{name}")
        assert f"<title>{name}</title>" in group(svg, f"node-{name}")
    assert "node&#45;&#45;start" in group(svg, "node-__start__")
    assert ">start</text>" in group(svg, "node-__start__")
    assert "node&#45;&#45;end" in group(svg, "node-__end__")


def test_render_svg_has_no_prolog_comments_or_dot_ids() -> None:
    svg = graph_svg.render_svg(purchase.build().get_graph())

    assert "<?xml" not in svg
    assert "<!DOCTYPE" not in svg
    assert "<!--" not in svg
    assert not re.search(r"<title>n\d+", svg)


def test_svg_document_is_a_standalone_file() -> None:
    document = graph_svg.svg_document(purchase.build().get_graph())

    assert document.startswith('<?xml version="1.0" encoding="UTF-8"')
    assert 'xmlns="http://www.w3.org/2000/svg"' in document


def test_conditional_edges_are_dashed_and_plain_edges_solid() -> None:
    svg = graph_svg.render_svg(purchase.build().get_graph())
    edges = re.findall(
        r'<g id="edge\d+" class="([^"]*)">\s*<title>([^<]*)</title>\s*<path ([^>]*)>',
        svg,
    )
    by_title = {title: (classes, path) for classes, title, path in edges}

    classes, path = by_title["human_review → execute"]
    assert "edge&#45;&#45;conditional" in classes
    assert "stroke-dasharray" in path
    classes, path = by_title["start → normalize"]
    assert "edge&#45;&#45;plain" in classes
    assert "stroke-dasharray" not in path


def test_fan_in_edges_share_one_arrowhead(dot_calls: list[str]) -> None:
    svg = graph_svg.render_svg(purchase.build().get_graph())

    fan_in = re.findall(
        r'class="edge edge&#45;&#45;plain edge&#45;&#45;fan&#45;in">\s*<title>([^<]*)</title>',
        svg,
    )
    assert sorted(fan_in) == [
        "budget → human_review",
        "compliance → human_review",
        "execute → end",
        "reject → end",
    ]
    assert dot_calls[0].count("samehead=") == 4


def test_conditional_edge_labels_are_drawn() -> None:
    svg = graph_svg.render_svg(ui.escaping().get_graph())

    assert "&lt;b&gt;bold&lt;/b&gt;</text>" in svg
    assert "<b>" not in svg


def test_node_names_are_escaped_not_markup() -> None:
    svg = graph_svg.render_svg(ui.escaping().get_graph())

    assert "<script" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;</text>" in svg
    assert '<g id="node&#45;&lt;script&gt;alert(1)&lt;/script&gt;"' in svg
    # Quotes and backslashes survive as text, in the id and the title.
    assert 'id="node&#45;quote&quot;and\\slash"' in svg
    assert '<title>quote"and\\slash</title>' in svg


def test_markers_show_as_badges_with_classes() -> None:
    svg = graph_svg.render_svg(ui.markers().get_graph(xray=1))

    assert "◆ cache" in group(svg, "node-plan")
    assert "marker&#45;cache" in group(svg, "node-plan")
    assert "‖ before" in group(svg, "node-join")
    assert "▣ subgraph" in group(svg, "node-sub")
    assert "↻ retry" in group(svg, "node-sub:fetch")


def test_xray_subgraph_is_a_cluster_with_its_parent_and_an_exit() -> None:
    svg = graph_svg.render_svg(ui.markers().get_graph(xray=1))

    cluster = re.search(r'<g id="cluster&#45;sub" class="cluster[^"]*">', svg)
    assert cluster
    assert "<title>sub:fetch</title>" in svg
    assert "<title>sub:parse</title>" in svg
    assert '<g id="exit&#45;sub"' in svg
    # The parent's way out leaves from the exit point, after the subgraph's last node.
    assert "<title>sub:parse → sub</title>" in svg
    assert "<title>sub → end</title>" in svg


def test_same_graph_version_runs_dot_once(dot_calls: list[str]) -> None:
    first = graph_svg.render_svg(purchase.build().get_graph())
    second = graph_svg.render_svg(purchase.build().get_graph())
    graph_svg.inline_svg(purchase.build().get_graph())
    graph_svg.svg_document(purchase.build().get_graph())

    assert first == second
    assert len(dot_calls) == 1


def test_a_changed_graph_is_drawn_again(dot_calls: list[str]) -> None:
    graph_svg.render_svg(purchase.build().get_graph())
    graph_svg.render_svg(research.build().get_graph())
    changed = purchase.build().get_graph()
    changed.add_edge(Edge("reject", "normalize", data="retry", conditional=True))
    graph_svg.render_svg(changed)

    assert len(dot_calls) == 3


def test_cache_keeps_the_most_recent_drawings(
    dot_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graph_svg, "CACHE_SIZE", 2)
    drawings = [_chain(n) for n in (1, 2, 3)]
    for drawable in drawings:
        graph_svg.render_svg(drawable)
    graph_svg.render_svg(drawings[2])
    graph_svg.render_svg(drawings[0])

    assert len(dot_calls) == 4  # the oldest was evicted, the newest was not


def test_inline_svg_is_the_safe_string() -> None:
    svg = graph_svg.inline_svg(purchase.build().get_graph())

    assert isinstance(svg, SafeString)
    assert str(svg) == graph_svg.render_svg(purchase.build().get_graph())


def test_mark_safe_is_called_in_exactly_one_function() -> None:
    studio = Path(graph_svg.__file__).parents[1]
    callers = [
        path.relative_to(studio).as_posix()
        for path in studio.rglob("*.py")
        if "mark_safe(" in path.read_text()
    ]
    source = Path(graph_svg.__file__).read_text()

    assert callers == ["services/graph_svg.py"]
    assert source.count("mark_safe(") == 1


def test_only_graph_svg_imports_graphviz() -> None:
    studio = Path(graph_svg.__file__).parents[1]
    importers = [
        path.relative_to(studio).as_posix()
        for path in studio.rglob("*.py")
        if re.search(r"^\s*(import graphviz|from graphviz)", path.read_text(), re.M)
    ]

    assert importers == ["services/graph_svg.py"]


def test_sixty_node_graph_stays_about_a_laptop_screen_wide() -> None:
    svg = graph_svg.render_svg(ui.big(stages=12, width=4).get_graph())

    assert svg.count('class="node node&#45;&#45;step') == 60
    size = re.search(r'<svg class="graph-svg" width="([\d.]+)" height="([\d.]+)"', svg)
    assert size
    width, height = float(size.group(1)), float(size.group(2))
    assert width < 900  # px: ranks run top to bottom, one stage per rank
    assert height > width


def test_missing_dot_is_an_operator_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(*args: Any, **kwargs: Any) -> str:
        raise graphviz.ExecutableNotFound(("dot",))

    monkeypatch.setattr(graphviz.Digraph, "pipe", missing)

    with pytest.raises(graph_svg.GraphUnavailable, match="Graphviz is not installed"):
        graph_svg.render_svg(_chain(1))


def _chain(n: int) -> DrawableGraph:
    drawable = DrawableGraph()
    names = ["__start__", *(f"n{i}" for i in range(n)), "__end__"]
    for name in names:
        drawable.add_node(Node(id=name, name=name))
    for source, target in zip(names, names[1:], strict=False):
        drawable.add_edge(Edge(source, target))
    return drawable


def _react_agent() -> Any:
    """A prebuilt ReAct agent: START -> agent and tools -> agent (a loop's fan-in)."""
    model = ScriptedChatModel([{"content": "done"}])
    return create_react_agent(model, [tool_agent.lookup_order])


def test_fan_in_closing_a_loop_keeps_separate_arrowheads(dot_calls: list[str]) -> None:
    svg = graph_svg.render_svg(_react_agent().get_graph())

    assert "samehead" not in dot_calls[0]  # tools -> agent loops back
    assert re.match(r'<svg class="graph-svg" width="[\d.]+" height="[\d.]+"', svg)
    assert "edge&#45;&#45;fan&#45;in" in svg


def test_a_layout_graphviz_gets_wrong_is_drawn_again_without_merged_heads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sources: list[str] = []
    real = graph_svg._run_dot

    def broken_first(dot: Any) -> str:
        sources.append(dot.source)
        svg = real(dot)
        if len(sources) == 1:
            svg = re.sub(r'height="[\d.]+pt"', 'height="-2147483648pt"', svg, count=1)
        return svg

    monkeypatch.setattr(graph_svg, "_run_dot", broken_first)
    svg = graph_svg.render_svg(purchase.build().get_graph())

    assert len(sources) == 2
    assert "samehead" in sources[0]
    assert "samehead" not in sources[1]
    assert re.match(r'<svg class="graph-svg" width="[\d.]+" height="[\d.]+"', svg)


def test_wide_drawings_keep_their_size_and_scroll() -> None:
    narrow = graph_svg.render_svg(purchase.build().get_graph())
    wide = graph_svg.render_svg(ui.big(stages=2, width=14).get_graph())

    assert narrow.startswith('<svg class="graph-svg" ')
    assert wide.startswith('<svg class="graph-svg graph-svg--wide" ')

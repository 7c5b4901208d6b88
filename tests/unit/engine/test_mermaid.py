"""``get_graph()``'s Mermaid text and pictures, as LangGraph's (``engine.pregel._mermaid``).

The expected texts below are what LangGraph 1.2 (langchain-core 1.x) writes for
the same graphs, but for the HTML escaping of names, which is ours.
"""

from __future__ import annotations

import base64
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langchain_core.runnables.graph import CurveStyle, NodeStyles

from engine.graph import END, START, StateGraph
from engine.types import Command
from tests._support.python_child import run_python


class S(TypedDict, total=False):
    n: int


def _noop(state: S) -> dict[str, Any]:
    return {}


def _branching() -> Any:
    builder = StateGraph(S)
    for name in "abcde":
        builder.add_node(name, _noop)
    builder.add_edge(START, "a")
    builder.add_conditional_edges(
        "a",
        lambda s: "b",
        {"go to b now please with many words here ok": "b", "c": "c"},
    )
    builder.add_edge("b", "d")
    builder.add_edge("c", "d")
    builder.add_edge(["b", "c"], "e")
    builder.add_edge("d", END)
    builder.add_edge("e", END)
    return builder.compile()


BRANCHING = """\
---
config:
  flowchart:
    curve: linear
---
graph TD;
\t__start__([<p>__start__</p>]):::first
\ta(a)
\tb(b)
\tc(c)
\td(d)
\te(e)
\t__end__([<p>__end__</p>]):::last
\t__start__ --> a;
\ta -. &nbsp;go to b now please with many words here&nbsp<br>&nbspok&nbsp; .-> b;
\ta -.-> c;
\tb --> d;
\tb --> e;
\tc --> d;
\tc --> e;
\td --> __end__;
\te --> __end__;
\tclassDef default fill:#f2f0ff,line-height:1.2
\tclassDef first fill-opacity:0
\tclassDef last fill:#bfb6fc
"""


def test_the_text_is_langgraphs() -> None:
    assert _branching().get_graph().draw_mermaid() == BRANCHING
    assert _branching().draw_mermaid() == BRANCHING


def test_without_styles_only_the_edges_are_written() -> None:
    text = _branching().get_graph().draw_mermaid(with_styles=False)

    assert text.startswith("graph TD;\n\t__start__ --> a;\n")
    assert "classDef" not in text and "---" not in text and "a(a)" not in text


def test_curve_colors_and_front_matter_are_langchains_parameters() -> None:
    text = (
        _branching()
        .get_graph()
        .draw_mermaid(
            curve_style=CurveStyle.BASIS,
            node_colors=NodeStyles(default="fill:#fff", first="fill:#000", last="x"),
            frontmatter_config={
                "title": "My graph",
                "config": {"theme": "neutral", "flowchart": {"curve": "step"}},
            },
            wrap_label_n_words=20,
        )
    )

    assert text.startswith(
        "---\nconfig:\n  flowchart:\n    curve: basis\n  theme: neutral\n"
        "title: My graph\n---\ngraph TD;\n"
    )
    assert "\tclassDef default fill:#fff\n\tclassDef first fill:#000\n" in text
    assert "go to b now please with many words here ok&nbsp; .-> b;" in text
    assert (
        _branching()
        .get_graph()
        .draw_mermaid(curve_style="step")
        .startswith("---\nconfig:\n  flowchart:\n    curve: step\n---\n")
    )


def test_metadata_markers_and_ids() -> None:
    builder = StateGraph(S)
    builder.add_node("my node", _noop, metadata={"team": "ops", "tags": ["x", "y"]})
    builder.add_node("my_node", _noop, defer=True)
    builder.add_node("_hidden_", _noop)
    builder.add_edge(START, "my node")
    builder.add_edge("my node", "_hidden_")
    builder.add_edge("_hidden_", "my_node")
    builder.add_edge("my_node", END)
    text = builder.compile(interrupt_before=["_hidden_"]).get_graph().draw_mermaid()

    assert (
        "\tmy\\20node(my node<hr/><small><em>team = ops\ntags = x, y</em></small>)"
        in text
    )
    assert "\tmy_node(my_node<hr/><small><em>defer = True</em></small>)" in text
    assert (
        "\t_hidden_(<p>_hidden_</p><hr/><small><em>__interrupt = before</em></small>)"
        in text
    )
    # plain edges into END come last, as LangGraph finds them last
    assert text.index("my\\20node --> _hidden_;") < text.index("my_node --> __end__;")


def test_names_are_escaped() -> None:
    builder = StateGraph(S)
    builder.add_node("<img src=x onerror=alert(1)>", _noop)
    builder.add_edge(START, "<img src=x onerror=alert(1)>")
    text = builder.compile().get_graph().draw_mermaid()

    assert "<img" not in text
    assert "(&lt;img src=x onerror=alert(1)&gt;)" in text


def test_a_command_nodes_destinations_are_dotted() -> None:
    def route(state: S) -> Command[Any]:
        return Command(goto="q")

    builder = StateGraph(S)
    builder.add_node("p", route, destinations=("q", "w"))
    builder.add_node("q", _noop)
    builder.add_node("w", _noop)
    builder.add_edge(START, "p")
    builder.add_edge("w", END)
    text = builder.compile().get_graph().draw_mermaid()

    assert "\tp -.-> q;\n\tp -.-> w;\n\tq --> __end__;\n\tw --> __end__;\n" in text


class _Png(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        body = b"\x89PNG\r\n\x1a\nfake"
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def png_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Png)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_draw_mermaid_png_renders_the_text_at_the_mermaid_service(
    png_server: str, tmp_path: Any
) -> None:
    _Png.seen.clear()
    out = tmp_path / "graph.png"
    png = (
        _branching()
        .get_graph()
        .draw_mermaid_png(base_url=png_server, output_file_path=str(out))
    )

    assert png == b"\x89PNG\r\n\x1a\nfake" == out.read_bytes()
    (path,) = _Png.seen
    encoded, _, query = path.removeprefix("/img/").partition("?")
    assert base64.b64decode(urllib.parse.unquote(encoded)).decode() == BRANCHING
    assert "type=png" in query and "bgColor=%21white" in query  # langchain-core's


def test_the_langchain_graph_has_the_same_nodes_and_edges() -> None:
    from engine.pregel._mermaid import langchain_graph  # noqa: PLC0415

    drawn = _branching().get_graph()
    graph = langchain_graph(drawn)

    assert list(graph.nodes) == list(drawn.nodes)
    assert [(e.source, e.target, e.conditional, e.data) for e in graph.edges] == [
        (e.source, e.target, e.conditional, e.data) for e in drawn.edges
    ]
    with pytest.raises(ImportError, match="grandalf"):  # langchain-core's own refusal
        drawn.draw_ascii()


def test_without_langchain_core_or_yaml_the_text_is_the_same() -> None:
    script = f"""
import sys
sys.modules["langchain_core"] = None
sys.modules["yaml"] = None
from typing import TypedDict
from engine.graph import END, START, StateGraph

class S(TypedDict, total=False):
    n: int

builder = StateGraph(S)
for name in "abcde":
    builder.add_node(name, lambda state: {{}})
builder.add_edge(START, "a")
builder.add_conditional_edges(
    "a", lambda s: "b", {{"go to b now please with many words here ok": "b", "c": "c"}}
)
builder.add_edge("b", "d")
builder.add_edge("c", "d")
builder.add_edge(["b", "c"], "e")
builder.add_edge("d", END)
builder.add_edge("e", END)
drawn = builder.compile().get_graph()
assert drawn.draw_mermaid() == {BRANCHING!r}
text = drawn.draw_mermaid(frontmatter_config={{"title": "x: y", "config": {{"n": 2}}}})
assert text.startswith(
    '---\\nconfig:\\n  flowchart:\\n    curve: linear\\n  n: 2\\ntitle: "x: y"\\n---\\n'
), text
try:
    drawn.draw_mermaid_png()
except ImportError as exc:
    print(exc)
"""
    assert "pip install langchain-core" in run_python(script)

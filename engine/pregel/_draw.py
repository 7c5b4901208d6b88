"""PURE drawing data: a graph's nodes and edges, and its Mermaid text. No graphviz here.

``get_graph()`` returns a :class:`DrawableGraph`; the studio renders it with
Graphviz, anyone can render it with :meth:`DrawableGraph.draw_mermaid`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine._internal._constants import END, START
from engine.pregel._mermaid import langchain_graph, mermaid_text, render_mermaid_png

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = ("DrawableGraph", "Edge", "Node", "draw_graph")


@dataclass(frozen=True, slots=True)
class Node:
    """A node to draw."""

    id: str
    name: str
    data: Any = None
    metadata: dict[str, Any] | None = None
    markers: tuple[str, ...] = ()
    """Behaviours worth showing: "retry", "cache", "timeout", "defer", "interrupt_before",
    "interrupt_after", "error_handler", "subgraph"."""
    cluster: str | None = None
    """Id of the subgraph this node belongs to (xray drawings), if any."""


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge to draw; ``conditional`` ones are dashed."""

    source: str
    target: str
    data: str | None = None
    conditional: bool = False
    join: bool = False
    """Part of ``add_edge([a, b], c)``: the target waits for all such sources."""


@dataclass(slots=True)
class DrawableGraph:
    """Nodes and edges of a compiled graph, for drawing."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    _edge_set: set[Edge] = field(default_factory=set, repr=False, compare=False)
    """The edges again, to skip duplicates in constant time (a list scan made a
    200-node drawing quadratic)."""

    def add_node(self, node: Node) -> None:
        self.nodes[node.id] = node

    def add_edge(self, edge: Edge) -> None:
        if edge not in self._edge_set:
            self._edge_set.add(edge)
            self.edges.append(edge)

    def to_json(self) -> dict[str, Any]:
        """The shape the Agent Server's ``/assistants/{id}/graph`` returns."""
        return {
            "nodes": [
                {"id": n.id, "type": "runnable", "data": {"name": n.name}}
                if n.id not in (START, END)
                else {"id": n.id, "type": "schema", "data": n.name}
                for n in self.nodes.values()
            ],
            "edges": [
                {
                    "source": e.source,
                    "target": e.target,
                    **({"data": e.data} if e.data is not None else {}),
                    **({"conditional": True} if e.conditional else {}),
                    **({"join": True} if e.join else {}),
                }
                for e in self.edges
            ],
        }

    draw_mermaid = mermaid_text
    """Mermaid flowchart text, as LangGraph's (``engine.pregel._mermaid``):
    conditional edges dotted, the first and last nodes rounded."""

    def draw_mermaid_png(
        self,
        *,
        curve_style: Any = "linear",
        node_colors: Any = None,
        wrap_label_n_words: int = 9,
        frontmatter_config: dict[str, Any] | None = None,
        **render: Any,
    ) -> bytes:
        """The PNG of :meth:`draw_mermaid`'s text, rendered by langchain-core as
        in LangGraph (``output_file_path``, ``draw_method``, ``background_color``,
        ``padding``, ``max_retries``, ``retry_delay``, ``base_url``, ``proxies``
        are its options; by default the text is sent to Mermaid.ink)."""
        text = self.draw_mermaid(
            curve_style=curve_style,
            node_colors=node_colors,
            wrap_label_n_words=wrap_label_n_words,
            frontmatter_config=frontmatter_config,
        )
        return render_mermaid_png(text, **render)

    def draw_png(self, *args: Any, **kwargs: Any) -> Any:
        """langchain-core's ``Graph.draw_png`` (pygraphviz), as in LangGraph."""
        return langchain_graph(self).draw_png(*args, **kwargs)

    def draw_ascii(self) -> str:
        """langchain-core's ``Graph.draw_ascii`` (grandalf), as in LangGraph."""
        return str(langchain_graph(self).draw_ascii())

    def print_ascii(self) -> None:
        """Print :meth:`draw_ascii`."""
        print(self.draw_ascii())


def draw_graph(graph: Pregel, *, xray: int | bool = False) -> DrawableGraph:
    """Generic drawing of a Pregel: nodes linked through the channels they write and read."""
    drawable = DrawableGraph()
    for name in graph.nodes:
        drawable.add_node(Node(id=name, name=name))
    return drawable

"""PURE drawing data: a graph's nodes and edges, and its Mermaid text. No graphviz here.

``get_graph()`` returns a :class:`DrawableGraph`; the studio renders it with
Graphviz, anyone can render it with :meth:`DrawableGraph.draw_mermaid`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine._internal._constants import END, START

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

    def draw_mermaid(self, *, with_styles: bool = True) -> str:
        """Mermaid flowchart text: conditional edges dotted, START/END rounded."""
        lines = ["graph TD;"]
        for node in self.nodes.values():
            key = _mermaid_id(node.id)
            label = _mermaid_label(node.name)
            if node.id == START:
                lines.append(f"\t{key}([<p>{label}</p>]):::first")
            elif node.id == END:
                lines.append(f"\t{key}([<p>{label}</p>]):::last")
            else:
                lines.append(f"\t{key}({label})")
        for edge in self.edges:
            src, dst = _mermaid_id(edge.source), _mermaid_id(edge.target)
            if edge.conditional:
                if edge.data:
                    lines.append(
                        f"\t{src} -. &nbsp;{_mermaid_label(edge.data)}&nbsp; .-> {dst};"
                    )
                else:
                    lines.append(f"\t{src} -.-> {dst};")
            else:
                label = f"|{_mermaid_label(edge.data)}|" if edge.data else ""
                lines.append(f"\t{src} -->{label} {dst};")
        if with_styles:
            lines.append("\tclassDef default fill:#f2f0ff,line-height:1.2")
            lines.append("\tclassDef first fill-opacity:0")
            lines.append("\tclassDef last fill:#bfb6fc")
        return "\n".join(lines) + "\n"


def _mermaid_id(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", value)


def _mermaid_label(value: str) -> str:
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("|", "&#124;")
    )


def draw_graph(graph: Pregel, *, xray: int | bool = False) -> DrawableGraph:
    """Generic drawing of a Pregel: nodes linked through the channels they write and read."""
    drawable = DrawableGraph()
    for name in graph.nodes:
        drawable.add_node(Node(id=name, name=name))
    return drawable

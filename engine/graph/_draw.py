"""Drawing data for a compiled StateGraph, from its builder (edges, branches, markers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine._internal._constants import END, START
from engine.pregel._draw import DrawableGraph, Edge, Node

if TYPE_CHECKING:
    from engine.graph.state import CompiledStateGraph

__all__ = ("draw_state_graph",)


def _markers(graph: CompiledStateGraph, name: str) -> tuple[str, ...]:
    spec = graph.builder.nodes[name]
    policies = graph.builder.node_policies(name)  # set_node_defaults included
    markers = []
    if policies.retry_policy:
        markers.append("retry")
    if policies.cache_policy is not None:
        markers.append("cache")
    if policies.timeout is not None:
        markers.append("timeout")
    if spec.defer:
        markers.append("defer")
    if policies.error_handler is not None:
        markers.append("error_handler")
    before = graph.interrupt_before_nodes
    after = graph.interrupt_after_nodes
    if before == "*" or name in before:
        markers.append("interrupt_before")
    if after == "*" or name in after:
        markers.append("interrupt_after")
    if graph.nodes[name].subgraphs:
        markers.append("subgraph")
    return tuple(markers)


def draw_state_graph(
    graph: CompiledStateGraph, *, xray: int | bool = False
) -> DrawableGraph:
    """Nodes (with markers) and edges; conditional edges carry their labels.

    With ``xray`` subgraphs are expanded: their nodes are prefixed with the
    parent node's name and carry its id as ``cluster``.
    """
    builder = graph.builder
    drawable = DrawableGraph()
    drawable.add_node(Node(id=START, name=START))
    for name, spec in builder.nodes.items():
        drawable.add_node(
            Node(
                id=name,
                name=name,
                metadata=spec.metadata,
                markers=_markers(graph, name),
            )
        )
    ends_reached = False
    for src, dst in sorted(builder.edges):
        drawable.add_edge(Edge(src, dst))
        ends_reached |= dst == END
    for starts, dst in sorted(builder.waiting_edges):
        for src in starts:
            drawable.add_edge(Edge(src, dst, join=True))
        ends_reached |= dst == END
    # a route that a plain edge already draws is drawn once, plain (as LangGraph)
    plain = {(e.source, e.target) for e in drawable.edges}
    for src, branches in builder.branches.items():
        for branch in branches.values():
            if branch.ends:
                for label, target in branch.ends.items():
                    if (src, target) in plain:
                        continue
                    drawable.add_edge(
                        Edge(
                            src,
                            target,
                            data=str(label) if str(label) != target else None,
                            conditional=True,
                        )
                    )
                    ends_reached |= target == END
            else:
                for target in [*builder.nodes, END]:
                    if target != src and (src, target) not in plain:
                        drawable.add_edge(Edge(src, target, conditional=True))
                ends_reached = True
    for name, spec in builder.nodes.items():
        ends = spec.ends
        if ends:
            items = ends.items() if isinstance(ends, dict) else ((e, e) for e in ends)
            for target, label in items:
                drawable.add_edge(
                    Edge(
                        name,
                        target,
                        data=label if label != target else None,
                        conditional=True,
                    )
                )
                ends_reached |= target == END
    terminal = [
        name
        for name in builder.nodes
        if not any(e.source == name for e in drawable.edges)
    ]
    for name in terminal:
        drawable.add_edge(Edge(name, END))
        ends_reached = True
    if ends_reached:
        drawable.add_node(Node(id=END, name=END))
    if xray:
        _expand(graph, drawable, int(xray))
    return drawable


def _expand(graph: CompiledStateGraph, drawable: DrawableGraph, depth: int) -> None:
    for name, node in graph.nodes.items():
        for sub in node.subgraphs:
            inner: Any = sub.get_graph(xray=depth - 1 if depth > 1 else False)
            for inner_node in inner.nodes.values():
                if inner_node.id in (START, END):
                    continue
                drawable.add_node(
                    Node(
                        id=f"{name}:{inner_node.id}",
                        name=inner_node.name,
                        markers=inner_node.markers,
                        cluster=inner_node.cluster
                        and f"{name}:{inner_node.cluster}"
                        or name,
                    )
                )
            for edge in inner.edges:
                src = name if edge.source == START else f"{name}:{edge.source}"
                dst = name if edge.target == END else f"{name}:{edge.target}"
                if src == dst:
                    continue
                drawable.add_edge(
                    Edge(src, dst, data=edge.data, conditional=edge.conditional)
                )

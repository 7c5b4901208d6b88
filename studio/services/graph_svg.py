"""Engine drawing data -> Graphviz ``dot`` -> SVG. The only module that imports graphviz.

Input is a ``DrawableGraph`` (``graph.get_graph(xray=1)``): nodes with markers and
an optional ``cluster`` (the subgraph they belong to), edges with an optional
label and a ``conditional`` flag. Output is an ``<svg>`` element where:

- every node is ``<g id="node-<node id>" class="node node--step ...">``, so a page
  can highlight nodes by name (START/END are ``node-__start__``/``node-__end__``;
  subgraph nodes drawn with xray are ``node-<parent>:<child>``);
- plain edges are solid, conditional edges dashed with their labels, and plain
  edges into one node meet at one arrowhead (fan-in);
- a subgraph is a cluster holding its parent node (the entry) and a small exit
  point the parent's outgoing edges leave from;
- markers (retry, cache, timeout, interrupts...) are small text badges.

Names are escaped here; the result is marked safe in exactly one function,
:func:`inline_svg`. Rendering is cached in process, keyed by a hash of the
drawing, so the same graph version never runs ``dot`` twice.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

import graphviz
from django.utils.safestring import SafeString, mark_safe

from engine.constants import END, START
from studio.errors import GraphUnavailable

__all__ = ("MARKER_BADGES", "clear_cache", "inline_svg", "render_svg", "svg_document")

RENDERER_VERSION = "3"
"""Part of the cache key: bump when the drawing code changes."""
CACHE_SIZE = 128
FIT_WIDTH = 960
"""Drawings up to this many px wide may shrink to fit their panel (``graph-svg``);
wider ones keep their size and scroll (``graph-svg graph-svg--wide``): shrunk
further, their labels would be too small to read."""

MARKER_BADGES: dict[str, str] = {
    "retry": "↻ retry",
    "cache": "◆ cache",
    "timeout": "◔ timeout",
    "defer": "⇥ defer",
    "interrupt_before": "‖ before",
    "interrupt_after": "‖ after",
    "error_handler": "⚠ on error",
    "subgraph": "▣ subgraph",
}
"""Marker -> the badge shown under the node's name (unknown markers show as is)."""


class Node(Protocol):
    """A node of ``get_graph()``'s drawing, as far as this module reads it."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def markers(self) -> tuple[str, ...]: ...
    @property
    def cluster(self) -> str | None: ...


class Edge(Protocol):
    """An edge of ``get_graph()``'s drawing; ``conditional`` ones are dashed."""

    @property
    def source(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def data(self) -> str | None: ...
    @property
    def conditional(self) -> bool: ...


class DrawableGraph(Protocol):
    """What ``graph.get_graph(xray=1)`` returns, as far as this module reads it."""

    @property
    def nodes(self) -> Mapping[str, Node]: ...
    @property
    def edges(self) -> Sequence[Edge]: ...


_XML_PROLOG = '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
_FONT = "Helvetica"
_MUTED = "#5b6675"
_LINE = "#6b7686"
_BORDER = "#9aa7b8"
_ACCENT = "#3056d3"
_ACCENT_SOFT = "#e8eefc"

_lock = threading.Lock()
_cache: OrderedDict[str, str] = OrderedDict()


def render_svg(drawable: DrawableGraph) -> str:
    """The drawing as an ``<svg>`` element (no XML prolog), from the cache when possible.

    Raises:
        GraphUnavailable: Graphviz's ``dot`` is missing or failed.
    """
    key = fingerprint(drawable)
    with _lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
            return cached
    dot, titles = _to_dot(drawable)
    raw = _run_dot(dot)
    if not _POINTS.match(_BEFORE_SVG.sub("", raw, count=1)):
        # A layout Graphviz got wrong (a negative size): draw it without the
        # merged fan-in arrowheads, its fragile feature.
        dot, titles = _to_dot(drawable, merge_heads=False)
        raw = _run_dot(dot)
    svg = _tidy(raw, titles)
    with _lock:
        _cache[key] = svg
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return svg


def svg_document(drawable: DrawableGraph) -> str:
    """A standalone SVG file (for download): the XML prolog and the ``<svg>``."""
    return _XML_PROLOG + render_svg(drawable)


def inline_svg(drawable: DrawableGraph) -> SafeString:
    """The ``<svg>`` for embedding in a page: the one place it is marked safe.

    Safe because every name, label and title in it was escaped by
    :func:`_to_dot`/:func:`_tidy` and by Graphviz's SVG writer.
    """
    return mark_safe(render_svg(drawable))


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def fingerprint(drawable: DrawableGraph) -> str:
    """A stable hash of what is drawn: the graph's version as far as the SVG goes."""
    data = {
        "v": RENDERER_VERSION,
        "nodes": [
            [n.id, n.name, list(n.markers), n.cluster] for n in drawable.nodes.values()
        ],
        "edges": [[e.source, e.target, e.data, e.conditional] for e in drawable.edges],
    }
    text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _run_dot(dot: graphviz.Digraph) -> str:
    """Run ``dot`` once. Tests count calls to this function."""
    try:
        return str(dot.pipe(format="svg", encoding="utf-8"))
    except graphviz.ExecutableNotFound as exc:
        raise GraphUnavailable(
            "Graphviz is not installed: the 'dot' program was not found. "
            "Install Debian's graphviz package (make run does)."
        ) from exc
    except graphviz.CalledProcessError as exc:
        raise GraphUnavailable(f"Graphviz could not draw this graph: {exc}") from exc


# -- DOT -------------------------------------------------------------------------


@dataclass
class _Layout:
    """DOT ids for nodes and clusters, and where each node sits."""

    ids: dict[str, str] = field(default_factory=dict)
    """Node id -> DOT id (``n0``, ``n1``...): names never reach DOT syntax."""
    exits: dict[str, str] = field(default_factory=dict)
    """Subgraph parent node id -> DOT id of its cluster's exit point."""
    members: dict[str | None, list[str]] = field(default_factory=dict)
    """Cluster id (None: top level) -> node ids drawn directly in it."""
    children: dict[str | None, list[str]] = field(default_factory=dict)
    """Cluster id (None: top level) -> nested cluster ids."""
    chains: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Node id -> the clusters it is inside, outermost first."""


def _layout(drawable: DrawableGraph) -> _Layout:
    nodes = drawable.nodes
    layout = _Layout()
    clusters = {n.cluster for n in nodes.values() if n.cluster}
    for index, node_id in enumerate(nodes):
        layout.ids[node_id] = f"n{index}"

    def parent_of(cluster: str) -> str | None:
        owner = nodes.get(cluster)
        if owner is not None:
            return owner.cluster if owner.cluster in clusters else None
        head = cluster.rpartition(":")[0]
        return head if head in clusters else None

    def chain(cluster: str | None) -> tuple[str, ...]:
        seen: list[str] = []
        while cluster is not None and cluster not in seen:
            seen.append(cluster)
            cluster = parent_of(cluster)
        return tuple(reversed(seen))

    for cluster in sorted(clusters):
        layout.children.setdefault(parent_of(cluster), []).append(cluster)
    for node_id, node in nodes.items():
        # A subgraph's parent node is drawn inside its own cluster, as the entry.
        home = node_id if node_id in clusters else node.cluster
        home = home if home in clusters else None
        layout.members.setdefault(home, []).append(node_id)
        layout.chains[node_id] = chain(home)
        if node_id in clusters:
            layout.exits[node_id] = f"{layout.ids[node_id]}x"
    return layout


def _to_dot(
    drawable: DrawableGraph, *, merge_heads: bool = True
) -> tuple[graphviz.Digraph, dict[str, str]]:
    """The DOT graph, and DOT id -> display title (for the SVG's tooltips)."""
    layout = _layout(drawable)
    titles: dict[str, str] = {}
    dot = graphviz.Digraph(name="graph")
    dot.attr(
        rankdir="TB",
        nodesep="0.35",
        ranksep="0.45",
        newrank="true",
        bgcolor="transparent",
        pad="0.2",
        fontname=_FONT,
        fontsize="11",
        fontcolor=_MUTED,
        labeljust="l",
    )
    # Node names stay default black: written without a fill, the page's CSS
    # gives them the theme's text colour (dark mode).
    dot.attr("node", fontname=_FONT, fontsize="14")
    dot.attr(
        "edge",
        fontname=_FONT,
        fontsize="12",
        fontcolor=_MUTED,
        color=_LINE,
        arrowsize="0.7",
        penwidth="1.1",
    )
    _add_cluster(dot, drawable, layout, None, titles)
    for tail, head, edge, attrs in _edges(drawable, layout, merge_heads=merge_heads):
        titles[f"{tail}->{head}"] = f"{_title(edge.source)} → {_title(edge.target)}"
        dot.edge(tail, head, **attrs)
    return dot, titles


def _add_cluster(
    dot: graphviz.Digraph,
    drawable: DrawableGraph,
    layout: _Layout,
    cluster: str | None,
    titles: dict[str, str],
) -> None:
    for node_id in layout.members.get(cluster, []):
        node = drawable.nodes[node_id]
        dot_id = layout.ids[node_id]
        titles[dot_id] = _title(node_id)
        dot.node(dot_id, **_node_attrs(node))
        if node_id == cluster:
            exit_id = layout.exits[node_id]
            titles[exit_id] = f"{node_id} (subgraph done)"
            dot.node(
                exit_id,
                label="",
                shape="point",
                width="0.08",
                color=_BORDER,
                id=_attr_text(f"exit-{node_id}"),
                **{"class": "node-exit"},
            )
    for index, child in enumerate(layout.children.get(cluster, [])):
        depth = len(layout.chains.get(child, ())) or 1
        with dot.subgraph(name=f"cluster_{layout.ids.get(child, f'c{index}')}") as sub:
            owned = child in drawable.nodes
            sub.attr(
                label="" if owned else _html_label(child, size=10),
                style="rounded,dashed" if depth % 2 else "rounded",
                color=_BORDER,
                penwidth="1",
                margin="12",
                id=_attr_text(f"cluster-{child}"),
                **{"class": "cluster--subgraph"},
            )
            _add_cluster(sub, drawable, layout, child, titles)


def _node_attrs(node: Node) -> dict[str, str]:
    if node.id in (START, END):
        kind = "start" if node.id == START else "end"
        return {
            "label": _html_label(kind, size=12),
            "shape": "box",
            "style": "rounded,filled",
            "fillcolor": _ACCENT_SOFT,
            "color": _ACCENT,
            "fontcolor": _ACCENT,
            "height": "0.28",
            "width": "0.6",
            "margin": "0.08,0.02",
            "id": _attr_text(f"node-{node.id}"),
            "class": f"node--terminal node--{kind}",
        }
    classes = ["node--step", *(f"marker-{_css(m)}" for m in node.markers)]
    return {
        "label": _html_label(node.name, badges=[_badge(m) for m in node.markers]),
        "shape": "box",
        "style": "rounded,filled",
        "fillcolor": "#ffffff",
        "color": _BORDER,
        "penwidth": "1.2",
        "height": "0.4",
        "margin": "0.16,0.07",
        "id": _attr_text(f"node-{node.id}"),
        "class": " ".join(classes),
    }


def _edges(
    drawable: DrawableGraph, layout: _Layout, *, merge_heads: bool = True
) -> Iterator[tuple[str, str, Edge, dict[str, str]]]:
    """Each edge as (tail DOT id, head DOT id, edge, attributes).

    Plain edges into one node are a fan-in (class ``edge--fan-in``) and share an
    arrowhead when that is safe (see :func:`_merged_heads`). Edges leaving a
    subgraph's parent for outside its cluster start at the cluster's exit point;
    edges coming back to the parent from inside end there.
    """

    def returns(edge: Edge) -> bool:
        return edge.target in layout.exits and edge.target in layout.chains.get(
            edge.source, ()
        )

    plain = [e for e in drawable.edges if not e.conditional and not returns(e)]
    fan_in = {e.target for e in plain if sum(o.target == e.target for o in plain) > 1}
    merged = _merged_heads(drawable, plain, fan_in) if merge_heads else set()
    for edge in drawable.edges:
        if edge.source not in layout.ids or edge.target not in layout.ids:
            continue
        tail, head = layout.ids[edge.source], layout.ids[edge.target]
        if (
            edge.source in layout.exits
            and edge.source not in layout.chains[edge.target]
        ):
            tail = layout.exits[edge.source]
        if returns(edge):
            head = layout.exits[edge.target]
        attrs: dict[str, str] = {}
        classes = ["edge--conditional"] if edge.conditional else ["edge--plain"]
        if edge.conditional:
            attrs["style"] = "dashed"
            if edge.data:
                attrs["label"] = _html_label(edge.data, size=12, pad=2)
        elif edge.target in fan_in and not returns(edge):
            classes.append("edge--fan-in")
            if edge.target in merged:
                attrs["samehead"] = f"in{head}"
        attrs["class"] = " ".join(classes)
        yield tail, head, edge, attrs


def _merged_heads(
    drawable: DrawableGraph, plain: list[Edge], fan_in: set[str]
) -> set[str]:
    """Fan-in targets whose edges may share one arrowhead (Graphviz ``samehead``).

    Not when one of the edges closes a loop (its source is reachable from the
    target): Graphviz 2.43 cannot lay that out (it writes a negative height).
    """
    after: dict[str, set[str]] = {}
    for edge in drawable.edges:
        after.setdefault(edge.source, set()).add(edge.target)

    def reachable(start: str) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in after.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    safe = set()
    for target in fan_in:
        downstream = reachable(target)
        if not any(e.source in downstream for e in plain if e.target == target):
            safe.add(target)
    return safe


# -- escaping --------------------------------------------------------------------


def _html_label(
    text: str, *, badges: list[str] | None = None, size: int | None = None, pad: int = 0
) -> str:
    """A Graphviz HTML-like label; ``text`` and badges are HTML-escaped."""
    name = html.escape(text, quote=True)
    if size is not None:
        name = f'<font point-size="{size}">{name}</font>'
    rows = [f"<tr><td>{name}</td></tr>"]
    if badges:
        line = html.escape("  ".join(badges), quote=True)
        rows.append(
            f'<tr><td><font point-size="11" color="{_MUTED}">{line}</font></td></tr>'
        )
    return (
        f'<<table border="0" cellborder="0" cellspacing="0" cellpadding="{pad}">'
        f"{''.join(rows)}</table>>"
    )


def _attr_text(text: str) -> str:
    """A plain (never HTML) DOT attribute; backslashes kept literal (escString)."""
    return cast(str, graphviz.nohtml(text.replace("\\", "\\\\")))


def _badge(marker: str) -> str:
    return MARKER_BADGES.get(marker, marker)


def _css(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _title(node_id: str) -> str:
    return {START: "start", END: "end"}.get(node_id, node_id)


# -- SVG clean-up ----------------------------------------------------------------

_BEFORE_SVG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)
_TITLE = re.compile(r"<title>([^<]*)</title>\n?")
_POINTS = re.compile(r'\A<svg width="([\d.]+)pt" height="([\d.]+)pt"')


def _tidy(svg: str, titles: dict[str, str]) -> str:
    """Drop the prolog and comments; turn DOT ids in ``<title>`` back into names.

    The size becomes user units (1pt -> 1px, 3/4 of Graphviz's size), so 14pt
    labels read as 14px text and a 50-node graph stays about a screen wide; the
    ``<svg>`` gets a class saying whether it may shrink to fit (see FIT_WIDTH).
    """
    svg = _COMMENT.sub("", _BEFORE_SVG.sub("", svg, count=1))
    size = _POINTS.match(svg)
    wide = size is not None and float(size.group(1)) > FIT_WIDTH
    classes = "graph-svg graph-svg--wide" if wide else "graph-svg"
    svg = _POINTS.sub(rf'<svg class="{classes}" width="\1" height="\2"', svg, count=1)

    def title(match: re.Match[str]) -> str:
        key = html.unescape(match.group(1))
        if key not in titles:
            return ""  # the graph's own title: our DOT name, meaningless to people
        return f"<title>{html.escape(titles[key], quote=False)}</title>\n"

    return _TITLE.sub(title, svg).strip() + "\n"

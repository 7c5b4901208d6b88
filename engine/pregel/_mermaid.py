"""Mermaid for :class:`~engine.pregel._draw.DrawableGraph`: the flowchart text
LangGraph's ``get_graph().draw_mermaid()`` writes, and its pictures.

The text has LangGraph's layout and parameters (``with_styles``,
``curve_style``, ``node_colors``, ``wrap_label_n_words``,
``frontmatter_config``): a YAML front matter naming the edges' curve, then
``graph TD;``, the nodes (only with styles, as there), the edges (sorted by
source and target, as LangGraph sorts them), the class styles. Ids keep
``[A-Za-z0-9_-]`` and write any other character as a backslash and its
hexadecimal code point, so two names never share an id.
Unlike LangGraph, node names and edge labels are HTML-escaped (``&<>"|``):
the text is served by the studio and rendered in browsers.

The pictures (``draw_mermaid_png``, ``draw_png``, ``draw_ascii``) are
langchain-core's renderers, as in LangGraph, whose ``get_graph()`` returns
langchain-core's graph: Mermaid.ink or pyppeteer for the PNG of this text,
pygraphviz for ``draw_png``, grandalf for ASCII. Without langchain-core they
raise ``ImportError`` saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine._internal._constants import END, START

if TYPE_CHECKING:
    from engine.pregel._draw import DrawableGraph, Edge, Node

__all__ = ("langchain_graph", "mermaid_text", "render_mermaid_png")

CLASS_STYLES = {
    "default": "fill:#f2f0ff,line-height:1.2",
    "first": "fill-opacity:0",
    "last": "fill:#bfb6fc",
}
"""The node classes' styles when ``node_colors`` is not given (LangGraph's)."""

_MARKDOWN_ENDS = ("*", "_", "`")
"""A name that starts and ends with one of these is wrapped in ``<p>`` (else
Mermaid reads it as Markdown emphasis): ``__start__``."""

_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")

_LABEL_ENTITIES = {
    "[": "#91;",
    "]": "#93;",
    "(": "#40;",
    ")": "#41;",
    "{": "#123;",
    "}": "#125;",
    '"': "#quot;",
    "<": "#60;",
    ">": "#62;",
}
"""Characters of a metadata line that Mermaid would read as syntax, as its
entities (``#`` itself first becomes ``#35;``)."""


def mermaid_text(
    graph: DrawableGraph,
    *,
    with_styles: bool = True,
    curve_style: Any = "linear",
    node_colors: Any = None,
    wrap_label_n_words: int = 9,
    frontmatter_config: Mapping[str, Any] | None = None,
) -> str:
    """The flowchart (see the module's text). ``curve_style``: a name or
    langchain-core's ``CurveStyle``; ``node_colors``: its ``NodeStyles`` (or
    anything with ``default``, ``first`` and ``last`` attributes)."""
    lines: list[str] = []
    if with_styles:
        curve = getattr(curve_style, "value", curve_style)
        front = dict(frontmatter_config or {})
        config = dict(front.get("config") or {})
        config["flowchart"] = {**(config.get("flowchart") or {}), "curve": curve}
        front["config"] = config
        lines += ["---", _yaml(front).rstrip("\n"), "---"]
    lines.append("graph TD;")
    first, last = _ends(graph)
    if with_styles:
        for node in graph.nodes.values():
            lines.append("\t" + _node_line(node, first, last))
    edges = sorted(graph.edges, key=_edge_order)
    lines += ["\t" + _edge_line(edge, wrap_label_n_words) for edge in edges]
    if with_styles:
        for name, default in CLASS_STYLES.items():
            style = default if node_colors is None else getattr(node_colors, name)
            lines.append(f"\tclassDef {name} {style}")
    return "\n".join(lines) + "\n"


def _ends(graph: DrawableGraph) -> tuple[str | None, str | None]:
    """The drawing's first and last nodes: START and END when drawn, else the
    one node without edges in (out), when there is exactly one."""
    nodes = graph.nodes
    if START in nodes or END in nodes:
        return (START if START in nodes else None), (END if END in nodes else None)
    targets = {e.target for e in graph.edges}
    sources = {e.source for e in graph.edges}
    heads = [n for n in nodes if n not in targets]
    tails = [n for n in nodes if n not in sources]
    return (
        heads[0] if len(heads) == 1 else None,
        tails[0] if len(tails) == 1 else None,
    )


def _edge_order(edge: Edge) -> tuple[bool, str, str, bool, str]:
    """LangGraph's order: by source, then target; plain edges into END last
    (LangGraph finds those after the others: the nodes nothing follows)."""
    last = edge.target == END and not edge.conditional
    return (last, edge.source, edge.target, edge.conditional, edge.data or "")


def _notes(node: Node) -> dict[str, Any]:
    """What a node's label lists: its metadata, then what LangGraph's drawing
    adds to it (``defer``, ``__interrupt``) from the node's markers."""
    notes = dict(node.metadata or {})
    markers = node.markers
    if "defer" in markers:
        notes["defer"] = True
    before, after = "interrupt_before" in markers, "interrupt_after" in markers
    if before or after:
        notes["__interrupt"] = ",".join(
            w for w, on in (("before", before), ("after", after)) if on
        )
    return notes


def _node_line(node: Node, first: str | None, last: str | None) -> str:
    name = node.name.rsplit(":", 1)[-1]
    label = _html(name)
    if name.startswith(_MARKDOWN_ENDS) and name.endswith(_MARKDOWN_ENDS):
        label = f"<p>{label}</p>"
    notes = [
        _entities(f"{key} = {text}")
        for key, value in _notes(node).items()
        if (text := _metadata_text(value)) is not None
    ]
    if notes:
        label += "<hr/><small><em>" + "\n".join(notes) + "</em></small>"
    key = mermaid_id(node.id)
    if node.id == first:
        return f"{key}([{label}]):::first"
    if node.id == last:
        return f"{key}([{label}]):::last"
    return f"{key}({label})"


def _edge_line(edge: Edge, wrap: int) -> str:
    src, dst = mermaid_id(edge.source), mermaid_id(edge.target)
    if edge.data is None:
        return f"{src} {'-.->' if edge.conditional else '-->'} {dst};"
    words = str(edge.data).split()
    if len(words) > wrap > 0:  # a line break every ``wrap`` words
        label = "&nbsp<br>&nbsp".join(
            _html(" ".join(words[i : i + wrap])) for i in range(0, len(words), wrap)
        )
    else:
        label = _html(str(edge.data))
    if edge.conditional:
        return f"{src} -. &nbsp;{label}&nbsp; .-> {dst};"
    return f"{src} -- &nbsp;{label}&nbsp; --> {dst};"


def mermaid_id(value: str) -> str:
    """A Mermaid node id for ``value``, distinct for distinct values."""
    return _SAFE_ID.sub(lambda m: "\\" + format(ord(m.group()), "x"), value)


def _html(value: str) -> str:
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("|", "&#124;")
    )


def _entities(text: str) -> str:
    text = text.replace("#", "#35;")
    for char, entity in _LABEL_ENTITIES.items():
        text = text.replace(char, entity)
    return text


def _metadata_text(value: Any) -> str | None:
    """A metadata value as a label shows it: scalars, and lists, tuples and
    sets of scalars (a set sorted); None for anything else (left out)."""
    scalars = (str, int, float, bool)
    if isinstance(value, scalars):
        return str(value)
    if isinstance(value, (list, tuple, set)) and all(
        isinstance(item, scalars) for item in value
    ):
        items = [str(item) for item in value]
        return ", ".join(sorted(items) if isinstance(value, set) else items)
    return None


def _yaml(data: Mapping[str, Any]) -> str:
    """``data`` as block YAML: PyYAML's ``dump`` when it is installed (what
    LangGraph writes), else the same for nested dicts of plain values (keys
    sorted, two spaces a level, strings quoted as JSON when YAML would need it)."""
    try:
        import yaml  # noqa: PLC0415 - optional

        return str(yaml.dump(dict(data), default_flow_style=False))
    except ImportError:
        return "".join(_yaml_lines(data, 0))


def _yaml_lines(data: Mapping[str, Any], depth: int) -> list[str]:
    out: list[str] = []
    pad = "  " * depth
    for key in sorted(data, key=str):
        value = data[key]
        if isinstance(value, Mapping) and value:
            out.append(f"{pad}{_yaml_scalar(key)}:\n")
            out += _yaml_lines(value, depth + 1)
        else:
            out.append(f"{pad}{_yaml_scalar(key)}: {_yaml_scalar(value)}\n")
    return out


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_ .#%-]*", text) and text.lower() not in (
        "true",
        "false",
        "null",
        "yes",
        "no",
        "on",
        "off",
    ):
        return text
    return json.dumps(text)


def langchain_graph(graph: DrawableGraph) -> Any:
    """``graph`` as langchain-core's ``Graph`` (what LangGraph's ``get_graph()``
    returns), for its renderers; ImportError without langchain-core."""
    try:
        from langchain_core.runnables.graph import (  # noqa: PLC0415 - optional
            Edge as LcEdge,
        )
        from langchain_core.runnables.graph import (  # noqa: PLC0415
            Graph as LcGraph,
        )
        from langchain_core.runnables.graph import (  # noqa: PLC0415
            Node as LcNode,
        )
    except ImportError as exc:
        raise ImportError(
            "Drawing a picture of a graph uses langchain-core's renderers, as "
            "LangGraph does: pip install langchain-core (draw_mermaid() needs nothing)."
        ) from exc
    nodes = {
        n.id: LcNode(id=n.id, name=n.name, data=n.data, metadata=n.metadata)
        for n in graph.nodes.values()
    }
    edges = [
        LcEdge(source=e.source, target=e.target, data=e.data, conditional=e.conditional)
        for e in graph.edges
    ]
    return LcGraph(nodes=nodes, edges=edges)


def render_mermaid_png(mermaid: str, **options: Any) -> bytes:
    """The PNG of ``mermaid`` through langchain-core's renderer (Mermaid.ink by
    default: the text is sent to ``base_url``; ``draw_method`` pyppeteer renders
    it locally); ImportError without langchain-core."""
    try:
        from langchain_core.runnables.graph_mermaid import (  # noqa: PLC0415
            draw_mermaid_png,
        )
    except ImportError as exc:
        raise ImportError(
            "draw_mermaid_png() renders through langchain-core, as LangGraph does: "
            "pip install langchain-core, or render draw_mermaid()'s text yourself."
        ) from exc
    return bytes(draw_mermaid_png(mermaid, **options))

"""Subgraphs: which compiled graph a node runs, and which one a namespace names.

A node is a subgraph when it is a compiled graph, or when its function reaches
one: a variable it closes over, a global it names, or an attribute of either
(``helpers.review_graph``). This over-approximates (a graph the function names
but never calls counts), as LangGraph's detection does: then
``get_state(subgraphs=True)``, ``get_graph(xray=...)`` and the state methods given
a subgraph's config find the subgraph. Worked out once, at compile time.
"""

from __future__ import annotations

from types import CodeType, FunctionType, ModuleType
from typing import TYPE_CHECKING, Any, cast

from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    NS_END,
    NS_SEP,
)
from engine._internal._typing import RunnableConfig

if TYPE_CHECKING:
    from engine.pregel.main import Pregel

__all__ = (
    "CompiledGraph",
    "ReplayBound",
    "find_subgraph",
    "recast_namespace",
    "subgraph_for_config",
)

_LEAVES = (str, bytes, int, float, bool, type(None))


class CompiledGraph:
    """The base class of :class:`~engine.pregel.Pregel`: what subgraph detection
    recognises as a compiled graph (defined here, below ``main``, so that this
    module needs no import of it)."""

    __slots__ = ()

    @property
    def _as_pregel(self) -> Pregel:
        """This object typed as the ``Pregel`` it is a base class of (for the
        ``Pregel`` method classes, whose functions take a ``Pregel``)."""
        return cast("Pregel", self)


def _is_graph(value: Any) -> bool:
    return isinstance(value, CompiledGraph) and value.checkpointer is not False  # type: ignore[attr-defined]


def _reachable(func: Any) -> list[Any]:
    """Values a function reaches from outside its own body (closure, globals, one
    attribute further)."""
    func = getattr(func, "__func__", func)
    wrapped = getattr(func, "__wrapped__", None)
    if callable(wrapped):
        func = getattr(wrapped, "__func__", wrapped)
    if not isinstance(func, FunctionType):
        return []
    values: list[Any] = []
    for cell in func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell: a recursive function not bound yet
            continue
    names: set[str] = set()
    codes: list[CodeType] = [func.__code__]
    for code in codes:
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, CodeType))
    namespace = func.__globals__
    values.extend(namespace[name] for name in names if name in namespace)
    for value in list(values):
        if isinstance(value, (*_LEAVES, type)):
            continue
        attributes = getattr(value, "__dict__", None)
        if isinstance(attributes, dict) and not isinstance(value, FunctionType):
            values.extend(attributes[n] for n in names if n in attributes)
    return values


def find_subgraph(runnable: Any) -> Pregel | None:
    """The compiled graph a node runs: the node itself, or one its function reaches
    (not one compiled with ``checkpointer=False``: it keeps no state)."""
    if isinstance(runnable, CompiledGraph):
        return runnable  # type: ignore[return-value]
    for value in _reachable(runnable):
        if isinstance(value, ModuleType):
            continue
        if _is_graph(value):
            return value  # type: ignore[no-any-return]
    return None


def recast_namespace(checkpoint_ns: str) -> str:
    """A checkpoint namespace without task ids and call numbers: node names only."""
    return NS_SEP.join(
        part.split(NS_END, 1)[0].split("#", 1)[0]
        for part in checkpoint_ns.split(NS_SEP)
    )


def subgraph_for_config(
    graph: Pregel, config: RunnableConfig | None
) -> tuple[Pregel, RunnableConfig] | None:
    """The subgraph a state method must ask when ``config`` names a subgraph's
    namespace (a config taken from ``get_state(..., subgraphs=True)``), with the
    config that lends it this graph's saver; ``None`` for the graph's own state.

    Raises:
        ValueError: the namespace names no subgraph of ``graph``.
    """
    conf = (config or {}).get(CONF) or {}
    checkpoint_ns = conf.get(CONFIG_KEY_CHECKPOINT_NS)
    if not checkpoint_ns or CONFIG_KEY_CHECKPOINTER in conf:
        return None
    wanted = recast_namespace(checkpoint_ns)
    for name, sub in graph.get_subgraphs(namespace=wanted, recurse=True):
        if name == wanted:
            assert config is not None
            saver = graph._saver(config)
            return sub, {**config, CONF: {**conf, CONFIG_KEY_CHECKPOINTER: saver}}
    raise ValueError(f"Subgraph {wanted!r} not found")


class ReplayBound:
    """A parent run replaying a past checkpoint, as its subgraphs see it.

    Each subgraph namespace, the first time it runs in the replay, starts from
    its last checkpoint saved *before* the replayed one (none: it runs afresh),
    not from its newest, which the original branch may have written after. Later
    runs of the same subgraph in the replay load normally. As in LangGraph.
    """

    __slots__ = ("checkpoint_id", "_seen")

    def __init__(self, checkpoint_id: str) -> None:
        self.checkpoint_id = checkpoint_id
        self._seen: set[str] = set()

    def first_visit(self, checkpoint_ns: str) -> bool:
        """True the first time a subgraph (namespace without its last task id) runs."""
        stable = checkpoint_ns.rsplit(NS_END, 1)[0]
        if stable in self._seen:
            return False
        self._seen.add(stable)
        return True

    def before(self) -> RunnableConfig:
        """The ``before=`` argument of ``saver.list`` for the replayed checkpoint."""
        return {CONF: {CONFIG_KEY_CHECKPOINT_ID: self.checkpoint_id}}

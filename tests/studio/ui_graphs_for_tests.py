"""Small real engine graphs for the graph pages: drawing, escaping and input forms."""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, Field, model_validator

from engine.graph import END, START, StateGraph
from engine.types import CachePolicy, RetryPolicy

SCRIPT = "<script>alert(1)</script>"


class Log(TypedDict, total=False):
    text: str
    log: Annotated[list[str], operator.add]


def _noop(state: Any) -> dict[str, Any]:
    return {}


def escaping() -> Any:
    """A node named like an XSS payload, with a conditional edge labelled in HTML."""
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(Log)
    graph.add_node(SCRIPT, _noop)
    graph.add_node('quote"and\\slash', _noop)
    graph.add_edge(START, SCRIPT)
    graph.add_conditional_edges(
        SCRIPT,
        lambda state: "<b>bold</b>",
        {"<b>bold</b>": 'quote"and\\slash', "done": END},
    )
    return graph.compile()


def markers() -> Any:
    """Every drawable marker, a fan-in join and a subgraph."""
    inner: StateGraph[Any, Any, Any, Any] = StateGraph(Log)
    inner.add_node("fetch", _noop, retry_policy=RetryPolicy(max_attempts=2))
    inner.add_node("parse", _noop)
    inner.add_edge(START, "fetch")
    inner.add_edge("fetch", "parse")
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(Log)
    graph.add_node("plan", _noop, cache_policy=CachePolicy())
    graph.add_node("left", _noop)
    graph.add_node("right", _noop)
    graph.add_node("join", _noop)
    graph.add_node("sub", inner.compile())
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "left")
    graph.add_edge("plan", "right")
    graph.add_edge(["left", "right"], "join")
    graph.add_edge("join", "sub")
    graph.add_edge("sub", END)
    return graph.compile(interrupt_before=["join"])


def big(stages: int = 12, width: int = 4) -> Any:
    """``stages`` x (1 + ``width``) nodes: fan out, join, repeat; one loop back."""
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(Log)
    heads = [f"stage_{stage:02d}" for stage in range(stages)]
    for stage, head in enumerate(heads):
        workers = [f"s{stage:02d}_worker_{i}" for i in range(width)]
        graph.add_node(head, _noop)
        for worker in workers:
            graph.add_node(worker, _noop)
            graph.add_edge(head, worker)
        graph.add_edge(workers, heads[stage + 1] if stage + 1 < stages else END)
    graph.add_edge(START, heads[0])
    if stages > 6:
        graph.add_conditional_edges(
            heads[6], lambda state: "ok", {"ok": "s06_worker_0", "redo": heads[2]}
        )
    return graph.compile()


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Order(BaseModel):
    """A pydantic input: its validators run when the form is checked."""

    name: str = Field(min_length=1)
    count: int = Field(ge=1)
    ratio: float | None = None
    mode: Literal["fast", "slow"] = "fast"
    color: Color = Color.RED
    express: bool = False
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _express_is_small(self) -> Order:
        if self.express and self.count > 10:
            raise ValueError("express orders hold at most 10 items")
        return self


def pydantic_input() -> Any:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(Order)
    graph.add_node("take", _noop)
    graph.add_edge(START, "take")
    return graph.compile()


class Typed(TypedDict):
    title: str
    level: Literal[1, 2, 3]
    urgent: bool
    note: NotRequired[str]
    flagged: NotRequired[bool]
    limit: NotRequired[int | None]
    extra: NotRequired[dict[str, Any]]


def typed_input() -> Any:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(Typed)
    graph.add_node("take", _noop)
    graph.add_edge(START, "take")
    return graph.compile()


@dataclass
class Trip:
    city: str
    days: int = 3
    stops: list[str] = field(default_factory=list)


def dataclass_input() -> Any:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(Trip)
    graph.add_node("plan", _noop)
    graph.add_edge(START, "plan")
    return graph.compile()


def broken() -> Any:
    raise RuntimeError("no model configured")

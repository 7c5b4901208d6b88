"""Research fan-out: a planner ``Send``s one task per topic; evidence merges by stable id.

``plan`` splits the question into topics and sends each to ``research`` (one
task per topic, all in the same step); ``research`` returns evidence items with
ids derived from their content, so the ``merge_evidence`` reducer keeps one copy
of each however often a topic is researched; ``write`` turns the evidence into
a short report. The corpus is local and deterministic: no network.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, TypedDict

from engine.graph import END, START, StateGraph
from engine.types import Send

__all__ = ("THREAD_TITLE", "build", "merge_evidence")

THREAD_TITLE = "{question}"
"""A research thread is titled by its question (``studio.titles``)."""

CORPUS: dict[str, list[tuple[str, str]]] = {
    "pricing": [
        (
            "Usage-based pricing aligns cost with value for spiky workloads.",
            "pricing-handbook#2",
        ),
        ("Seat pricing is easier to forecast for finance teams.", "cfo-survey-2025#7"),
    ],
    "latency": [
        (
            "p95 latency matters more than the mean for interactive tools.",
            "sre-notes#14",
        ),
        (
            "Caching node results cuts repeated work in agent loops.",
            "engine-docs#cache",
        ),
    ],
    "compliance": [
        (
            "Every approval needs an audit trail: who, when, what they saw.",
            "audit-guide#3",
        ),
        ("Idempotency keys stop duplicate payments on retries.", "payments-rfc#9"),
    ],
    "adoption": [
        ("Teams adopt tools that show them what happened, step by step.", "ux-study#4"),
    ],
}


class Evidence(TypedDict):
    id: str
    topic: str
    claim: str
    source: str


def merge_evidence(
    current: dict[str, Evidence] | None, update: Any
) -> dict[str, Evidence]:
    """Merge evidence by id: the same finding is kept once, new ones are added."""
    merged = dict(current or {})
    items = update.values() if isinstance(update, dict) else update
    for item in items:
        merged[item["id"]] = item
    return merged


class ResearchState(TypedDict, total=False):
    question: str
    topics: list[str]
    evidence: Annotated[dict[str, Evidence], merge_evidence]
    report: str


class TopicTask(TypedDict):
    question: str
    topic: str


def plan(state: ResearchState) -> dict[str, Any]:
    """Pick the topics the question touches (all known topics when none match)."""
    question = state["question"].lower()
    topics = [t for t in CORPUS if t in question] or sorted(CORPUS)
    return {"topics": topics}


def fan_out(state: ResearchState) -> list[Send]:
    return [
        Send("research", {"question": state["question"], "topic": t})
        for t in state["topics"]
    ]


def _evidence_id(topic: str, claim: str, source: str) -> str:
    return hashlib.sha256(f"{topic}|{claim}|{source}".encode()).hexdigest()[:16]


def research(task: TopicTask) -> dict[str, Any]:
    """Collect the corpus' findings on one topic."""
    found = [
        Evidence(
            id=_evidence_id(task["topic"], claim, source),
            topic=task["topic"],
            claim=claim,
            source=source,
        )
        for claim, source in CORPUS.get(task["topic"], [])
    ]
    return {"evidence": found}


def write(state: ResearchState) -> dict[str, Any]:
    """A short report, one line per finding, grouped by topic."""
    evidence = sorted(
        state.get("evidence", {}).values(), key=lambda e: (e["topic"], e["id"])
    )
    lines = [f"Report: {state['question']}"]
    for item in evidence:
        lines.append(f"- [{item['topic']}] {item['claim']} ({item['source']})")
    return {"report": "\n".join(lines)}


def build(*, checkpointer: Any = None) -> Any:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(ResearchState)
    graph.add_node("plan", plan)
    graph.add_node("research", research, input_schema=TopicTask)
    graph.add_node("write", write)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", fan_out, ["research"])
    graph.add_edge("research", "write")
    graph.add_edge("write", END)
    return graph.compile(checkpointer=checkpointer, name="research")

"""Purchase approval: normalize -> (budget || compliance) -> human_review -> execute | reject.

The contract (DESIGN.md, "Approvals"): input ``request_id`` (str),
``approval_version`` (int >= 1), ``amount_minor`` (int > 0, fen, CNY), optional
``items``, ``vendor``, ``category``, ``reason``. The requester is the user who
started the run (taken from the run's config, never from the input: an input
``requester`` key is refused). Budget and compliance run in parallel; both must
finish before ``human_review`` pauses with what will happen, why, the amount and
the check results. A human approval never overrides a failed check. ``execute``
buys through an outbox keyed by ``request_id``, so a retry or a replay never
buys twice. Output: ``status`` (``executed`` | ``rejected``) and ``result``.

The graph is governed (``GOVERNANCE`` below, read by ``studio.reviews``): only the
reviewer console answers ``human_review``; no fork or state edit may write as it
or write the request, the check results or the decision. ``execute`` re-runs the
hard checks on the request in the checkpoint and buys through
``studio.reviews.ledger.purchase_once``, which trusts the decision ledger only.
Above ``STUDIO_SECOND_LEVEL_ABOVE_MINOR`` (default 50,000 CNY) a member of
``senior-reviewers`` must approve too.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Annotated, Any, Literal, Required, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.config import get_config
from engine.graph import END, START, StateGraph
from engine.testing import fault_point
from engine.types import RetryPolicy, interrupt
from studio.input_fields import MONEY_MINOR
from studio.reviews.governance import Governance

__all__ = (
    "DEFAULT_BUDGET_LIMIT_MINOR",
    "DEFAULT_SECOND_LEVEL_ABOVE_MINOR",
    "GOVERNANCE",
    "THREAD_TITLE",
    "PurchaseItem",
    "PurchaseRequest",
    "ReviewDecision",
    "build",
    "thread_title",
)

DEFAULT_BUDGET_LIMIT_MINOR = 10_000_000
"""100,000 CNY in fen."""
DEFAULT_SECOND_LEVEL_ABOVE_MINOR = 5_000_000
"""50,000 CNY in fen: above it, a senior reviewer approves after the first one."""

RESTRICTED_CATEGORIES = frozenset({"weapons", "gambling", "crypto-mining"})
BLOCKED_VENDORS = frozenset({"sanctioned-vendor-ltd"})


class PurchaseItem(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    sku: str = Field(min_length=1, max_length=64)
    qty: int = Field(gt=0)
    unit_price_minor: int = Field(ge=0)


class PurchaseRequest(BaseModel):
    """What a requester may send (strict: "5" is not an int, unknown keys are refused)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    request_id: str = Field(min_length=1, max_length=128)
    approval_version: int = Field(ge=1)
    amount_minor: int = Field(gt=0)
    items: list[PurchaseItem] = Field(default_factory=list)
    vendor: str = Field(default="", max_length=200)
    category: str = Field(default="", max_length=64)
    reason: str = Field(default="", max_length=2000)

    @model_validator(mode="after")
    def _items_add_up(self) -> PurchaseRequest:
        if self.items:
            total = sum(item.qty * item.unit_price_minor for item in self.items)
            if total != self.amount_minor:
                raise ValueError(
                    f"items add up to {total} fen but amount_minor is {self.amount_minor}"
                )
        return self


class ReviewDecision(BaseModel):
    """A reviewer's answer, bound to the request and version it decides."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    request_id: str = Field(min_length=1, max_length=128)
    approval_version: int = Field(ge=1)
    decision_id: str = Field(min_length=1, max_length=64)
    action: Literal["approve", "reject"]
    reason: str = Field(default="", max_length=2000)
    reviewer: str = Field(min_length=1, max_length=150)
    """Injected by the server from the session, never taken from the client."""


class PurchaseState(TypedDict, total=False):
    request_id: str
    approval_version: int
    amount_minor: int
    items: list[dict[str, Any]]
    vendor: str
    category: str
    reason: str
    requester: str
    currency: str
    checks: Annotated[list[dict[str, Any]], operator.add]
    budget_ok: bool
    compliance_ok: bool
    decision: dict[str, Any]
    status: str
    result: str


class PurchaseInput(TypedDict, total=False):
    """What a run takes. The ``Field`` metadata (descriptions, examples, limits, the
    amount's currency) is what the studio's start-a-run form and the API's JSON
    schema show; ``normalize`` still checks the whole request strictly."""

    request_id: Required[
        Annotated[
            str,
            Field(
                min_length=1,
                max_length=128,
                description="Names the request: its decisions and purchase are keyed by it.",
                examples=["PO-1001"],
            ),
        ]
    ]
    approval_version: Required[
        Annotated[
            int,
            Field(
                ge=1,
                description="1 for a new request; a changed request gets the next one.",
                examples=[1],
            ),
        ]
    ]
    amount_minor: Required[
        Annotated[
            int,
            Field(
                gt=0,
                description="The total to buy. Stored in fen (1 CNY = 100 fen).",
                examples=[48050],
                json_schema_extra={MONEY_MINOR: "CNY"},
            ),
        ]
    ]
    items: Annotated[
        list[dict[str, Any]],
        Field(
            description="Line items, each {sku, qty, unit_price_minor in fen}; "
            "they must add up to the amount.",
            examples=[[{"sku": "LAPTOP-14", "qty": 2, "unit_price_minor": 24025}]],
        ),
    ]
    vendor: Annotated[
        str,
        Field(
            max_length=200,
            description="Who sells it.",
            examples=["Acme Office Supply"],
        ),
    ]
    category: Annotated[
        str,
        Field(
            max_length=64,
            description="What kind of purchase; some categories are restricted.",
            examples=["it"],
        ),
    ]
    reason: Annotated[
        str,
        Field(
            max_length=2000,
            description="Why it is needed, for the reviewer.",
            examples=["Laptops for the two new engineers"],
        ),
    ]


class PurchaseOutput(TypedDict, total=False):
    request_id: str
    approval_version: int
    status: str
    result: str
    budget_ok: bool
    compliance_ok: bool


def _yuan(minor: int) -> str:
    return f"{minor / 100:,.2f} CNY"


def normalize(state: PurchaseState) -> dict[str, Any]:
    """Validate the request strictly and stamp the requester from the run."""
    fields = {k: state[k] for k in PurchaseRequest.model_fields if k in state}  # type: ignore[literal-required]
    try:
        request = PurchaseRequest.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'request'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ValueError(f"Invalid purchase request: {problems}") from exc
    configurable = get_config().get("configurable", {})
    requester = str(configurable.get("studio_user") or "")
    if not requester:
        raise ValueError("A purchase request needs an authenticated requester")
    return {
        "items": [item.model_dump() for item in request.items],
        "vendor": request.vendor.strip(),
        "category": request.category.strip().lower(),
        "reason": request.reason.strip(),
        "requester": requester,
        "currency": "CNY",
        "status": "pending_review",
    }


def make_budget(limit_minor: int) -> Callable[[PurchaseState], dict[str, Any]]:
    def budget(state: PurchaseState) -> dict[str, Any]:
        """Within the approval limit?"""
        amount = state["amount_minor"]
        ok = amount <= limit_minor
        why = (
            f"{_yuan(amount)} is within the limit of {_yuan(limit_minor)}"
            if ok
            else f"{_yuan(amount)} exceeds the limit of {_yuan(limit_minor)}"
        )
        check = {
            "check": "budget",
            "ok": ok,
            "why": why,
            "version": state["approval_version"],
        }
        return {"budget_ok": ok, "checks": [check]}

    return budget


def compliance(state: PurchaseState) -> dict[str, Any]:
    """Vendor and category allowed?"""
    vendor = state.get("vendor", "")
    category = state.get("category", "")
    problems = []
    if vendor.lower() in BLOCKED_VENDORS:
        problems.append(f"vendor {vendor!r} is blocked")
    if category in RESTRICTED_CATEGORIES:
        problems.append(f"category {category!r} is restricted")
    ok = not problems
    why = "vendor and category are allowed" if ok else "; ".join(problems)
    return {
        "compliance_ok": ok,
        "checks": [
            {
                "check": "compliance",
                "ok": ok,
                "why": why,
                "version": state["approval_version"],
            }
        ],
    }


def _checks(state: PurchaseState) -> list[dict[str, Any]]:
    """This version's check results: the log keeps every version's, newest last."""
    version = state.get("approval_version")
    return [c for c in state.get("checks", []) if c.get("version", version) == version]


def human_review(state: PurchaseState) -> dict[str, Any]:
    """Pause for a reviewer; resume with a decision bound to request and version."""
    checks_ok = bool(state.get("budget_ok")) and bool(state.get("compliance_ok"))
    amount = state["amount_minor"]
    payload = {
        "kind": "purchase_review",
        "request_id": state["request_id"],
        "approval_version": state["approval_version"],
        "amount_minor": amount,
        "currency": "CNY",
        "amount": _yuan(amount),
        "vendor": state.get("vendor", ""),
        "category": state.get("category", ""),
        "reason": state.get("reason", ""),
        "requester": state.get("requester", ""),
        "items": state.get("items", []),
        "checks": _checks(state),
        "checks_passed": checks_ok,
        "what_will_happen": (
            f"Approving buys {_yuan(amount)} from {state.get('vendor') or 'the vendor'} "
            f"for {state.get('requester')}."
            if checks_ok
            else "A check failed: the request will be rejected whatever you decide."
        ),
    }
    answer = interrupt(payload)
    try:
        decision = ReviewDecision.model_validate(answer)
    except ValidationError as exc:
        raise ValueError(f"Invalid review decision: {exc.errors()[0]['msg']}") from exc
    if (
        decision.request_id != state["request_id"]
        or decision.approval_version != state["approval_version"]
    ):
        raise ValueError(
            f"The decision is for {decision.request_id} v{decision.approval_version}, "
            f"but this review is {state['request_id']} v{state['approval_version']}"
        )
    return {"decision": decision.model_dump()}


def route_after_review(state: PurchaseState) -> Literal["execute", "reject"]:
    """Approval goes through only when both checks passed."""
    decision = state.get("decision") or {}
    approved = decision.get("action") == "approve"
    if approved and state.get("budget_ok") and state.get("compliance_ok"):
        return "execute"
    return "reject"


Purchaser = Callable[[dict[str, Any]], dict[str, Any]]


def ledger_purchaser(order: dict[str, Any]) -> dict[str, Any]:
    """The studio's purchaser: checks the decision ledger, buys once per ``request_id``."""
    from studio.reviews.ledger import purchase_once  # noqa: PLC0415 - needs the Django app

    return purchase_once(order)


def hard_check_problems(state: PurchaseState, limit_minor: int) -> list[str]:
    """Budget and compliance, re-run on the request as it stands in the checkpoint."""
    found = [make_budget(limit_minor)(state), compliance(state)]
    return [c["why"] for result in found for c in result["checks"] if not c["ok"]]


def make_execute(
    purchaser: Purchaser, limit_minor: int
) -> Callable[[PurchaseState], dict[str, Any]]:
    def execute(state: PurchaseState) -> dict[str, Any]:
        """Buy (idempotent by request_id) if the ledger and the hard checks allow it."""
        thread_id = get_config().get("configurable", {}).get("thread_id", "")
        amount = state["amount_minor"]
        receipt = purchaser(
            {
                "request_id": state["request_id"],
                "approval_version": state["approval_version"],
                "amount_minor": amount,
                "vendor": state.get("vendor", ""),
                "category": state.get("category", ""),
                "items": state.get("items", []),
                "requester": state.get("requester", ""),
                "thread_id": thread_id,
                "levels_required": GOVERNANCE.levels_for(amount),
                "check_problems": hard_check_problems(state, limit_minor),
            }
        )
        where = f"request {state['request_id']} v{state['approval_version']}"
        if receipt.get("refused"):
            return {
                "status": "rejected",
                "result": f"Refused: {receipt['refused']}. Nothing was bought ({where}).",
            }
        fault_point("after_outbox_before_end", "purchase")
        approvers = receipt.get("approved_by") or [
            (state.get("decision") or {}).get("reviewer", "a reviewer")
        ]
        return {
            "status": "executed",
            "result": (
                f"Bought {_yuan(amount)} from {state.get('vendor') or 'the vendor'} "
                f"({where}, approved by {' and '.join(approvers)}; "
                f"purchase #{receipt['purchase_id']})."
            ),
        }

    return execute


def reject(state: PurchaseState) -> dict[str, Any]:
    """Explain why nothing was bought."""
    decision = state.get("decision") or {}
    failed = [c for c in _checks(state) if not c.get("ok")]
    if failed:
        why = "; ".join(c["why"] for c in failed)
        text = f"Rejected: {why}."
    else:
        who = decision.get("reviewer", "the reviewer")
        reason = decision.get("reason") or "no reason given"
        text = f"Rejected by {who}: {reason}."
    return {
        "status": "rejected",
        "result": f"{text} Request {state['request_id']} v{state['approval_version']}.",
    }


def build(
    *,
    budget_limit_minor: int | None = None,
    purchaser: Purchaser | None = None,
    checkpointer: Any = None,
) -> Any:
    """The compiled purchase graph (the studio attaches its checkpointer)."""
    if budget_limit_minor is None:
        budget_limit_minor = _configured_limit()
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(
        PurchaseState, input_schema=PurchaseInput, output_schema=PurchaseOutput
    )
    graph.add_node("normalize", normalize)
    graph.add_node("budget", make_budget(budget_limit_minor))
    graph.add_node("compliance", compliance)
    graph.add_node("human_review", human_review)
    graph.add_node(
        "execute",
        make_execute(purchaser or ledger_purchaser, budget_limit_minor),
        retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.2, jitter=False),
    )
    graph.add_node("reject", reject)
    graph.add_edge(START, "normalize")
    graph.add_edge("normalize", "budget")
    graph.add_edge("normalize", "compliance")
    graph.add_edge(["budget", "compliance"], "human_review")
    graph.add_conditional_edges(
        "human_review", route_after_review, ["execute", "reject"]
    )
    graph.add_edge("execute", END)
    graph.add_edge("reject", END)
    # strict_input: a client-sent key outside PurchaseInput (``requester``) is
    # refused, not ignored as LangGraph (and the engine by default) would
    return graph.compile(checkpointer=checkpointer, name="purchase", strict_input=True)


def second_level_above() -> int:
    """The amount (fen) above which a second, senior approval is needed."""
    try:
        from django.conf import settings  # noqa: PLC0415 - optional outside the studio

        return int(
            getattr(
                settings,
                "STUDIO_SECOND_LEVEL_ABOVE_MINOR",
                DEFAULT_SECOND_LEVEL_ABOVE_MINOR,
            )
        )
    except Exception:
        return DEFAULT_SECOND_LEVEL_ABOVE_MINOR


def approval_levels(amount_minor: int) -> int:
    """1, or 2 when the amount needs a senior reviewer as well."""
    return 2 if amount_minor > second_level_above() else 1


GOVERNANCE = Governance(
    console_nodes=frozenset({"human_review"}),
    protected_keys=frozenset(
        {
            "request_id",
            "approval_version",
            "amount_minor",
            "items",
            "vendor",
            "category",
            "requester",
            "currency",
            "checks",
            "budget_ok",
            "compliance_ok",
            "decision",
            "status",
            "result",
        }
    ),
    levels_for=approval_levels,
)
"""What only the reviewer console may do on this graph (``studio.reviews.governance``)."""


def thread_title(request: Any) -> str:
    """``PO-1001 · Acme Office Supply · 480.50 CNY``: how the studio lists a purchase."""
    amount = request.get("amount_minor")
    money = _yuan(amount) if isinstance(amount, int) else ""
    return " · ".join(
        part
        for part in (str(request.get("request_id") or ""), request.get("vendor"), money)
        if isinstance(part, str) and part.strip()
    )


THREAD_TITLE = thread_title
"""How a purchase thread is titled (``studio.titles``)."""


def _configured_limit() -> int:
    try:
        from django.conf import settings  # noqa: PLC0415 - optional outside the studio

        return int(
            getattr(
                settings,
                "STUDIO_PURCHASE_BUDGET_LIMIT_MINOR",
                DEFAULT_BUDGET_LIMIT_MINOR,
            )
        )
    except Exception:
        return DEFAULT_BUDGET_LIMIT_MINOR

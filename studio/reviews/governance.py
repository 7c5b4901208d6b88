"""Governed graphs: what only the reviewer console may do, declared once per graph.

A graph's module declares ``GOVERNANCE = Governance(...)`` next to its factory
(see ``studio/demo_graphs/purchase.py``). For such a graph:

- its console interrupts (``console_nodes``) are answered only through the
  decision protocol (``studio.reviews.decisions``): a ``Command(resume=...)``
  from any other path is refused;
- no fork, ``update_state`` or ``Command(update=...)`` may write as a console node
  or write a protected key, whoever asks (an administrator included);
- the side effect behind the approval checks the ledger (``studio.reviews.ledger``
  for purchases, ``studio.reviews.outbound_email`` for an agent's emails).

Who answers (``answered_by``):

- ``"reviewers"`` (purchases): members of the reviewer groups, level by level,
  never the requester (segregation of duties); they may read the thread for that;
- ``"owner"`` (an agent asking before it acts, e.g. the tool agent's
  ``send_email``): the thread's owner alone, the person the agent works for and
  in whose name it acts. Nobody else may answer, a superuser included (they may
  read the thread, not speak for its owner), and reviewers do not see these
  threads: an agent's question is not a reviewer's matter. The owner answers
  through the same protocol (ledger row, audit, resume queued by the server),
  never with a resume command, fork or state edit.

Pure rules plus one registry lookup: no engine calls, no ORM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from studio import graph_registry as registry
from studio.errors import Forbidden

__all__ = (
    "GOVERNANCE_ATTR",
    "AnsweredBy",
    "Governance",
    "GovernedWrite",
    "governance_for",
)

AnsweredBy = Literal["reviewers", "owner"]

GOVERNANCE_ATTR = "GOVERNANCE"
"""The module attribute a governed graph's module defines."""


class GovernedWrite(Forbidden):
    """A state change that only the reviewer console may make."""

    code = "governed_write"
    title = "Only the reviewer console can do this"


def _one_level(amount_minor: int) -> int:
    return 1


def _payload_shown(
    payload: dict[str, Any], values: Mapping[str, Any]
) -> dict[str, Any]:
    return payload


def _purchase_resume(decision: Mapping[str, Any], seen: Mapping[str, Any]) -> Any:
    """What a purchase's console node receives (its ``ReviewDecision`` schema)."""
    return {
        k: decision[k]
        for k in (
            "request_id",
            "approval_version",
            "decision_id",
            "action",
            "reason",
            "reviewer",
        )
    }


@dataclass(frozen=True, slots=True)
class Governance:
    """What the console alone may do on a graph, and how to read its review payload."""

    console_nodes: frozenset[str]
    """Nodes whose interrupts are answered only through the console."""
    protected_keys: frozenset[str]
    """State keys that no fork, ``update_state`` or command update may write."""
    request_key: str = "request_id"
    version_key: str = "approval_version"
    amount_key: str = "amount_minor"
    levels_for: Callable[[int], int] = field(default=_one_level)
    """Approval levels an amount (minor units) needs: 1, or 2 for a second, senior level."""
    answered_by: AnsweredBy = "reviewers"
    """Who answers a console interrupt (see the module doc)."""
    shown: Callable[[dict[str, Any], Mapping[str, Any]], dict[str, Any]] = field(
        default=_payload_shown
    )
    """``(interrupt payload, state values) -> what the decider is shown``; the
    decision binds exactly this (``ApprovalDecision.seen``) and the side effect
    checks it. By default the payload itself."""
    resume_for: Callable[[Mapping[str, Any], Mapping[str, Any]], Any] = field(
        default=_purchase_resume
    )
    """``(decision, seen) -> the resume value`` the server queues for a final
    decision; ``decision`` has ``request_id``, ``approval_version``,
    ``decision_id``, ``action``, ``reason`` and ``reviewer`` (a username)."""

    def review_key(
        self, payload: Mapping[str, Any], interrupt_id: str
    ) -> tuple[str, int, int]:
        """``(request id, approval version, amount in minor units)`` of a question.

        With an empty ``request_key`` each question is its own request, named by
        its interrupt id (version 1, no amount): an agent's questions.

        Raises:
            KeyError, TypeError, ValueError: the payload lacks the keys.
        """
        if not self.request_key:
            if not interrupt_id:
                raise ValueError("an interrupt without an id")
            return interrupt_id, 1, 0
        return (
            str(payload[self.request_key]),
            int(payload[self.version_key]),
            int(payload[self.amount_key]),
        )

    def write_refusal(self, as_node: str | None, keys: Iterable[str]) -> str:
        """Why writing ``keys`` as ``as_node`` is refused ("" when it is allowed)."""
        problems = []
        if as_node and as_node in self.console_nodes and self.answered_by == "owner":
            problems.append(
                f"writing as {as_node!r} answers the agent's question, which its "
                "owner does on the thread page (the answer is recorded there)"
            )
        elif as_node and as_node in self.console_nodes:
            problems.append(
                f"writing as {as_node!r} answers a review, which only the reviewer "
                "console may do"
            )
        protected = sorted(set(keys) & self.protected_keys)
        if protected:
            problems.append(
                f"{', '.join(protected)} {'is' if len(protected) == 1 else 'are'} "
                "protected: only the graph's own checks and the console write "
                f"{'it' if len(protected) == 1 else 'them'}"
            )
        if not problems:
            return ""
        return (
            "This graph is governed by the reviewer console: "
            + "; ".join(problems)
            + ". Nobody can do this by editing state, an administrator included."
        )

    def refuse_write(self, as_node: str | None, keys: Iterable[str]) -> None:
        """Raise :class:`GovernedWrite` when the write is refused."""
        reason = self.write_refusal(as_node, keys)
        if reason:
            raise GovernedWrite(reason, as_node=as_node or "")

    def command_refusal(
        self, command: Mapping[str, Any] | None, waiting_nodes: Iterable[str]
    ) -> str:
        """Why a run command is refused outside the console ("" when it is allowed).

        Args:
            command: ``{"resume": ..., "update": ..., "goto": ...}`` as queued.
            waiting_nodes: the nodes whose interrupts wait at the thread's head.
        """
        if not command:
            return ""
        if "resume" in command and command["resume"] is not None:
            governed = sorted(set(waiting_nodes) & self.console_nodes)
            if governed and self.answered_by == "owner":
                return (
                    f"{', '.join(governed)} waits for the thread owner's answer: answer "
                    "it on the thread page (or POST /api/reviews/<thread_id>/decision), "
                    "not with a resume command."
                )
            if governed:
                return (
                    f"{', '.join(governed)} waits for a reviewer: answer it through the "
                    "reviewer console (/reviews/<thread_id>/ or "
                    "POST /api/reviews/<thread_id>/decision), not with a resume command."
                )
        update = command.get("update")
        keys: list[str] = []
        if isinstance(update, Mapping):
            keys = [str(k) for k in update]
        elif isinstance(update, list | tuple):
            keys = [
                str(pair[0])
                for pair in update
                if isinstance(pair, list | tuple) and pair
            ]
        goto = command.get("goto")
        targets = [goto] if isinstance(goto, str) else list(goto or [])
        names = [
            t if isinstance(t, str) else str(getattr(t, "node", "")) for t in targets
        ]
        as_node = next((n for n in names if n in self.console_nodes), None)
        return self.write_refusal(as_node, keys)


def governance_for(graph: str) -> Governance | None:
    """The graph's declaration, or None for an ungoverned graph (or an unknown name)."""
    found = registry.declared(graph, GOVERNANCE_ATTR)
    return found if isinstance(found, Governance) else None

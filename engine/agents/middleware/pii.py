"""Find personal data (emails, card numbers, IPs...) in messages and redact, mask,
hash or refuse it.

Which messages: the latest user message (``apply_to_input``, default), the
latest AI message (``apply_to_output``), and the tool messages since the latest
AI message (``apply_to_tool_results``); input and tool results are checked
before each model call, output after it. A changed message replaces the
original (same id), so what is stored is the redacted text.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from engine.agents.middleware.types import AgentMiddleware
from engine.graph.message import message_content, message_role
from engine.prebuilt._chat import is_ai

__all__ = ("PIIDetectionError", "PIIMatch", "PIIMiddleware", "detect")

Strategy = Literal["block", "redact", "mask", "hash"]


class PIIMatch(TypedDict):
    """One piece of personal data found in a text."""

    type: str
    value: str
    start: int
    end: int


class PIIDetectionError(Exception):
    """Raised by the ``"block"`` strategy when personal data is found."""

    def __init__(self, pii_type: str, matches: list[PIIMatch]) -> None:
        self.pii_type = pii_type
        self.matches = matches
        super().__init__(f"Detected {len(matches)} {pii_type} value(s) in the message.")


def _luhn(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for index, char in enumerate(digits):
        n = int(char)
        if index % 2 == parity:
            n *= 2
            if n > 9:
                n -= 9
        total += n
    return total % 10 == 0


def _valid_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


_PATTERNS: dict[str, tuple[re.Pattern[str], Callable[[str], bool] | None]] = {
    "email": (re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"), None),
    "credit_card": (
        re.compile(r"\b(?:\d[ -]?){12,18}\d\b"),
        lambda text: _luhn(re.sub(r"\D", "", text)),
    ),
    "ip": (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), _valid_ip),
    "mac_address": (re.compile(r"\b(?:[0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}\b"), None),
    "url": (re.compile(r"\bhttps?://[^\s<>\"']+|\bwww\.[^\s<>\"']+"), None),
}


def detect(pii_type: str, text: str, detector: Any = None) -> list[PIIMatch]:
    """The matches of ``pii_type`` in ``text`` (a built-in type, or ``detector``: a
    regular expression or a function ``text -> [PIIMatch...]``)."""
    if callable(detector):
        return list(detector(text))
    if detector is not None:
        pattern, check = re.compile(detector), None
    elif pii_type in _PATTERNS:
        pattern, check = _PATTERNS[pii_type]
    else:
        raise ValueError(
            f"Unknown PII type {pii_type!r}: use one of {sorted(_PATTERNS)} or give a "
            "detector (a regular expression or a function)."
        )
    return [
        {"type": pii_type, "value": m.group(0), "start": m.start(), "end": m.end()}
        for m in pattern.finditer(text)
        if check is None or check(m.group(0))
    ]


def _mask(pii_type: str, value: str) -> str:
    if pii_type == "email" and "@" in value:
        local, domain = value.split("@", 1)
        return f"{local[:1]}***@{domain}"
    if pii_type == "credit_card":
        digits = re.sub(r"\D", "", value)
        return f"****-****-****-{digits[-4:]}"
    return "*" * max(0, len(value) - 4) + value[-4:]


def _replacement(strategy: Strategy, pii_type: str, value: str) -> str:
    if strategy == "redact":
        return f"[REDACTED_{pii_type.upper()}]"
    if strategy == "mask":
        return _mask(pii_type, value)
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"<{pii_type}_hash:{digest}>"


class PIIMiddleware(AgentMiddleware[Any, Any]):
    """Deal with one kind of personal data in the conversation.

    Args:
        pii_type: ``"email"``, ``"credit_card"`` (Luhn-checked), ``"ip"``,
            ``"mac_address"``, ``"url"``, or any name with a ``detector``.
        strategy: ``"redact"`` (``[REDACTED_EMAIL]``), ``"mask"`` (partly
            hidden), ``"hash"`` (``<email_hash:1a2b3c4d>``), or ``"block"``
            (raise :class:`PIIDetectionError`).
        detector: a regular expression or a function ``text -> [PIIMatch]``.
        apply_to_input, apply_to_output, apply_to_tool_results: which messages.

    Several instances (one per type) may be used: the name includes the type.
    """

    def __init__(
        self,
        pii_type: str,
        *,
        strategy: Strategy = "redact",
        detector: str | Callable[[str], list[PIIMatch]] | None = None,
        apply_to_input: bool = True,
        apply_to_output: bool = False,
        apply_to_tool_results: bool = False,
    ) -> None:
        if strategy not in ("block", "redact", "mask", "hash"):
            raise ValueError(
                f"Unknown strategy {strategy!r}: use block, redact, mask or hash."
            )
        if detector is None and pii_type not in _PATTERNS:
            raise ValueError(
                f"Unknown PII type {pii_type!r}: use one of {sorted(_PATTERNS)} or give "
                "a detector."
            )
        self.pii_type = pii_type
        self.strategy: Strategy = strategy
        self.detector = detector
        self.apply_to_input = apply_to_input
        self.apply_to_output = apply_to_output
        self.apply_to_tool_results = apply_to_tool_results

    @property
    def name(self) -> str:
        return f"{type(self).__name__}[{self.pii_type}]"

    def _clean(self, message: Any) -> Any | None:
        """The message with its personal data dealt with, or None if it has none."""
        content = message_content(message)
        if not isinstance(content, str):
            return None
        matches = detect(self.pii_type, content, self.detector)
        if not matches:
            return None
        if self.strategy == "block":
            raise PIIDetectionError(self.pii_type, matches)
        cleaned = content
        for match in sorted(matches, key=lambda m: m["start"], reverse=True):
            cleaned = (
                cleaned[: match["start"]]
                + _replacement(self.strategy, self.pii_type, match["value"])
                + cleaned[match["end"] :]
            )
        if isinstance(message, dict):
            return {**message, "content": cleaned}
        return message.model_copy(update={"content": cleaned})

    def _cleaned(self, messages: list[Any]) -> dict[str, Any] | None:
        changed = [c for c in map(self._clean, messages) if c is not None]
        return {"messages": changed} if changed else None

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = list(state["messages"])
        chosen: list[Any] = []
        if self.apply_to_input:
            last_user = next(
                (m for m in reversed(messages) if message_role(m) == "user"), None
            )
            if last_user is not None:
                chosen.append(last_user)
        if self.apply_to_tool_results:
            last_ai = max((i for i, m in enumerate(messages) if is_ai(m)), default=-1)
            chosen.extend(
                m for m in messages[last_ai + 1 :] if message_role(m) == "tool"
            )
        return self._cleaned(chosen)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not self.apply_to_output:
            return None
        last_ai = next((m for m in reversed(state["messages"]) if is_ai(m)), None)
        return None if last_ai is None else self._cleaned([last_ai])

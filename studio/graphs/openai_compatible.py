"""A chat model for any OpenAI-compatible ``/chat/completions`` endpoint (stdlib HTTP only)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Sequence
from typing import Any

from engine.graph.message import message_as_dict
from engine.prebuilt import Tool

__all__ = ("OpenAICompatibleChatModel",)


class OpenAICompatibleChatModel:
    """Calls ``POST {base_url}/chat/completions`` with tools; returns an assistant message dict."""

    def __init__(
        self, *, base_url: str, api_key: str = "", model: str, timeout: float = 60.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = timeout

    def _payload(
        self, messages: Sequence[Any], tools: Sequence[Tool] | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": []}
        for message in map(message_as_dict, messages):
            item: dict[str, Any] = {
                "role": message["role"],
                "content": message.get("content") or "",
            }
            if message.get("tool_calls"):
                item["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": call["name"],
                            "arguments": json.dumps(call.get("args", {})),
                        },
                    }
                    for call in message["tool_calls"]
                ]
            if message["role"] == "tool":
                item["tool_call_id"] = message.get("tool_call_id")
            body["messages"].append(item)
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        return body

    def invoke(
        self, messages: Sequence[Any], tools: Sequence[Tool] | None = None
    ) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(self._payload(messages, tools)).encode(),
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
            },
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            data = json.loads(response.read())
        choice = data["choices"][0]["message"]
        calls = [
            {
                "id": c["id"],
                "name": c["function"]["name"],
                "args": json.loads(c["function"].get("arguments") or "{}"),
            }
            for c in choice.get("tool_calls") or []
        ]
        return {
            "role": "assistant",
            "content": choice.get("content") or "",
            "tool_calls": calls,
            "id": data.get("id"),
        }

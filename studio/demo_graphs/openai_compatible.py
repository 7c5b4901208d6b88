"""A chat model for any OpenAI-compatible ``/chat/completions`` endpoint, on httpx.

It speaks the engine's chat model protocol (``engine.prebuilt.chat_model``):
``invoke``/``ainvoke`` return one assistant message dict, ``stream``/``astream``
yield its text as it arrives and then one chunk with the complete tool calls
(so ``stream_mode="messages"`` and the studio's thread page show tokens live).
All four take the tools offered and the options ``create_agent`` passes:
``tool_choice`` (``"auto"``, ``"none"``, ``"any"`` -> ``"required"``, or a tool
name), ``response_format`` (sent as is: the provider strategy's JSON schema),
and any model setting (``temperature``, ``max_tokens``...), sent as body keys.

Reliability, decided here:

- timeouts: ``timeout`` seconds for each read (default 60), ``connect_timeout``
  to connect (default 5);
- retries: a 429, 500, 502, 503 or 504 answer, or a connection failure or
  timeout, is tried again up to ``max_retries`` times (default 2, as OpenAI's
  SDK), after ``Retry-After`` when the server sends one (at most
  ``max_backoff``), else after an exponential backoff with jitter
  (``backoff`` * 2^n, at most ``max_backoff``). A stream is retried only before
  its first token: after that a failure is raised, never a repeated answer (a
  server that answers a stream request with plain JSON is read as one chunk);
- any other answer raises :class:`ChatCompletionError` with the status and the
  server's message.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from engine.graph.message import message_as_dict

__all__ = ("RETRY_STATUSES", "ChatCompletionError", "OpenAICompatibleChatModel")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Answers worth trying again: rate limited, or the server failed for now."""
_KNOWN_OPTIONS = frozenset({"tool_choice", "response_format"})


class ChatCompletionError(Exception):
    """The endpoint refused the request (or kept failing after the retries)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"chat completions answered {status_code}: {message}")
        self.status_code = status_code
        self.message = message


class OpenAICompatibleChatModel:
    """``POST {base_url}/chat/completions`` with tools, streamed or not.

    Args:
        base_url: e.g. ``https://api.openai.com/v1`` or a local server's ``/v1``.
        api_key: sent as ``Authorization: Bearer``; empty sends none.
        model: the model name the endpoint knows.
        timeout / connect_timeout: seconds (see the module doc).
        max_retries / backoff / max_backoff: the retry policy (module doc).
        supports_structured_output: whether ``create_agent`` may ask for JSON
            output with ``response_format`` (most compatible servers can).
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str = "",
        model: str,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        supports_structured_output: bool = True,
        name: str = "openai-compatible",
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.supports_structured_output = supports_structured_output
        self.name = name
        self._client: httpx.Client | None = None

    # -- the request -----------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def payload(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        *,
        stream: bool = False,
        **options: Any,
    ) -> dict[str, Any]:
        """The JSON body for ``messages``, ``tools`` and ``options``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire_message(message_as_dict(m)) for m in messages],
        }
        if tools:
            body["tools"] = [_wire_tool(t) for t in tools]
        choice = options.get("tool_choice")
        if choice is not None:
            body["tool_choice"] = _wire_tool_choice(choice)
        if options.get("response_format") is not None:
            body["response_format"] = options["response_format"]
        for key, value in options.items():
            if key not in _KNOWN_OPTIONS and value is not None:
                body[key] = value
        if stream:
            body["stream"] = True
        return body

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        after = _retry_after(response) if response is not None else None
        if after is not None:
            return min(after, self.max_backoff)
        ceiling: float = min(self.max_backoff, self.backoff * (2**attempt))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    # -- sync ------------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        return self._client

    def close(self) -> None:
        """Close the pooled connections (a new call opens them again)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def invoke(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        body = self.payload(messages, tools, **options)
        client = self._sync_client()
        attempt = 0
        while True:
            try:
                response = client.post(self.url, json=body, headers=self._headers())
            except httpx.TransportError:
                if attempt >= self.max_retries:
                    raise
                time.sleep(self._delay(attempt, None))
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.max_retries:
                time.sleep(self._delay(attempt, response))
                attempt += 1
                continue
            _raise_for(response)
            return _answer(response.json())

    def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> Iterator[dict[str, Any]]:
        body = self.payload(messages, tools, stream=True, **options)
        client = self._sync_client()
        attempt = 0
        while True:
            started = False
            try:
                with client.stream(
                    "POST", self.url, json=body, headers=self._headers()
                ) as response:
                    if (
                        response.status_code in RETRY_STATUSES
                        and attempt < self.max_retries
                    ):
                        response.read()
                        delay = self._delay(attempt, response)
                    else:
                        if response.status_code >= 400:
                            response.read()
                            _raise_for(response)
                        if _is_json(response):  # a server that does not stream
                            response.read()
                            yield from _as_chunks(_answer(response.json()))
                            return
                        assembler = _Assembler()
                        for line in response.iter_lines():
                            for chunk in assembler.feed(line):
                                started = True
                                yield chunk
                        started = True
                        yield from assembler.finish()
                        return
            except httpx.TransportError:
                if started or attempt >= self.max_retries:
                    raise
                delay = self._delay(attempt, None)
            time.sleep(delay)
            attempt += 1

    # -- async -----------------------------------------------------------------------

    async def ainvoke(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        body = self.payload(messages, tools, **options)
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            attempt = 0
            while True:
                try:
                    response = await client.post(
                        self.url, json=body, headers=self._headers()
                    )
                except httpx.TransportError:
                    if attempt >= self.max_retries:
                        raise
                    await asyncio.sleep(self._delay(attempt, None))
                    attempt += 1
                    continue
                if (
                    response.status_code in RETRY_STATUSES
                    and attempt < self.max_retries
                ):
                    await asyncio.sleep(self._delay(attempt, response))
                    attempt += 1
                    continue
                _raise_for(response)
                return _answer(response.json())

    async def astream(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        body = self.payload(messages, tools, stream=True, **options)
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            attempt = 0
            while True:
                started = False
                try:
                    async with client.stream(
                        "POST", self.url, json=body, headers=self._headers()
                    ) as response:
                        if (
                            response.status_code in RETRY_STATUSES
                            and attempt < self.max_retries
                        ):
                            await response.aread()
                            delay = self._delay(attempt, response)
                        else:
                            if response.status_code >= 400:
                                await response.aread()
                                _raise_for(response)
                            if _is_json(response):  # a server that does not stream
                                await response.aread()
                                for chunk in _as_chunks(_answer(response.json())):
                                    yield chunk
                                return
                            assembler = _Assembler()
                            async for line in response.aiter_lines():
                                for chunk in assembler.feed(line):
                                    started = True
                                    yield chunk
                            started = True
                            for chunk in assembler.finish():
                                yield chunk
                            return
                except httpx.TransportError:
                    if started or attempt >= self.max_retries:
                        raise
                    delay = self._delay(attempt, None)
                await asyncio.sleep(delay)
                attempt += 1


# -- wire format --------------------------------------------------------------------------


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    role = message["role"]
    item: dict[str, Any] = {"role": role, "content": message.get("content") or ""}
    if message.get("tool_calls"):
        item["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call.get("args") or {}),
                },
            }
            for call in message["tool_calls"]
        ]
        if not item["content"]:
            item["content"] = None
    if role == "tool":
        item["tool_call_id"] = message.get("tool_call_id")
    return item


def _wire_tool(tool: Any) -> dict[str, Any]:
    if isinstance(tool, dict):  # a provider's own tool, or one already in wire form
        return tool
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _wire_tool_choice(choice: Any) -> Any:
    if choice == "any":
        return "required"
    if isinstance(choice, str) and choice not in ("auto", "none", "required"):
        return {"type": "function", "function": {"name": choice}}
    return choice


def _args(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}  # the tool's argument check answers the model
    return value if isinstance(value, dict) else {}


def _answer(data: Mapping[str, Any]) -> dict[str, Any]:
    choice = (data.get("choices") or [{}])[0].get("message") or {}
    return {
        "role": "assistant",
        "content": choice.get("content") or "",
        "tool_calls": [
            {
                "id": call.get("id"),
                "name": call["function"]["name"],
                "args": _args(call["function"].get("arguments")),
            }
            for call in choice.get("tool_calls") or []
        ],
        "id": data.get("id"),
    }


def _is_json(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("application/json")


def _as_chunks(answer: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A whole answer as a stream: its text, then its tool calls."""
    if answer["content"]:
        yield {"role": "assistant", "id": answer["id"], "content": answer["content"]}
    if answer["tool_calls"] or not answer["content"]:
        yield {
            "role": "assistant",
            "id": answer["id"],
            "content": "",
            "tool_calls": answer["tool_calls"],
        }


class _Assembler:
    """Server-sent ``data:`` lines -> text chunks, then one chunk of whole tool calls."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.calls: dict[int, dict[str, Any]] = {}
        self.sent_text = False

    def feed(self, line: str) -> Iterator[dict[str, Any]]:
        if not line.startswith("data:"):
            return
        data = line[len("data:") :].strip()
        if not data or data == "[DONE]":
            return
        chunk = json.loads(data)
        self.id = self.id or chunk.get("id")
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            for part in delta.get("tool_calls") or []:
                call = self.calls.setdefault(
                    int(part.get("index", len(self.calls))),
                    {"id": None, "name": "", "arguments": ""},
                )
                call["id"] = part.get("id") or call["id"]
                function = part.get("function") or {}
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            text = delta.get("content")
            if text:
                self.sent_text = True
                yield {"role": "assistant", "id": self.id, "content": text}

    def finish(self) -> Iterator[dict[str, Any]]:
        calls = [
            {"id": c["id"], "name": c["name"], "args": _args(c["arguments"])}
            for _, c in sorted(self.calls.items())
        ]
        if calls or not self.sent_text:
            yield {
                "role": "assistant",
                "id": self.id,
                "content": "",
                "tool_calls": calls,
            }


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else str(error)
    except (ValueError, AttributeError):
        message = response.text[:500]
    raise ChatCompletionError(response.status_code, message or response.reason_phrase)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None

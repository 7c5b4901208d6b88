"""The OpenAI-compatible chat model against a chat completions server on a real socket.

The server is started by each test on 127.0.0.1 (``http.server`` in a thread) and
answers from a script: status, headers, a JSON body or server-sent events, and an
optional delay. It records every request it got.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from engine.agents import create_agent
from engine.checkpoint.memory import InMemorySaver
from engine.prebuilt import call_model
from studio.demo_graphs.openai_compatible import (
    ChatCompletionError,
    OpenAICompatibleChatModel,
)


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    events: list[Any] | None = None
    """Server-sent events: each a JSON value (or the text ``[DONE]``)."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class FakeServer:
    url: str
    replies: list[Reply]
    requests: list[dict[str, Any]]


def completion(
    content: str = "", tool_calls: list[dict[str, Any]] | None = None
) -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "message": message}]}


def delta(**fields: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-9", "choices": [{"index": 0, "delta": fields}]}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    replies: list[Reply] = []
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            requests.append(
                {
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": json.loads(self.rfile.read(length)),
                }
            )
            reply = replies.pop(0) if replies else Reply(500, {"error": "no reply"})
            if reply.delay:
                time.sleep(reply.delay)
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.events is not None:
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for event in reply.events:
                    data = event if isinstance(event, str) else json.dumps(event)
                    self.wfile.write(f"data: {data}\n\n".encode())
                    self.wfile.flush()
                return
            payload = json.dumps(reply.body).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield FakeServer(
            f"http://127.0.0.1:{httpd.server_address[1]}/v1", replies, requests
        )
    finally:
        httpd.shutdown()
        httpd.server_close()


def model_for(server: FakeServer, **options: Any) -> OpenAICompatibleChatModel:
    options.setdefault("backoff", 0.01)
    return OpenAICompatibleChatModel(
        base_url=server.url, api_key="sk-test", model="demo-model", **options
    )


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}"


# -- requests ------------------------------------------------------------------------


def test_invoke_sends_messages_tools_and_options_and_reads_tool_calls(
    server: FakeServer,
) -> None:
    server.replies.append(
        Reply(
            body=completion(
                "",
                [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "lookup_order",
                            "arguments": '{"order_id": "A-1"}',
                        },
                    }
                ],
            )
        )
    )
    model = model_for(server)

    answer = call_model(
        model,
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c0", "name": "lookup_order", "args": {"order_id": "A-0"}}
                ],
            },
            {"role": "tool", "content": "order A-0", "tool_call_id": "c0"},
        ],
        [lookup_order],
        tool_choice="any",
        temperature=0,
    )

    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == "Bearer sk-test"
    body = sent["body"]
    assert body["model"] == "demo-model"
    assert body["tool_choice"] == "required"
    assert body["temperature"] == 0
    assert body["stream"] is True  # call_model streams when the model can
    assert body["messages"][1]["tool_calls"][0]["function"] == {
        "name": "lookup_order",
        "arguments": '{"order_id": "A-0"}',
    }
    assert body["messages"][2] == {
        "role": "tool",
        "content": "order A-0",
        "tool_call_id": "c0",
    }
    assert body["tools"][0]["function"]["name"] == "lookup_order"
    # the server answered with JSON, not a stream: read as one answer
    assert answer["tool_calls"] == [
        {"id": "call_1", "name": "lookup_order", "args": {"order_id": "A-1"}}
    ]


def test_named_tool_choice_and_response_format_are_sent_as_openai_expects(
    server: FakeServer,
) -> None:
    server.replies.append(Reply(body=completion('{"total": 3}')))
    schema = {"type": "json_schema", "json_schema": {"name": "T", "schema": {}}}

    answer = model_for(server).invoke(
        [{"role": "user", "content": "x"}],
        tool_choice="lookup_order",
        response_format=schema,
    )

    body = server.requests[0]["body"]
    assert body["tool_choice"] == {
        "type": "function",
        "function": {"name": "lookup_order"},
    }
    assert body["response_format"] == schema
    assert "stream" not in body
    assert answer["content"] == '{"total": 3}'


# -- streaming -----------------------------------------------------------------------


def test_stream_yields_text_as_it_arrives_then_whole_tool_calls(
    server: FakeServer,
) -> None:
    server.replies.append(
        Reply(
            events=[
                delta(role="assistant", content="Let"),
                delta(content=" me look."),
                delta(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_7",
                            "function": {
                                "name": "lookup_order",
                                "arguments": '{"order',
                            },
                        }
                    ]
                ),
                delta(
                    tool_calls=[{"index": 0, "function": {"arguments": '_id": "A-7"}'}}]
                ),
                "[DONE]",
            ]
        )
    )

    chunks = list(model_for(server).stream([{"role": "user", "content": "A-7?"}]))

    assert [c["content"] for c in chunks] == ["Let", " me look.", ""]
    assert chunks[-1]["tool_calls"] == [
        {"id": "call_7", "name": "lookup_order", "args": {"order_id": "A-7"}}
    ]
    assert {c["id"] for c in chunks} == {"chatcmpl-9"}


def test_astream_is_the_async_twin(server: FakeServer) -> None:
    server.replies.append(
        Reply(events=[delta(content="Hello"), delta(content=" there"), "[DONE]"])
    )

    async def read() -> list[dict[str, Any]]:
        return [
            c
            async for c in model_for(server).astream(
                [{"role": "user", "content": "hi"}]
            )
        ]

    chunks = asyncio.run(read())

    assert "".join(c["content"] for c in chunks) == "Hello there"


def test_an_agent_streams_the_endpoints_tokens_and_runs_its_tool_calls(
    server: FakeServer,
) -> None:
    server.replies.extend(
        [
            Reply(
                events=[
                    delta(content="Looking"),
                    delta(
                        tool_calls=[
                            {
                                "index": 0,
                                "id": "call_1",
                                "function": {
                                    "name": "lookup_order",
                                    "arguments": '{"order_id": "A-1"}',
                                },
                            }
                        ]
                    ),
                    "[DONE]",
                ]
            ),
            Reply(
                events=[delta(content="It is"), delta(content=" order A-1."), "[DONE]"]
            ),
        ]
    )
    agent = create_agent(
        model_for(server), [lookup_order], checkpointer=InMemorySaver()
    )

    tokens = [
        chunk.get("content") if isinstance(chunk, dict) else chunk.content
        for chunk, meta in agent.stream(
            {"messages": [{"role": "user", "content": "A-1?"}]},
            {"configurable": {"thread_id": "t"}},
            stream_mode="messages",
        )
        if meta["langgraph_node"] == "model"
    ]

    assert [t for t in tokens if t] == ["Looking", "It is", " order A-1."]
    second = server.requests[1]["body"]["messages"]
    assert second[-1] == {
        "role": "tool",
        "content": "order A-1",
        "tool_call_id": "call_1",
    }


# -- retries and errors --------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_retryable_answers_are_tried_again(server: FakeServer, status: int) -> None:
    server.replies.extend(
        [Reply(status, {"error": {"message": "busy"}}), Reply(body=completion("ok"))]
    )

    answer = model_for(server).invoke([{"role": "user", "content": "hi"}])

    assert answer["content"] == "ok"
    assert len(server.requests) == 2


def test_retry_after_is_honoured(server: FakeServer) -> None:
    server.replies.extend(
        [
            Reply(
                429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0.3"}
            ),
            Reply(body=completion("ok")),
        ]
    )
    started = time.monotonic()

    model_for(server, backoff=0.0).invoke([{"role": "user", "content": "hi"}])

    assert time.monotonic() - started >= 0.3


def test_it_gives_up_after_max_retries_with_the_servers_message(
    server: FakeServer,
) -> None:
    server.replies.extend([Reply(503, {"error": {"message": "overloaded"}})] * 3)

    with pytest.raises(ChatCompletionError, match="503: overloaded"):
        model_for(server, max_retries=2).invoke([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 3


def test_a_client_error_is_raised_at_once(server: FakeServer) -> None:
    server.replies.append(Reply(400, {"error": {"message": "bad model"}}))

    with pytest.raises(ChatCompletionError) as raised:
        model_for(server).invoke([{"role": "user", "content": "hi"}])

    assert raised.value.status_code == 400
    assert raised.value.message == "bad model"
    assert len(server.requests) == 1


def test_a_stream_refused_before_its_first_token_is_retried(server: FakeServer) -> None:
    server.replies.extend(
        [
            Reply(502, {"error": "bad gateway"}),
            Reply(events=[delta(content="ok"), "[DONE]"]),
        ]
    )

    chunks = list(model_for(server).stream([{"role": "user", "content": "hi"}]))

    assert [c["content"] for c in chunks] == ["ok"]
    assert len(server.requests) == 2


def test_a_read_timeout_is_retried_then_raised(server: FakeServer) -> None:
    server.replies.extend([Reply(body=completion("late"), delay=0.5)] * 2)

    with pytest.raises(httpx.ReadTimeout):
        model_for(server, timeout=0.1, max_retries=1).invoke(
            [{"role": "user", "content": "hi"}]
        )
    assert len(server.requests) == 2


def test_a_timeout_then_an_answer_succeeds(server: FakeServer) -> None:
    server.replies.extend(
        [Reply(body=completion("late"), delay=0.5), Reply(body=completion("ok"))]
    )

    answer = model_for(server, timeout=0.1).invoke([{"role": "user", "content": "hi"}])

    assert answer["content"] == "ok"

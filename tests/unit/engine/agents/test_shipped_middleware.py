"""The middleware shipped with engine.agents, driven by scripted models."""

from __future__ import annotations

from typing import Any

import pytest

from engine.agents import create_agent
from engine.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    PIIDetectionError,
    PIIMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from engine.agents.middleware.model_call_limit import ModelCallLimitExceededError
from engine.agents.middleware.tool_call_limit import ToolCallLimitExceededError
from engine.checkpoint.memory import InMemorySaver
from engine.prebuilt import ScriptedChatModel
from engine.types import Command

QUESTION = {"messages": [{"role": "user", "content": "hi"}]}
sent: list[str] = []


def send_email(to: str, body: str) -> str:
    """Send an email."""
    sent.append(f"{to}:{body}")
    return f"sent to {to}"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def calls(*items: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [
            {"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(items)
        ],
    }


# -- human in the loop ---------------------------------------------------------


def hitl_agent(model: ScriptedChatModel) -> Any:
    return create_agent(
        model,
        [send_email, add],
        middleware=[
            HumanInTheLoopMiddleware(
                {
                    "send_email": {"allowed_decisions": ["approve", "edit", "reject"]},
                    "add": False,
                }
            )
        ],
        checkpointer=InMemorySaver(),
    )


def email_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            calls(
                ("send_email", {"to": "bo@x.org", "body": "hi"}),
                ("add", {"a": 1, "b": 2}),
            ),
            {"content": "done"},
        ]
    )


@pytest.fixture(autouse=True)
def _clear_outbox() -> None:
    sent.clear()


def test_hitl_pauses_with_a_typed_request_and_approve_runs_the_tool() -> None:
    agent, config = hitl_agent(email_model()), {"configurable": {"thread_id": "a"}}

    paused = agent.invoke(QUESTION, config)
    (pending,) = paused["__interrupt__"]
    assert pending.value["action_requests"] == [
        {
            "name": "send_email",
            "args": {"to": "bo@x.org", "body": "hi"},
            "description": "Tool execution requires approval\n\nTool: send_email\nArgs: {'to': 'bo@x.org', 'body': 'hi'}",
        }
    ]
    assert pending.value["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
    ]
    assert sent == []

    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert sent == ["bo@x.org:hi"]
    assert out["messages"][-1].content == "done"


def test_hitl_edit_runs_the_edited_call() -> None:
    agent, config = hitl_agent(email_model()), {"configurable": {"thread_id": "e"}}
    agent.invoke(QUESTION, config)
    edited = {"name": "send_email", "args": {"to": "al@x.org", "body": "hello"}}

    out = agent.invoke(
        Command(resume={"decisions": [{"type": "edit", "edited_action": edited}]}),
        config,
    )

    assert sent == ["al@x.org:hello"]
    ai = out["messages"][1]
    assert ai.tool_calls[0]["args"] == {"to": "al@x.org", "body": "hello"}
    assert (
        len([m for m in out["messages"] if m.type == "ai"]) == 2
    )  # the edit replaced it


def test_hitl_reject_answers_the_call_and_asks_the_model_again() -> None:
    agent, config = hitl_agent(email_model()), {"configurable": {"thread_id": "r"}}
    agent.invoke(QUESTION, config)

    out = agent.invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}),
        config,
    )

    assert sent == []
    rejected = next(
        m for m in out["messages"] if m.type == "tool" and m.name == "send_email"
    )
    assert rejected.content == "not now" and rejected.status == "error"
    assert out["messages"][-1].content == "done"


def test_hitl_refuses_a_malformed_or_disallowed_resume() -> None:
    model = ScriptedChatModel(
        [calls(("send_email", {"to": "a", "body": "b"})), {"content": "done"}]
    )
    agent = create_agent(
        model,
        [send_email],
        middleware=[
            HumanInTheLoopMiddleware({"send_email": {"allowed_decisions": ["approve"]}})
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "bad"}}
    agent.invoke(QUESTION, config)

    def asked_again(resume: Any) -> str:
        (pending,) = agent.invoke(Command(resume=resume), config)["__interrupt__"]
        assert pending.value["action_requests"][0]["name"] == "send_email"
        return str(pending.value["error"])

    assert "must be" in asked_again({"decision": "yes"})
    assert "not allowed" in asked_again({"decisions": [{"type": "reject"}]})
    assert "does not match" in asked_again({"decisions": []})
    assert sent == []
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert sent == ["a:b"] and out["messages"][-1].content == "done"


# -- limits ----------------------------------------------------------------------


def looping_model() -> ScriptedChatModel:
    return ScriptedChatModel([calls(("add", {"a": 1, "b": 1}))], advance="call")


def test_model_call_limit_ends_the_run_per_run_and_per_thread() -> None:
    model = looping_model()
    out = create_agent(
        model, [add], middleware=[ModelCallLimitMiddleware(run_limit=2)]
    ).invoke(QUESTION)
    assert model.calls == 2
    assert out["messages"][-1].content.startswith(
        "Model call limits exceeded: run limit (2/2)"
    )
    assert "run_model_call_count" not in out

    agent = create_agent(
        ScriptedChatModel([{"content": "ok"}]),
        middleware=[ModelCallLimitMiddleware(thread_limit=1)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke(QUESTION, config)
    second = agent.invoke(QUESTION, config)
    assert second["messages"][-1].content.startswith(
        "Model call limits exceeded: thread limit (1/1)"
    )

    with pytest.raises(ModelCallLimitExceededError):
        create_agent(
            looping_model(),
            [add],
            middleware=[ModelCallLimitMiddleware(run_limit=1, exit_behavior="error")],
        ).invoke(QUESTION)


def test_tool_call_limit_refuses_calls_past_the_limit() -> None:
    model = ScriptedChatModel(
        [calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})), {"content": "ok"}]
    )
    out = create_agent(
        model, [add], middleware=[ToolCallLimitMiddleware(tool_name="add", run_limit=1)]
    ).invoke(QUESTION)

    answers = [m for m in out["messages"] if m.type == "tool"]
    assert sorted(m.content for m in answers) == [
        "2",
        "Tool call limit exceeded. Do not call 'add' again.",
    ]
    assert out["messages"][-1].content == "ok"

    ended = create_agent(
        looping_model(),
        [add],
        middleware=[ToolCallLimitMiddleware(run_limit=2, exit_behavior="end")],
    ).invoke(QUESTION)
    assert ended["messages"][-1].content.startswith("Tool call limit reached")
    with pytest.raises(ToolCallLimitExceededError):
        create_agent(
            looping_model(),
            [add],
            middleware=[ToolCallLimitMiddleware(run_limit=1, exit_behavior="error")],
        ).invoke(QUESTION)


# -- fallback and retries ----------------------------------------------------------


def test_model_fallback_tries_the_next_model() -> None:
    broken = ScriptedChatModel([ConnectionError("down")])
    backup = ScriptedChatModel([{"content": "from backup"}])
    out = create_agent(broken, middleware=[ModelFallbackMiddleware(backup)]).invoke(
        QUESTION
    )

    assert out["messages"][-1].content == "from backup"
    with pytest.raises(ConnectionError):
        create_agent(broken, middleware=[ModelFallbackMiddleware(broken)]).invoke(
            QUESTION
        )


def test_model_retry_retries_then_answers_or_raises() -> None:
    flaky = ScriptedChatModel(
        [TimeoutError("slow"), {"content": "made it"}], advance="call"
    )
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    assert (
        create_agent(flaky, middleware=[retry]).invoke(QUESTION)["messages"][-1].content
        == "made it"
    )

    dead = ScriptedChatModel([TimeoutError("slow")])
    out = create_agent(
        dead, middleware=[ModelRetryMiddleware(max_retries=1, initial_delay=0)]
    ).invoke(QUESTION)
    assert (
        out["messages"][-1].content
        == "Model call failed after 2 attempt(s) with TimeoutError: slow"
    )
    assert dead.calls == 2
    with pytest.raises(TimeoutError):
        create_agent(
            dead, middleware=[ModelRetryMiddleware(initial_delay=0, on_failure="error")]
        ).invoke(QUESTION)


def test_tool_retry_retries_and_answers_a_final_failure() -> None:
    attempts: list[int] = []

    def flaky(x: int) -> str:
        """Fails twice."""
        attempts.append(x)
        if len(attempts) < 3:
            raise OSError("try again")
        return "ok"

    model = ScriptedChatModel([calls(("flaky", {"x": 1})), {"content": "done"}])
    out = create_agent(
        model, [flaky], middleware=[ToolRetryMiddleware(max_retries=2, initial_delay=0)]
    ).invoke(QUESTION)
    assert attempts == [1, 1, 1] and out["messages"][2].content == "ok"

    attempts.clear()
    model = ScriptedChatModel([calls(("flaky", {"x": 1})), {"content": "done"}])
    out = create_agent(
        model, [flaky], middleware=[ToolRetryMiddleware(max_retries=0, initial_delay=0)]
    ).invoke(QUESTION)
    assert (
        out["messages"][2].status == "error"
        and "OSError: try again" in out["messages"][2].content
    )


# -- summarization and PII ---------------------------------------------------------


def test_summarization_replaces_old_messages_with_a_summary() -> None:
    summarizer = ScriptedChatModel([{"content": "They said hello a lot."}])
    model = ScriptedChatModel([{"content": "answer"}])
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
        for i in range(7)
    ]
    agent = create_agent(
        model,
        middleware=[
            SummarizationMiddleware(
                summarizer, trigger=("messages", 6), keep=("messages", 2)
            )
        ],
    )

    out = agent.invoke({"messages": history})

    assert [m.content for m in out["messages"]] == [
        "Here is a summary of the conversation to date:\n\nThey said hello a lot.",
        "m5",
        "m6",
        "answer",
    ]
    assert "m0" in summarizer.requests[0]["messages"][0]["content"]
    assert [m["content"] for m in model.requests[0]["messages"]][1:] == ["m5", "m6"]


def test_summarization_keeps_tool_answers_with_their_call() -> None:
    summarizer = ScriptedChatModel([{"content": "S"}])
    middleware = SummarizationMiddleware(
        summarizer, trigger=("messages", 1), keep=("messages", 1)
    )
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "1", "name": "add", "args": {}}],
        },
        {"role": "tool", "content": "2", "tool_call_id": "1"},
    ]
    assert middleware._cutoff(messages) == 1


def test_pii_redacts_masks_hashes_or_blocks() -> None:
    model = ScriptedChatModel([{"content": "Mail me at me@corp.com"}])
    agent = create_agent(
        model,
        middleware=[
            PIIMiddleware("email", strategy="redact", apply_to_output=True),
            PIIMiddleware("credit_card", strategy="mask"),
        ],
    )
    out = agent.invoke(
        {
            "messages": [
                {"role": "user", "content": "I am bo@x.org, card 4111 1111 1111 1111"}
            ]
        }
    )

    assert (
        out["messages"][0].content == "I am [REDACTED_EMAIL], card ****-****-****-1111"
    )
    assert model.requests[0]["messages"][0]["content"] == out["messages"][0].content
    assert out["messages"][-1].content == "Mail me at [REDACTED_EMAIL]"

    hashed = create_agent(
        ScriptedChatModel([{"content": "x"}]),
        middleware=[PIIMiddleware("ip", strategy="hash")],
    )
    assert hashed.invoke({"messages": [{"role": "user", "content": "from 10.0.0.1"}]})[
        "messages"
    ][0].content.startswith("from <ip_hash:")

    blocking = create_agent(
        ScriptedChatModel([{"content": "x"}]),
        middleware=[PIIMiddleware("email", strategy="block")],
    )
    with pytest.raises(PIIDetectionError):
        blocking.invoke({"messages": [{"role": "user", "content": "a@b.co"}]})

"""Graph lifecycle callbacks (``engine.callbacks``): handlers, managers, dispatch.

Observed on LangGraph 1.2's ``langgraph.callbacks``: which callbacks a manager
keeps, how a failing or async handler is called. langchain-core is optional; the
last test imports the module with it hidden.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManager

from engine.callbacks import (
    GraphCallbackHandler,
    GraphInterruptEvent,
    GraphResumeEvent,
    get_async_graph_callback_manager_for_config,
    get_sync_graph_callback_manager_for_config,
)
from engine.types import Interrupt
from tests._support.python_child import run_python

INTERRUPTED = GraphInterruptEvent(
    run_id=None,
    status="pending",
    checkpoint_id="c1",
    checkpoint_ns=(),
    interrupts=(Interrupt(value="q?", id="i1"),),
)
RESUMED = GraphResumeEvent(
    run_id=None, status="pending", checkpoint_id="c1", checkpoint_ns=("sub:1",)
)


class Recorder(GraphCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, int]] = []

    def on_interrupt(self, event: GraphInterruptEvent) -> None:
        self.seen.append(("interrupt", event, threading.get_ident()))

    def on_resume(self, event: GraphResumeEvent) -> None:
        self.seen.append(("resume", event, threading.get_ident()))


def test_events_are_frozen_dataclasses_with_langgraphs_fields() -> None:
    assert [f.name for f in dataclasses.fields(GraphInterruptEvent)] == [
        "run_id",
        "status",
        "checkpoint_id",
        "checkpoint_ns",
        "interrupts",
    ]
    assert [f.name for f in dataclasses.fields(GraphResumeEvent)] == [
        "run_id",
        "status",
        "checkpoint_id",
        "checkpoint_ns",
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        RESUMED.checkpoint_id = "other"  # type: ignore[misc]


def test_the_handler_is_a_langchain_handler_when_langchain_core_is_installed() -> None:
    assert issubclass(GraphCallbackHandler, BaseCallbackHandler)
    handler = GraphCallbackHandler()
    assert handler.on_interrupt(INTERRUPTED) is None
    assert handler.on_resume(RESUMED) is None


def test_the_manager_keeps_only_graph_handlers() -> None:
    graph_handler = Recorder()
    run_id = uuid.uuid4()

    manager = get_sync_graph_callback_manager_for_config(
        {"callbacks": [graph_handler, BaseCallbackHandler()]}, run_id=run_id
    )

    assert manager.handlers == [graph_handler]
    assert manager.run_id == run_id
    assert get_sync_graph_callback_manager_for_config({}).handlers == []


def test_the_manager_accepts_a_single_handler_and_a_langchain_manager() -> None:
    first, second = Recorder(), Recorder()

    single = get_sync_graph_callback_manager_for_config({"callbacks": first})
    from_langchain = get_async_graph_callback_manager_for_config(
        {
            "callbacks": CallbackManager(
                handlers=[first, BaseCallbackHandler()],
                inheritable_handlers=[second],
                tags=["t"],
            )
        }
    )

    assert single.handlers == [first]
    assert from_langchain.handlers == [first]
    assert from_langchain.inheritable_handlers == [second]
    assert from_langchain.tags == ["t"]
    assert from_langchain.is_async


def test_a_manager_passed_as_callbacks_is_copied_with_the_new_run_id() -> None:
    handler = Recorder()
    original = get_sync_graph_callback_manager_for_config(
        {"callbacks": [handler]}, run_id=uuid.uuid4()
    )
    run_id = uuid.uuid4()

    copied = get_sync_graph_callback_manager_for_config(
        {"callbacks": original}, run_id=run_id
    )

    assert copied is not original
    assert copied.handlers == [handler]
    assert copied.run_id == run_id
    assert original.copy().run_id == original.run_id
    assert original.copy(run_id=None).run_id is None
    with pytest.raises(TypeError, match="UUID"):
        original.copy(run_id="not-a-uuid")


def test_callbacks_that_are_not_handlers_are_refused() -> None:
    with pytest.raises(TypeError, match="handler, sequence, or manager"):
        get_sync_graph_callback_manager_for_config({"callbacks": "handler"})  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match="handler, sequence, or manager"):
        get_sync_graph_callback_manager_for_config({"callbacks": 3})  # type: ignore[typeddict-item]


def test_sync_dispatch_calls_each_handler_in_this_thread() -> None:
    handler = Recorder()
    manager = get_sync_graph_callback_manager_for_config({"callbacks": [handler]})

    manager.on_interrupt(INTERRUPTED)
    manager.on_resume(RESUMED)

    here = threading.get_ident()
    assert handler.seen == [("interrupt", INTERRUPTED, here), ("resume", RESUMED, here)]


class Failing(GraphCallbackHandler):
    def on_interrupt(self, event: GraphInterruptEvent) -> None:
        raise ValueError("boom")


def test_a_failing_handler_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    after = Recorder()
    manager = get_sync_graph_callback_manager_for_config(
        {"callbacks": [Failing(), after]}
    )

    with caplog.at_level(logging.WARNING, logger="engine.callbacks"):
        manager.on_interrupt(INTERRUPTED)

    assert "Error in Failing.on_interrupt callback: ValueError('boom')" in caplog.text
    assert [kind for kind, *_ in after.seen] == ["interrupt"]


async def test_a_handler_with_raise_error_propagates_in_both_managers() -> None:
    class Strict(Failing):
        raise_error = True

    config: Any = {"callbacks": [Strict()]}
    with pytest.raises(ValueError, match="boom"):
        get_sync_graph_callback_manager_for_config(config).on_interrupt(INTERRUPTED)
    with pytest.raises(ValueError, match="boom"):
        await get_async_graph_callback_manager_for_config(config).on_interrupt(
            INTERRUPTED
        )


class AsyncRecorder(GraphCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def on_interrupt(self, event: GraphInterruptEvent) -> None:
        self.seen.append(event)


def test_the_sync_manager_awaits_async_handlers() -> None:
    handler = AsyncRecorder()

    get_sync_graph_callback_manager_for_config({"callbacks": [handler]}).on_interrupt(
        INTERRUPTED
    )

    assert handler.seen == [INTERRUPTED]


async def test_the_sync_manager_awaits_async_handlers_inside_a_running_loop() -> None:
    handler = AsyncRecorder()

    get_sync_graph_callback_manager_for_config({"callbacks": [handler]}).on_interrupt(
        INTERRUPTED
    )

    assert handler.seen == [INTERRUPTED]


async def test_the_async_manager_runs_sync_handlers_in_a_thread_unless_inline() -> None:
    class Inline(Recorder):
        run_inline = True

    threaded, inline, awaited = Recorder(), Inline(), AsyncRecorder()
    manager = get_async_graph_callback_manager_for_config(
        {"callbacks": [threaded, inline, awaited]}
    )

    await manager.on_interrupt(INTERRUPTED)
    await manager.on_resume(RESUMED)

    here = threading.get_ident()
    assert [(kind, event) for kind, event, _ in threaded.seen] == [
        ("interrupt", INTERRUPTED),
        ("resume", RESUMED),
    ]
    assert all(thread != here for *_, thread in threaded.seen)
    assert all(thread == here for *_, thread in inline.seen)
    assert awaited.seen == [INTERRUPTED]


def test_callbacks_work_without_langchain_core() -> None:
    script = """
import sys
sys.modules["langchain_core"] = None
from engine.callbacks import GraphCallbackHandler, get_sync_graph_callback_manager_for_config

class H(GraphCallbackHandler):
    def on_resume(self, event):
        print("resumed", event)

assert not any(c.__module__.startswith("langchain") for c in GraphCallbackHandler.__mro__)
manager = get_sync_graph_callback_manager_for_config({"callbacks": [H(), object()]})
assert len(manager.handlers) == 1
manager.on_resume("evt")
"""
    assert run_python(script) == "resumed evt\n"


def test_the_handler_class_is_made_once_and_is_a_langchain_handler() -> None:
    import engine.callbacks as callbacks  # noqa: PLC0415 - the module object itself

    made = callbacks.GraphCallbackHandler
    assert made is callbacks.GraphCallbackHandler
    assert issubclass(made, BaseCallbackHandler)
    assert made.__module__ == "engine.callbacks"
    assert made.__qualname__ == "GraphCallbackHandler"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        callbacks.Nope  # noqa: B018 - the attribute lookup is the test


def test_importing_the_engine_imports_no_saver_and_makes_no_handler_class() -> None:
    """``import engine.graph`` leaves the SQLite savers (and aiosqlite) and the
    memory saver unimported until a program uses them, and a run with no graph
    handler never makes the handler class; without langchain-core installed,
    nothing of it (or of pydantic) is imported either."""
    script = """
import sys
if sys.argv[1] == "without":
    sys.modules["langchain_core"] = None
import engine.graph
import engine.callbacks
from engine.graph import StateGraph, START, END
from typing import TypedDict

class S(TypedDict):
    n: int

b = StateGraph(S)
b.add_node("a", lambda s: {"n": s["n"] + 1})
b.add_edge(START, "a")
b.add_edge("a", END)
assert b.compile().invoke({"n": 1}, {"callbacks": []}) == {"n": 2}
assert engine.callbacks._handler_class is None
print(sorted(m for m in ("pydantic", "aiosqlite", "engine.checkpoint.sqlite",
    "engine.checkpoint.memory") if m in sys.modules))
"""
    for langchain, expected in (("without", "[]\n"), ("with", "['pydantic']\n")):
        assert run_python(script, langchain) == expected

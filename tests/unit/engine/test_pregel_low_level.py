"""The low-level API: ``Pregel`` built from ``NodeBuilder`` nodes and channels.

The first tests are the examples of LangGraph's "Pregel" docs page, with the
outputs LangGraph 1.2 gives for them; the others pin the builder, the
constructor's options and ``validate()`` to what LangGraph does.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from typing import Any

import pytest

from engine.channels import BinaryOperatorAggregate, EphemeralValue, LastValue, Topic
from engine.checkpoint.memory import InMemorySaver
from engine.errors import GraphValidationError, InvalidUpdateError
from engine.pregel import ChannelWriteEntry, NodeBuilder, Pregel, PregelNode
from engine.pregel.main import NodeBuilder as MainNodeBuilder
from engine.pregel.protocol import PregelProtocol, StreamProtocol
from engine.types import RetryPolicy, Send
from engine.warnings import LangGraphDeprecatedSinceV10


def _double(x: str) -> str:
    return x + x


# -- the docs page's examples ---------------------------------------------------------


def test_single_node() -> None:
    node1 = NodeBuilder().subscribe_only("a").do(_double).write_to("b")
    app = Pregel(
        nodes={"node1": node1},
        channels={"a": EphemeralValue(str), "b": EphemeralValue(str)},
        input_channels=["a"],
        output_channels=["b"],
    )
    assert app.invoke({"a": "foo"}) == {"b": "foofoo"}


def test_multiple_nodes_and_output_channels() -> None:
    node1 = NodeBuilder().subscribe_only("a").do(_double).write_to("b")
    node2 = NodeBuilder().subscribe_to("b").do(lambda x: x["b"] + x["b"]).write_to("c")
    app = Pregel(
        nodes={"node1": node1, "node2": node2},
        channels={
            "a": EphemeralValue(str),
            "b": LastValue(str),
            "c": EphemeralValue(str),
        },
        input_channels=["a"],
        output_channels=["b", "c"],
    )
    assert app.invoke({"a": "foo"}) == {"b": "foofoo", "c": "foofoofoofoo"}
    assert list(app.stream({"a": "foo"})) == [
        {"b": "foofoo"},
        {"b": "foofoo", "c": "foofoofoofoo"},
    ]


def _topic_app(c: Any) -> Pregel:
    node1 = NodeBuilder().subscribe_only("a").do(_double).write_to("b", "c")
    node2 = NodeBuilder().subscribe_only("b").do(_double).write_to("c")
    return Pregel(
        nodes={"node1": node1, "node2": node2},
        channels={"a": EphemeralValue(str), "b": EphemeralValue(str), "c": c},
        input_channels=["a"],
        output_channels=["c"],
    )


def test_topic_channel() -> None:
    app = _topic_app(Topic(str, accumulate=True))
    assert app.invoke({"a": "foo"}) == {"c": ["foofoo", "foofoofoofoo"]}
    # updates show every streamed channel a node wrote (all of them by default)
    assert list(app.stream({"a": "foo"}, stream_mode="updates")) == [
        {"node1": {"b": "foofoo", "c": "foofoo"}},
        {"node2": {"c": "foofoofoofoo"}},
    ]


def test_binary_operator_aggregate_channel() -> None:
    def reducer(current: str, update: str) -> str:
        return current + " | " + update if current else update

    app = _topic_app(BinaryOperatorAggregate(str, operator=reducer))
    assert app.invoke({"a": "foo"}) == {"c": "foofoo | foofoofoofoo"}


def test_a_cycle_ends_when_the_node_writes_none() -> None:
    example_node = (
        NodeBuilder()
        .subscribe_only("value")
        .do(lambda x: x + x if len(x) < 10 else None)
        .write_to(ChannelWriteEntry(channel="value", skip_none=True))
    )
    app = Pregel(
        nodes={"example_node": example_node},
        channels={"value": EphemeralValue(str)},
        input_channels=["value"],
        output_channels=["value"],
    )
    # the last step writes nothing and the ephemeral channel clears, yet the
    # output is its last value: invoke returns the last values chunk
    assert app.invoke({"value": "a"}) == {"value": "a" * 16}
    assert list(app.stream({"value": "a"})) == [
        {"value": "aa"},
        {"value": "aaaa"},
        {"value": "a" * 8},
        {"value": "a" * 16},
    ]


# -- invoke, stream and state of a channel graph ---------------------------------------


def _pipe(**kwargs: Any) -> Pregel:
    node = NodeBuilder().subscribe_only("a").do(lambda x: x * 2).write_to("b")
    options: dict[str, Any] = {
        "input_channels": "a",
        "output_channels": "b",
        **kwargs,
    }
    return Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int), "c": LastValue(int)},
        **options,
    )


def test_invoke_returns_none_when_no_output_channel_was_written() -> None:
    node = NodeBuilder().subscribe_only("a").write_to("c")
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int), "c": LastValue(int)},
        input_channels="a",
        output_channels=["b"],
    )
    assert app.invoke(1) is None
    assert app.invoke(1, version="v2").value is None


def test_one_output_channel_gives_its_value_and_bare_updates() -> None:
    node = (
        NodeBuilder()
        .subscribe_only("a")
        .do(lambda x: x * 2)
        .write_to("b", c=lambda x: x + 1, d="fixed")
    )
    app = Pregel(
        nodes={"n": node},
        channels={
            "a": LastValue(int),
            "b": LastValue(int),
            "c": LastValue(int),
            "d": LastValue(str),
        },
        input_channels="a",
        output_channels="b",
        stream_channels="b",
    )
    assert app.invoke(3) == 6
    assert app.invoke(3, output_keys=["b", "c", "d"]) == {"b": 6, "c": 7, "d": "fixed"}
    assert list(app.stream(3, stream_mode="updates")) == [{"n": 6}]
    assert list(app.stream(3, output_keys=["c"])) == [{"c": 7}]


def test_values_stream_all_channels_by_default() -> None:
    app = _pipe()
    assert app.stream_channels is None
    assert app.stream_channels_asis == ["a", "b", "c", "__pregel_tasks"]
    assert app.stream_channels_list == ["a", "b", "c", "__pregel_tasks"]
    assert list(app.stream(3)) == [{"a": 3, "b": 6}]
    named = _pipe(stream_channels="b")
    assert named.stream_channels_asis == "b"
    assert named.stream_channels_list == ["b"]
    assert list(named.stream(3)) == [6]


def test_state_and_history_with_a_checkpointer() -> None:
    app = _pipe(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    assert app.invoke(1, config) == 2
    state = app.get_state(config)
    assert (state.values, state.next) == ({"a": 1, "b": 2}, ())
    history = [(s.metadata["step"], s.values) for s in app.get_state_history(config)]
    assert history == [(0, {"a": 1, "b": 2}), (-1, {"a": 1})]


def test_breakpoint_then_resume() -> None:
    app = _pipe(checkpointer=InMemorySaver(), interrupt_before_nodes=["n"])
    config: Any = {"configurable": {"thread_id": "t"}}
    assert app.invoke(4, config) is None
    assert app.get_state(config).next == ("n",)
    assert app.invoke(None, config) == 8


# -- NodeBuilder ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checkpointer", "message"),
    [("memory", "got a str"), (InMemorySaver, "the class InMemorySaver")],
)
def test_an_invalid_checkpointer_is_refused_when_built(
    checkpointer: Any, message: str
) -> None:
    node = NodeBuilder().subscribe_only("a").do(lambda x: x).write_to("b")

    with pytest.raises(TypeError, match=message):
        Pregel(
            nodes={"n": node},
            channels={"a": LastValue(str), "b": LastValue(str)},
            input_channels="a",
            output_channels="b",
            checkpointer=checkpointer,
        )


def test_node_builder_is_exported_from_main_too() -> None:
    assert MainNodeBuilder is NodeBuilder


def test_read_from_and_triggers_that_are_not_read() -> None:
    node = (
        NodeBuilder()
        .subscribe_to("go", read=False)
        .read_from("x", "y")
        .write_to(out=lambda d: sorted(d.items()))
    )
    app = Pregel(
        nodes={"n": node},
        channels={
            "go": EphemeralValue(bool),
            "x": LastValue(int),
            "y": LastValue(int),
            "out": LastValue(list),
        },
        input_channels=["go", "x"],
        output_channels="out",
    )
    assert app.invoke({"go": True, "x": 1}) == [("x", 1)]  # y holds nothing
    built = node.build("n")
    assert (built.triggers, built.channels) == (["go"], ["x", "y"])


def test_do_twice_chains_the_callables() -> None:
    async def adouble(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    def build(second: Any) -> Pregel:
        node = NodeBuilder().subscribe_only("a").do(lambda x: x + 1).do(second)
        return Pregel(
            nodes={"n": node.write_to("b")},
            channels={"a": LastValue(int), "b": LastValue(int)},
            input_channels="a",
            output_channels="b",
        )

    assert build(lambda x: x * 10).invoke(1) == 20
    assert asyncio.run(build(adouble).ainvoke(1)) == 4


def test_a_node_without_do_passes_its_input_on() -> None:
    node = NodeBuilder().subscribe_only("a").write_to("b")
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels=["a", "b"],
    )
    assert app.invoke(4) == {"a": 4, "b": 4}


def test_write_to_sends_tasks() -> None:
    start = (
        NodeBuilder().subscribe_only("a").write_to(Send("worker", 5), Send("worker", 7))
    )
    worker = NodeBuilder().do(lambda x: x * 100).write_to("res")
    app = Pregel(
        nodes={"start": start, "worker": worker},
        channels={"a": LastValue(int), "res": Topic(int, accumulate=True)},
        input_channels="a",
        output_channels="res",
    )
    assert app.invoke(1) == [500, 700]


def test_skip_none_and_mappers() -> None:
    node = (
        NodeBuilder()
        .subscribe_only("a")
        .write_to(
            ChannelWriteEntry("b", skip_none=True),
            ChannelWriteEntry("c", mapper=lambda x: None if x is None else -x),
        )
    )
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(Any), "b": LastValue(Any), "c": LastValue(Any)},
        input_channels="a",
        output_channels=["b", "c"],
    )
    assert app.invoke(2) == {"b": 2, "c": -2}


def test_meta_and_policies_reach_the_node() -> None:
    policy = RetryPolicy(max_attempts=3)
    node = (
        NodeBuilder()
        .subscribe_only("a")
        .meta("t1", "t2", k="v")
        .add_retry_policies(policy)
        .set_timeout(2.5)
        .build("n")
    )
    assert isinstance(node, PregelNode)
    assert node.tags == ("t1", "t2")
    assert node.metadata == {"k": "v"}
    assert node.retry_policy == (policy,)
    assert node.timeout is not None and node.timeout.run_timeout == 2.5


def test_retry_policies_retry_a_node() -> None:
    calls: list[int] = []

    def flaky(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise ValueError("flaky")
        return x

    node = (
        NodeBuilder()
        .subscribe_only("a")
        .do(flaky)
        .add_retry_policies(
            RetryPolicy(
                max_attempts=3,
                initial_interval=0.001,
                jitter=False,
                retry_on=ValueError,
            )
        )
        .write_to("b")
    )
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="b",
    )
    assert app.invoke(5) == 5
    assert calls == [5, 5, 5]


def test_subscribing_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="single channel"):
        NodeBuilder().subscribe_only("a").subscribe_to("b")
    with pytest.raises(ValueError, match="already subscribed"):
        NodeBuilder().subscribe_to("a").subscribe_only("b")
    with pytest.raises(ValueError, match="single channel"):
        NodeBuilder().subscribe_only("a").read_from("b")


def test_writing_the_tasks_channel_is_refused() -> None:
    with pytest.raises(InvalidUpdateError, match="reserved"):
        NodeBuilder().subscribe_only("a").write_to("__pregel_tasks").build()


# -- the constructor and validate() ----------------------------------------------------


def test_constructor_defaults_match_langgraph() -> None:
    app = _pipe()
    assert app.stream_mode == "values"
    assert app.stream_eager is False
    assert app.step_timeout is None
    assert app.debug is False
    assert app.node_error_handler_map == {}
    assert app.stream_transformers == ()
    assert app.trigger_to_nodes == {"a": ("n",)}
    assert isinstance(app.channels["__pregel_tasks"], Topic)
    assert app.nodes["n"].name == "n"


def test_a_single_retry_policy_is_accepted() -> None:
    policy = RetryPolicy()
    assert _pipe(retry_policy=policy).retry_policy == (policy,)


def test_channels_may_be_none() -> None:
    node = NodeBuilder().do(lambda x: x)
    with pytest.raises(GraphValidationError, match="Input channel 'a'"):
        Pregel(
            nodes={"n": node}, channels=None, input_channels="a", output_channels="a"
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_channels": "zz"}, "Input channel 'zz'"),
        ({"input_channels": "c"}, "No node subscribes to the input channels"),
        ({"output_channels": "zz"}, "Output channel 'zz'"),
        ({"stream_channels": ["b", "zz"]}, "Output channel 'zz'"),
        ({"interrupt_before_nodes": ["zz"]}, "Interrupt node 'zz'"),
        ({"interrupt_after_nodes": ["zz"]}, "Interrupt node 'zz'"),
    ],
)
def test_validate_names_what_is_unknown(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphValidationError, match=message):
        _pipe(**kwargs)


def test_validate_checks_what_nodes_read_and_subscribe_to() -> None:
    channels = {"a": LastValue(int), "b": LastValue(int)}
    reader = NodeBuilder().subscribe_to("a").read_from("zz")
    with pytest.raises(GraphValidationError, match="reads channel 'zz'"):
        Pregel(
            nodes={"n": reader},
            channels=channels,
            input_channels="a",
            output_channels="b",
        )
    trigger = NodeBuilder().subscribe_to("zz", read=False)
    with pytest.raises(GraphValidationError, match="Subscribed channel 'zz'"):
        Pregel(
            nodes={"m": NodeBuilder().subscribe_only("a"), "n": trigger},
            channels=channels,
            input_channels="a",
            output_channels="b",
        )


def test_validate_refuses_reserved_names_and_wrong_nodes() -> None:
    with pytest.raises(GraphValidationError, match="'__interrupt__' is reserved"):
        _pipe_with_channel("__interrupt__", LastValue(int))
    with pytest.raises(ValueError, match="reserved"):
        _pipe_with_channel("__pregel_tasks", LastValue(int))
    with pytest.raises(TypeError, match="expected PregelNode or NodeBuilder"):
        Pregel(
            nodes={"n": lambda x: x},  # type: ignore[dict-item]
            channels={"a": LastValue(int)},
            input_channels="a",
            output_channels="a",
        )


def _pipe_with_channel(name: str, channel: Any) -> Pregel:
    node = NodeBuilder().subscribe_only("a").write_to("b")
    return Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int), name: channel},
        input_channels="a",
        output_channels="b",
    )


def test_a_timeout_needs_an_async_node() -> None:
    node = NodeBuilder().subscribe_only("a").do(lambda x: x).set_timeout(1)
    with pytest.raises(GraphValidationError, match="synchronous"):
        Pregel(
            nodes={"n": node},
            channels={"a": LastValue(int)},
            input_channels="a",
            output_channels="a",
        )


def test_auto_validate_false_defers_checks_and_uses_given_triggers() -> None:
    node = NodeBuilder().subscribe_only("a").write_to("b")
    app = Pregel(
        nodes={"n": node},
        channels={"a": LastValue(int), "b": LastValue(int)},
        input_channels="a",
        output_channels="zz",
        auto_validate=False,
        trigger_to_nodes={"a": ["n"], "b": ["n"]},
    )
    assert app.trigger_to_nodes == {"a": ("n",), "b": ("n",)}
    with pytest.raises(GraphValidationError, match="Output channel 'zz'"):
        app.validate()
    app.output_channels = "b"
    assert app.validate() is app
    assert app.trigger_to_nodes == {"a": ("n",)}


def test_config_type_is_deprecated_and_unknown_keywords_are_refused() -> None:
    class Context:
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        app = _pipe(config_type=Context)
    assert app.context_schema is Context
    assert any(issubclass(w.category, LangGraphDeprecatedSinceV10) for w in caught)
    with pytest.raises(TypeError, match="unexpected keyword arguments: \\['typo'\\]"):
        _pipe(typo=1)


def test_pregel_is_a_pregel_protocol() -> None:
    assert isinstance(_pipe(), PregelProtocol)
    seen: list[Any] = []
    sink = StreamProtocol(seen.append, {"values"})
    sink(((), "values", 1))
    assert (seen, sink.modes) == ([((), "values", 1)], {"values"})


# -- step_timeout and stream_eager -----------------------------------------------------


def _slow_app(node: Any, count: int) -> Pregel:
    nodes = {
        f"n{i}": NodeBuilder().subscribe_only("a").do(node).write_to(f"b{i}")
        for i in range(count)
    }
    return Pregel(
        nodes=nodes,
        channels={
            "a": LastValue(int),
            **{f"b{i}": LastValue(int) for i in range(count)},
        },
        input_channels="a",
        output_channels=[f"b{i}" for i in range(count)],
        step_timeout=0.05,
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("count", [1, 2])
def test_a_sync_step_that_overruns_raises_after_its_tasks_finish(count: int) -> None:
    def slow(x: int) -> int:
        time.sleep(0.2)
        return x + 1

    app = _slow_app(slow, count)
    config: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(TimeoutError, match="Timed out"):
        app.invoke(1, config)
    state = app.get_state(config)  # the finished tasks' writes were saved
    assert state.values == {"a": 1, **{f"b{i}": 2 for i in range(count)}}


@pytest.mark.parametrize("count", [1, 2])
def test_an_async_step_that_overruns_is_cancelled(count: int) -> None:
    async def slow(x: int) -> int:
        await asyncio.sleep(5)
        return x + 1

    app = _slow_app(slow, count)
    config: Any = {"configurable": {"thread_id": "t"}}
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(app.ainvoke(1, config))
    assert time.monotonic() - started < 2
    state = app.get_state(config)
    assert state.values == {"a": 1}
    assert state.next == tuple(f"n{i}" for i in range(count))


def test_stream_eager_yields_a_finished_task_while_its_sibling_runs() -> None:
    fast_seen = threading.Event()

    def slow(x: int) -> int:
        fast_seen.wait(timeout=2)  # released by the consumer
        return x

    app = Pregel(
        nodes={
            "fast": NodeBuilder().subscribe_only("a").write_to("b"),
            "slow": NodeBuilder().subscribe_only("a").do(slow).write_to("c"),
        },
        channels={"a": LastValue(int), "b": LastValue(int), "c": LastValue(int)},
        input_channels="a",
        output_channels=["b", "c"],
        stream_eager=True,
    )
    started = time.monotonic()
    chunks = []
    for chunk in app.stream(1, stream_mode="updates"):
        chunks.append(chunk)
        fast_seen.set()
    assert chunks == [{"fast": {"b": 1}}, {"slow": {"c": 1}}]
    assert time.monotonic() - started < 1.5  # slow was released at once

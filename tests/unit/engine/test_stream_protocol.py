"""The v3 stream protocol's parts on their own: StreamChannel, StreamMux, StreamTransformer.

Behaviour as LangGraph 1.2's ``langgraph.stream`` (observed in its test suite
and by running it): single-subscriber channels bound to sync or async mode,
named channels forwarded into the main log (``custom:<name>`` unless native),
``seq`` numbers on the root log only, ``before_builtins`` ordering, and
``finalize``/``fail`` closing every projection.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.stream import ProtocolEvent, StreamChannel, StreamTransformer
from engine.stream._mux import StreamMux


def event(method: str, data: Any, ns: list[str] | None = None) -> ProtocolEvent:
    return {
        "type": "event",
        "method": method,
        "params": {"namespace": ns or [], "timestamp": 0, "data": data},
    }


class Recorder(StreamTransformer):
    def __init__(self, scope: tuple[str, ...] = (), *, key: str = "seen") -> None:
        super().__init__(scope)
        self.key = key
        self.log: StreamChannel[Any] = StreamChannel()
        self.finalized = False
        self.failed: BaseException | None = None

    def init(self) -> dict[str, Any]:
        return {self.key: self.log}

    def process(self, e: ProtocolEvent) -> bool:
        self.log.push(e["params"]["data"])
        return True

    def finalize(self) -> None:
        self.finalized = True

    def fail(self, err: BaseException) -> None:
        self.failed = err


class Named(StreamTransformer):
    """Pushes a count on a named channel for each event, and drops ``secret`` events."""

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        super().__init__(scope)
        self.channel: StreamChannel[int] = StreamChannel("counts")
        self.n = 0

    def init(self) -> dict[str, Any]:
        return {"counts": self.channel}

    def process(self, e: ProtocolEvent) -> bool:
        self.n += 1
        self.channel.push(self.n)
        return e["method"] != "secret"


class NativeNamed(Named):
    _native = True


def test_channel_refuses_iteration_before_binding_and_a_second_subscriber() -> None:
    channel: StreamChannel[int] = StreamChannel()
    with pytest.raises(TypeError, match="not been bound"):
        iter(channel)
    channel._bind(is_async=False)
    with pytest.raises(RuntimeError, match="already bound"):
        channel._bind(is_async=True)
    iter(channel)
    with pytest.raises(RuntimeError, match=r"\.tee\(n\)"):
        iter(channel)
    with pytest.raises(ValueError, match="maxlen"):
        StreamChannel(maxlen=0)


def test_channel_buffers_only_once_subscribed_and_ends_with_its_error() -> None:
    channel: StreamChannel[int] = StreamChannel()
    channel._bind(is_async=False)
    channel.push(1)  # nobody listens yet: dropped
    cursor = iter(channel)
    channel.push(2)
    channel.push(3)
    channel.fail(ValueError("boom"))
    assert next(cursor) == 2
    assert next(cursor) == 3
    with pytest.raises(ValueError, match="boom"):
        next(cursor)
    with pytest.raises(RuntimeError, match="closed"):
        channel.push(4)


def test_channel_mode_is_fixed_by_binding() -> None:
    sync: StreamChannel[int] = StreamChannel()
    sync._bind(is_async=False)
    with pytest.raises(TypeError, match="sync mode"):
        sync.__aiter__()
    async_: StreamChannel[int] = StreamChannel()
    async_._bind(is_async=True)
    with pytest.raises(TypeError, match="async mode"):
        iter(async_)


def test_channel_cursor_pumps_when_empty() -> None:
    channel: StreamChannel[int] = StreamChannel()
    channel._bind(is_async=False)
    source = iter([10, 20])

    def pump() -> bool:
        for item in source:
            channel.push(item)
            return True
        channel.close()
        return False

    channel._request_more = pump
    assert list(channel) == [10, 20]


def test_tee_gives_every_branch_every_item() -> None:
    channel: StreamChannel[int] = StreamChannel()
    channel._bind(is_async=False)
    a, b = channel.tee(2)
    for i in range(3):
        channel.push(i)
    channel.close()
    assert list(a) == [0, 1, 2]
    assert list(b) == [0, 1, 2]
    with pytest.raises(ValueError):
        StreamChannel().tee(0)


def test_atee_gives_every_branch_every_item() -> None:
    async def main() -> tuple[list[int], list[int]]:
        channel: StreamChannel[int] = StreamChannel()
        channel._bind(is_async=True)
        a, b = channel.atee(2)
        for i in range(3):
            channel.push(i)
        channel.close()
        return [x async for x in a], [x async for x in b]

    assert asyncio.run(main()) == ([0, 1, 2], [0, 1, 2])


def test_mux_numbers_the_root_log_and_forwards_named_channels() -> None:
    mux = StreamMux([Named()], is_async=False)
    log = iter(mux._events)
    mux.push(event("values", {"x": 1}))
    mux.push(event("secret", None))  # dropped from the log; its count is not
    mux.close()

    got = [(e["method"], e["params"]["data"], e.get("seq")) for e in log]
    # the forwarded count enters the log before the event that caused it
    assert got == [
        ("custom:counts", 1, 1),
        ("values", {"x": 1}, 2),
        ("custom:counts", 2, 3),
    ]
    assert mux.native_keys == set()
    assert set(mux.extensions) == {"counts"}


def test_native_channels_keep_their_bare_name() -> None:
    mux = StreamMux([NativeNamed()], is_async=False)
    log = iter(mux._events)
    mux.push(event("values", 1))
    mux.close()
    assert [e["method"] for e in log] == ["counts", "values"]
    assert mux.native_keys == {"counts"}


def test_child_muxes_do_not_number_events_and_need_factories() -> None:
    mux = StreamMux(factories=[Recorder], is_async=False)
    child = mux._make_child(("sub:1",))
    assert child.scope == ("sub:1",)
    log = iter(child._events)
    child.push(event("values", 1, ["sub:1"]))
    child.close()
    assert [e.get("seq") for e in log] == [None]
    with pytest.raises(RuntimeError, match="factories"):
        StreamMux([Recorder()])._make_child(("x",))


def test_before_builtins_transformers_run_first() -> None:
    order: list[str] = []

    class Tag(StreamTransformer):
        name = ""

        def init(self) -> dict[str, Any]:
            return {}

        def process(self, e: ProtocolEvent) -> bool:
            order.append(self.name)
            return True

    class Late(Tag):
        name = "late"

    class Early(Tag):
        name = "early"
        before_builtins = True

    mux = StreamMux(factories=[Late, Early], is_async=False)
    mux.push(event("values", 1))
    assert order == ["early", "late"]


def test_registration_errors() -> None:
    class NotADict(StreamTransformer):
        def init(self) -> Any:
            return []

    class AsyncOnly(StreamTransformer):
        def init(self) -> dict[str, Any]:
            return {}

        async def aprocess(self, e: ProtocolEvent) -> bool:
            return True

    class AsyncButSyncToo(AsyncOnly):
        supports_sync = True

        def process(self, e: ProtocolEvent) -> bool:
            return True

    with pytest.raises(TypeError, match="must return a dict"):
        StreamMux([NotADict()])
    with pytest.raises(ValueError, match="'seen' \\(owned by Recorder\\)"):
        StreamMux([Recorder(), Recorder()])
    with pytest.raises(RuntimeError, match="requires an async run"):
        StreamMux([AsyncOnly()])
    StreamMux([AsyncOnly()], is_async=True)
    StreamMux([AsyncButSyncToo()])


def test_close_finalizes_and_fail_fails_every_projection() -> None:
    ok = Recorder()
    mux = StreamMux([ok])
    cursor = iter(ok.log)
    mux.push(event("values", 1))
    mux.close()
    assert ok.finalized and list(cursor) == [1]

    bad = Recorder()
    mux = StreamMux([bad])
    cursor = iter(bad.log)
    err = RuntimeError("run failed")
    mux.fail(err)
    assert bad.failed is err
    with pytest.raises(RuntimeError, match="run failed"):
        list(cursor)


def test_missing_process_is_loud() -> None:
    class Lazy(StreamTransformer):
        def init(self) -> dict[str, Any]:
            return {}

    mux = StreamMux([Lazy()])
    with pytest.raises(NotImplementedError, match="Lazy must override"):
        mux.push(event("values", 1))


def test_schedule_needs_an_event_loop_and_the_close_waits_for_it() -> None:
    class Slow(StreamTransformer):
        requires_async = True

        def __init__(self, scope: tuple[str, ...] = ()) -> None:
            super().__init__(scope)
            self.out: StreamChannel[int] = StreamChannel()

        def init(self) -> dict[str, Any]:
            return {"out": self.out}

        def process(self, e: ProtocolEvent) -> bool:
            async def later() -> None:
                await asyncio.sleep(0.01)
                self.out.push(e["params"]["data"])

            self.schedule(later())
            return True

    with pytest.raises(RuntimeError, match="running event loop"):

        async def noop() -> None:
            return None

        Slow().schedule(noop())

    async def main() -> list[int]:
        slow = Slow()
        mux = StreamMux([slow], is_async=True)
        cursor = slow.out.__aiter__()
        await mux.apush(event("values", 7))
        await mux.aclose()
        return [x async for x in cursor]

    assert asyncio.run(main()) == [7]

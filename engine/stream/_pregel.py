"""Start a v3 run stream for a graph: ``stream_events(version="v3")``'s body.

The run's mux holds the built-in transformers (values, messages, lifecycle,
subgraphs), then the graph's compile-time ``stream_transformers``, then the
call's ``transformers``; the graph is asked for exactly the stream modes they
require, with ``subgraphs=True`` and v2 parts. Nothing runs until a consumer
reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._config import addresses_own_thread
from engine._internal._constants import CONF, CONFIG_KEY_CHECKPOINT_NS
from engine._internal._scope import current_scope
from engine.stream._mux import StreamMux, TransformerFactory
from engine.stream._types import StreamTransformer
from engine.stream.run_stream import AsyncGraphRunStream, GraphRunStream
from engine.stream.transformers import (
    LifecycleTransformer,
    MessagesTransformer,
    SubgraphTransformer,
    ValuesTransformer,
)

if TYPE_CHECKING:
    from engine._internal._typing import RunnableConfig

__all__ = ("astart_run_stream", "start_run_stream")

_BUILT_IN: tuple[TransformerFactory, ...] = (
    ValuesTransformer,
    MessagesTransformer,
    LifecycleTransformer,
    SubgraphTransformer,
)
_OWNED = ("stream_mode", "subgraphs")


def check_options(kwargs: dict[str, Any]) -> None:
    """v3 decides the stream modes and always streams subgraphs.

    Raises:
        TypeError: ``stream_mode`` or ``subgraphs`` was given.
    """
    if given := [key for key in _OWNED if key in kwargs]:
        raise TypeError(
            "stream_events(version='v3') / astream_events(version='v3') do not accept "
            f"{', '.join(given)}; v3 owns these (stream_mode is built from the "
            "transformers' required modes, subgraphs is always on so subgraph "
            "handles see their events)."
        )


def _factories(
    specs: Sequence[Callable[[tuple[str, ...]], Any]] | None,
) -> list[TransformerFactory]:
    factories: list[TransformerFactory] = []
    for spec in specs or ():
        if isinstance(spec, StreamTransformer):
            raise TypeError(
                "stream_events(version='v3') transformers must be scope-aware "
                f"callables, got pre-built instance {type(spec).__name__}. Pass the "
                "transformer class or a factory like "
                "`lambda scope: MyTransformer(scope, ...)`."
            )
        if not callable(spec):
            raise TypeError(
                "stream_events(version='v3') transformers must be scope-aware "
                f"callables, got {type(spec).__name__}."
            )
        factories.append(spec)
    return factories


def _scope(graph: Any, config: RunnableConfig | None) -> tuple[str, ...]:
    """The namespace the run's own parts will carry: ``()`` for a root run, the
    calling task's (numbered as the engine will number it) inside a node."""
    parent = current_scope()
    if parent is None or addresses_own_thread(config):
        return ()
    ns: str = (config or {}).get(CONF, {}).get(CONFIG_KEY_CHECKPOINT_NS) or ""
    if not ns:
        index = parent.subgraph_counter
        ns = parent.checkpoint_ns if index == 0 else f"{parent.checkpoint_ns}#{index}"
        if graph.checkpointer is True:
            ns = "|".join(part.split(":", 1)[0] for part in ns.split("|"))
    return tuple(ns.split("|")) if ns else ()


def _mux(
    graph: Any,
    config: RunnableConfig | None,
    transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None,
    *,
    is_async: bool,
) -> StreamMux:
    return StreamMux(
        factories=[
            *_BUILT_IN,
            *_factories(graph.stream_transformers),
            *_factories(transformers),
        ],
        scope=_scope(graph, config),
        is_async=is_async,
    )


def _modes(mux: StreamMux) -> list[str]:
    modes: dict[str, None] = {}
    for transformer in mux._transformers:
        modes.update(dict.fromkeys(getattr(transformer, "required_stream_modes", ())))
    return list(modes)


def start_run_stream(
    graph: Any,
    input: Any,
    config: RunnableConfig | None,
    transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None,
    options: dict[str, Any],
) -> GraphRunStream:
    """A sync v3 run stream of ``graph`` (``options`` go to ``graph.stream``)."""
    check_options(options)
    mux = _mux(graph, config, transformers, is_async=False)
    parts = graph.stream(
        input,
        config,
        stream_mode=_modes(mux),
        subgraphs=True,
        version="v2",
        **options,
    )
    return GraphRunStream(iter(parts), mux)


async def astart_run_stream(
    graph: Any,
    input: Any,
    config: RunnableConfig | None,
    transformers: Sequence[Callable[[tuple[str, ...]], Any]] | None,
    options: dict[str, Any],
) -> AsyncGraphRunStream:
    """Async twin of :func:`start_run_stream` (awaited by ``astream_events``)."""
    check_options(options)
    mux = _mux(graph, config, transformers, is_async=True)
    parts = graph.astream(
        input,
        config,
        stream_mode=_modes(mux),
        subgraphs=True,
        version="v2",
        **options,
    )
    return AsyncGraphRunStream(parts.__aiter__(), mux)

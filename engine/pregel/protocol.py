"""What every runnable graph offers, whatever runs it (``PregelProtocol``).

``Pregel`` (and so every compiled ``StateGraph`` and ``@entrypoint``) is a
``PregelProtocol``; a graph run elsewhere (a remote client, a test double) can
implement the protocol and be used where a graph is expected.
``StreamProtocol`` is a stream sink: a callable taking ``(namespace, mode,
payload)`` chunks, with the modes it wants.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Generic, Literal, Self

from engine._internal._typing import RunnableConfig
from engine.types import All, Command, StateSnapshot, StateUpdate, StreamMode
from engine.typing import ContextT, InputT, OutputT, StateT

__all__ = ("PregelProtocol", "StreamProtocol")

StreamChunk = tuple[tuple[str, ...], str, Any]


class PregelProtocol(ABC, Generic[StateT, ContextT, InputT, OutputT]):
    """The graph interface: run, stream, read and write state, draw.

    ``Pregel`` is registered as one (``isinstance(graph, PregelProtocol)``)
    without inheriting from this class, so its methods stay plain functions.
    """

    @abstractmethod
    def with_config(
        self, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Self: ...

    @abstractmethod
    def get_graph(
        self, config: RunnableConfig | None = None, *, xray: int | bool = False
    ) -> Any: ...

    @abstractmethod
    async def aget_graph(
        self, config: RunnableConfig | None = None, *, xray: int | bool = False
    ) -> Any: ...

    @abstractmethod
    def get_state(
        self, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot: ...

    @abstractmethod
    async def aget_state(
        self, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot: ...

    @abstractmethod
    def get_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]: ...

    @abstractmethod
    def aget_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]: ...

    @abstractmethod
    def bulk_update_state(
        self, config: RunnableConfig, updates: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig: ...

    @abstractmethod
    async def abulk_update_state(
        self, config: RunnableConfig, updates: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig: ...

    @abstractmethod
    def update_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
    ) -> RunnableConfig: ...

    @abstractmethod
    async def aupdate_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
    ) -> RunnableConfig: ...

    @abstractmethod
    def stream(
        self,
        input: InputT | Command[Any] | None,
        config: RunnableConfig | None = None,
        *,
        context: ContextT | None = None,
        stream_mode: StreamMode | list[StreamMode] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        subgraphs: bool = False,
        version: Literal["v1", "v2"] = "v1",
    ) -> Iterator[Any]: ...

    @abstractmethod
    def astream(
        self,
        input: InputT | Command[Any] | None,
        config: RunnableConfig | None = None,
        *,
        context: ContextT | None = None,
        stream_mode: StreamMode | list[StreamMode] | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        subgraphs: bool = False,
        version: Literal["v1", "v2"] = "v1",
    ) -> AsyncIterator[Any]: ...

    @abstractmethod
    def invoke(
        self,
        input: InputT | Command[Any] | None,
        config: RunnableConfig | None = None,
        *,
        context: ContextT | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        version: Literal["v1", "v2"] = "v1",
    ) -> Any: ...

    @abstractmethod
    async def ainvoke(
        self,
        input: InputT | Command[Any] | None,
        config: RunnableConfig | None = None,
        *,
        context: ContextT | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        version: Literal["v1", "v2"] = "v1",
    ) -> Any: ...


class StreamProtocol:
    """A stream sink: called with each ``(namespace, mode, payload)`` chunk of
    the ``modes`` it asked for."""

    __slots__ = ("modes", "send")

    def __init__(
        self, __call__: Callable[[StreamChunk], None], modes: set[StreamMode]
    ) -> None:
        self.send = __call__
        self.modes = modes

    def __call__(self, chunk: StreamChunk) -> None:
        self.send(chunk)

"""The v3 stream protocol's envelope and the transformer extension point.

A :class:`ProtocolEvent` wraps one stream part (``values``, ``updates``,
``custom``...) of a run; a :class:`StreamTransformer` observes those events as a
:class:`~engine.stream._mux.StreamMux` routes them and builds projections
(usually :class:`~engine.stream.stream_channel.StreamChannel` logs) that the run
stream exposes. Pure: no graph imports.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import Any, ClassVar, Literal, NotRequired

from typing_extensions import TypedDict

__all__ = ("ProtocolEvent", "StreamTransformer", "transformer_requires_async")

logger = logging.getLogger(__name__)


class ProtocolEventParams(TypedDict):
    """What an event is about."""

    namespace: list[str]
    """The graph that produced it: ``[]`` for the root, one entry per subgraph level."""
    timestamp: int
    """Wall-clock milliseconds since the epoch; order events by ``seq`` instead."""
    data: Any
    """The stream part's payload."""
    interrupts: NotRequired[tuple[Any, ...]]
    """On ``values`` events: the interrupts pending with that state."""


class ProtocolEvent(TypedDict):
    """One event of a v3 run stream."""

    type: Literal["event"]
    """Always ``"event"``."""
    event_id: NotRequired[str]
    """An id for the wire, when a server assigns one."""
    seq: NotRequired[int]
    """Position in the root run's event log (1, 2, ...), set when it enters the log."""
    method: str
    """The stream mode (``"values"``, ``"updates"``...), ``"lifecycle"``, or a
    transformer channel's name (``"custom:<name>"`` for non-native transformers)."""
    params: ProtocolEventParams
    """Namespace, timestamp and payload."""


class StreamTransformer(ABC):
    """Observe a run's protocol events and project them into your own streams.

    Subclass it, return your projections from :meth:`init` (a dict; its
    :class:`~engine.stream.stream_channel.StreamChannel` values are bound and,
    when named, forwarded into the main event log as ``custom:<name>`` events),
    and handle events in :meth:`process` (sync runs) or :meth:`aprocess` (async
    runs; it defaults to ``process``). Return False from either to keep the
    event out of the main log. Pass the class (or a ``scope -> transformer``
    factory) to ``compile(transformers=[...])`` or
    ``stream_events(version="v3", transformers=[...])``; it is built once per
    scope (the root, then each subgraph handle).

    Class attributes:
        required_stream_modes: the stream modes the run must produce for this
            transformer; the run asks the graph for the union over all of them.
        requires_async: the transformer needs a running event loop (it calls
            :meth:`schedule`); registering it in a sync run raises. Overriding
            an async hook (``aprocess``, ``afinalize``, ``afail``) implies it
            unless ``supports_sync`` is set.
        supports_sync: the transformer overrides async hooks but also works in
            sync runs.
        before_builtins: register ahead of the built-in transformers, to change
            event content before they read it (observe freely; do not change
            namespaces or task payload fields the lifecycle transformers read).
        _native: its projections also become attributes of the run stream
            (``run.<key>``) and its named channels keep their bare names on the
            wire (no ``custom:`` prefix).
    """

    requires_async: ClassVar[bool] = False
    supports_sync: ClassVar[bool] = False
    required_stream_modes: ClassVar[tuple[str, ...]] = ()
    before_builtins: ClassVar[bool] = False

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        """Args:
        scope: the namespace of the mux this transformer serves (``()`` for the root).
        """
        self.scope: tuple[str, ...] = scope

    @abstractmethod
    def init(self) -> dict[str, Any]:
        """Return the projections, by key (``run.extensions[key]``)."""

    def _on_register(self, mux: Any) -> None:  # noqa: B027 - an optional hook
        """Called once the mux has registered this transformer (default: nothing)."""

    def process(self, event: ProtocolEvent) -> bool:
        """Handle one event in a sync run; False keeps it out of the main log.

        Raises:
            NotImplementedError: neither ``process`` nor ``aprocess`` is overridden.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override process() or aprocess()"
        )

    async def aprocess(self, event: ProtocolEvent) -> bool:
        """Handle one event in an async run (default: :meth:`process`).

        The mux awaits it before the next transformer sees the event, so keep it
        short; use :meth:`schedule` for work whose result need not hold back
        the stream.
        """
        return self.process(event)

    def finalize(self) -> None:  # noqa: B027 - an optional hook
        """The run ended normally (sync). Projection channels are closed for you."""

    async def afinalize(self) -> None:
        """The run ended normally (async), after every scheduled task finished."""
        self.finalize()

    def fail(self, err: BaseException) -> None:  # noqa: B027 - an optional hook
        """The run ended with ``err`` (sync). Projection channels are failed for you."""

    async def afail(self, err: BaseException) -> None:
        """The run ended with ``err`` (async), after scheduled tasks were cancelled."""
        self.fail(err)

    def schedule(
        self,
        coro: Coroutine[Any, Any, Any],
        *,
        on_error: Literal["log", "raise"] = "log",
    ) -> asyncio.Task[Any]:
        """Run ``coro`` alongside the stream; the run waits for it before it closes.

        Args:
            coro: the work; its result usually lands in one of your projections.
            on_error: ``"log"`` logs a failure and carries on; ``"raise"`` makes
                the run's close fail with it.

        Returns:
            The asyncio task.

        Raises:
            RuntimeError: called outside a running event loop (a sync run).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            raise RuntimeError(
                f"{type(self).__name__}.schedule() needs a running event loop: use "
                "astream_events(), and set requires_async = True on the class so "
                "a sync run refuses it when it starts."
            ) from None
        task = asyncio.create_task(_logged(coro) if on_error == "log" else coro)
        tasks = self._scheduled()
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    def _scheduled(self) -> set[asyncio.Task[Any]]:
        # created lazily: subclasses need not call super().__init__()
        tasks: set[asyncio.Task[Any]] | None = self.__dict__.get("_scheduled_tasks")
        if tasks is None:
            tasks = self.__dict__["_scheduled_tasks"] = set()
        return tasks


async def _logged(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except asyncio.CancelledError:
        raise
    except BaseException:
        logger.exception("A scheduled stream transformer task failed")
        return None


def transformer_requires_async(transformer: StreamTransformer) -> bool:
    """True when ``transformer`` can only run in an async run (see :class:`StreamTransformer`)."""
    if transformer.requires_async:
        return True
    if transformer.supports_sync:
        return False
    cls = type(transformer)
    return any(
        getattr(cls, name) is not getattr(StreamTransformer, name)
        for name in ("aprocess", "afinalize", "afail")
    )

"""Graph lifecycle callbacks: be told when a run pauses on interrupts and when it resumes.

Subclass :class:`GraphCallbackHandler` and pass an instance in
``config["callbacks"]``, as with LangGraph::

    class Pager(GraphCallbackHandler):
        def on_interrupt(self, event: GraphInterruptEvent) -> None:
            notify_reviewers(event.checkpoint_id, event.interrupts)

    graph.invoke(inputs, {"configurable": {"thread_id": "1"}, "callbacks": [Pager()]})

langchain-core is optional. When it is installed, :class:`GraphCallbackHandler`
is a LangChain ``BaseCallbackHandler`` (so one handler may also receive
LangChain's callbacks) and ``config["callbacks"]`` may be a LangChain callback
manager; without it, the handler is a plain class and callbacks are a handler or
a sequence of them. The class is made the first time it is asked for
(``engine.callbacks.GraphCallbackHandler``), so importing the engine does not
import LangChain's callbacks: until then no handler exists, and the runs look
for none. Either way only ``GraphCallbackHandler`` instances receive
lifecycle events, and handlers are called as LangChain calls them: a failing
handler is logged and skipped unless its ``raise_error`` is true; a coroutine
method is awaited; the async dispatcher runs sync handlers in a worker thread
unless their ``run_inline`` is true.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import threading
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from uuid import UUID

from engine._internal._typing import RunnableConfig
from engine.types import Interrupt

__all__ = (
    "GraphCallbackHandler",
    "GraphInterruptEvent",
    "GraphLifecycleEvent",
    "GraphLifecycleStatus",
    "GraphResumeEvent",
    "get_async_graph_callback_manager_for_config",
    "get_sync_graph_callback_manager_for_config",
    "is_graph_handler",
)

logger = logging.getLogger(__name__)

GraphLifecycleStatus = Literal[
    "input",
    "pending",
    "done",
    "interrupt_before",
    "interrupt_after",
    "out_of_steps",
]
"""The run loop's status when a lifecycle event is reported."""


@dataclass(frozen=True)
class GraphInterruptEvent:
    """The run paused: ``interrupt()`` calls, or a static breakpoint (no interrupts)."""

    run_id: UUID | None
    """The run's id, when known."""
    status: GraphLifecycleStatus
    """``"pending"`` for ``interrupt()``; ``"interrupt_before"``/``"interrupt_after"``
    for breakpoints."""
    checkpoint_id: str
    """The checkpoint the run paused at."""
    checkpoint_ns: tuple[str, ...]
    """Namespace of the graph that paused (``()`` for the root graph)."""
    interrupts: tuple[Interrupt[Any], ...]
    """What the run waits for; empty at a static breakpoint."""


@dataclass(frozen=True)
class GraphResumeEvent:
    """A run resumed from a saved checkpoint (a graph or a subgraph)."""

    run_id: UUID | None
    """The run's id, when known."""
    status: GraphLifecycleStatus
    """The loop's status when it resumed."""
    checkpoint_id: str
    """The checkpoint it resumed from."""
    checkpoint_ns: tuple[str, ...]
    """Namespace of the graph that resumed (``()`` for the root graph)."""


GraphLifecycleEvent = GraphInterruptEvent | GraphResumeEvent
"""Any graph lifecycle event."""


class _GraphHandlerMethods:
    """Receives graph lifecycle events; override the methods you need (sync or async).

    Attributes ``raise_error`` (re-raise a handler's exception instead of
    logging it) and ``run_inline`` (the async dispatcher calls a sync method on
    the event loop instead of in a worker thread) default to false, as on
    LangChain handlers.
    """

    raise_error: bool = False
    run_inline: bool = False

    def on_interrupt(self, event: GraphInterruptEvent) -> Any:
        """The run paused on interrupts (or at a static breakpoint)."""

    def on_resume(self, event: GraphResumeEvent) -> Any:
        """The run resumed from a saved checkpoint."""


if TYPE_CHECKING:

    class GraphCallbackHandler(_GraphHandlerMethods):
        """Receives graph lifecycle events (see :class:`_GraphHandlerMethods`)."""


_handler_class: type[GraphCallbackHandler] | None = None
"""``GraphCallbackHandler`` once made (see the module's text)."""
_handler_class_lock = threading.Lock()


def _make_handler_class() -> type[GraphCallbackHandler]:
    global _handler_class  # made once, on first use
    with _handler_class_lock:
        if _handler_class is None:
            try:
                from langchain_core.callbacks import (  # noqa: PLC0415 - see above
                    BaseCallbackHandler,
                )

                bases: tuple[type, ...] = (_GraphHandlerMethods, BaseCallbackHandler)
            except ImportError:  # langchain-core is optional
                bases = (_GraphHandlerMethods,)
            _handler_class = type(
                "GraphCallbackHandler",
                bases,
                {
                    "__module__": __name__,
                    "__qualname__": "GraphCallbackHandler",
                    "__doc__": _GraphHandlerMethods.__doc__,
                },
            )
        return _handler_class


def __getattr__(name: str) -> Any:
    if name == "GraphCallbackHandler":
        return _handler_class or _make_handler_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_graph_handler(obj: object) -> bool:
    """Whether ``obj`` is a :class:`GraphCallbackHandler` (never makes the class:
    before it is made, nothing is one)."""
    cls = _handler_class
    return cls is not None and isinstance(obj, cls)


_KEEP: Any = object()


def _graph_handlers(handlers: Sequence[Any]) -> list[GraphCallbackHandler]:
    return [h for h in handlers if is_graph_handler(h)]


class _GraphCallbackManagerBase:
    """Graph handlers plus the fields LangChain's callback managers carry."""

    is_async = False

    def __init__(
        self,
        handlers: Sequence[GraphCallbackHandler] | None = None,
        inheritable_handlers: Sequence[GraphCallbackHandler] | None = None,
        parent_run_id: UUID | None = None,
        *,
        tags: list[str] | None = None,
        inheritable_tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inheritable_metadata: dict[str, Any] | None = None,
        run_id: UUID | None = None,
    ) -> None:
        self.handlers: list[GraphCallbackHandler] = list(handlers or ())
        self.inheritable_handlers: list[GraphCallbackHandler] = list(
            inheritable_handlers or ()
        )
        self.parent_run_id = parent_run_id
        self.tags = list(tags or ())
        self.inheritable_tags = list(inheritable_tags or ())
        self.metadata = dict(metadata or {})
        self.inheritable_metadata = dict(inheritable_metadata or {})
        self.run_id = run_id

    def copy(self, *, run_id: UUID | None | Any = _KEEP) -> Any:
        """The same handlers, bound to ``run_id`` (kept when omitted)."""
        if run_id is _KEEP:
            run_id = self.run_id
        elif run_id is not None and not isinstance(run_id, UUID):
            raise TypeError("run_id must be a UUID or None")
        return _from_manager(type(self), self, run_id)

    @classmethod
    def configure(
        cls, callbacks: object | None = None, *, run_id: UUID | None = None
    ) -> Any:
        """A manager from ``config["callbacks"]``: ``None``, a handler, a sequence of
        handlers, or a callback manager (ours or LangChain's).

        Raises:
            TypeError: anything else (a string, say).
        """
        if callbacks is None:
            return cls(run_id=run_id)
        if isinstance(callbacks, cls):
            return callbacks.copy(run_id=run_id)
        if is_graph_handler(callbacks):
            return cls([callbacks], run_id=run_id)  # type: ignore[list-item]
        if hasattr(callbacks, "handlers") and hasattr(
            callbacks, "inheritable_handlers"
        ):
            return _from_manager(cls, callbacks, run_id)
        if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, Sequence):
            raise TypeError("callbacks must be a handler, sequence, or manager")
        return cls(_graph_handlers(list(callbacks)), run_id=run_id)


_ManagerT = TypeVar("_ManagerT", bound=_GraphCallbackManagerBase)


def _from_manager(cls: type[_ManagerT], manager: Any, run_id: UUID | None) -> _ManagerT:
    return cls(
        _graph_handlers(manager.handlers),
        _graph_handlers(manager.inheritable_handlers),
        getattr(manager, "parent_run_id", None),
        tags=list(getattr(manager, "tags", ()) or ()),
        inheritable_tags=list(getattr(manager, "inheritable_tags", ()) or ()),
        metadata=dict(getattr(manager, "metadata", {}) or {}),
        inheritable_metadata=dict(getattr(manager, "inheritable_metadata", {}) or {}),
        run_id=run_id,
    )


def _failed(handler: GraphCallbackHandler, event_name: str, exc: Exception) -> None:
    logger.warning(
        "Error in %s.%s callback: %r", type(handler).__name__, event_name, exc
    )
    if handler.raise_error:
        raise exc


def _run_coroutine(coro: Awaitable[Any]) -> None:
    """Finish an async handler from sync code, on a thread when a loop is running."""

    async def wait() -> None:
        await coro

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(wait())
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        context = contextvars.copy_context()
        pool.submit(context.run, asyncio.run, wait()).result()


def _dispatch(
    handlers: Sequence[GraphCallbackHandler], event_name: str, event: Any
) -> None:
    for handler in handlers:
        try:
            result = getattr(handler, event_name)(event)
            if asyncio.iscoroutine(result):
                _run_coroutine(result)
        except Exception as exc:
            _failed(handler, event_name, exc)


async def _adispatch_one(
    handler: GraphCallbackHandler, event_name: str, event: Any
) -> None:
    method = getattr(handler, event_name)
    try:
        if asyncio.iscoroutinefunction(method):
            await method(event)
            return
        if handler.run_inline:
            result = method(event)
        else:
            context = contextvars.copy_context()
            result = await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(context.run, method, event)
            )
        if asyncio.iscoroutine(result):
            await result
    except Exception as exc:
        _failed(handler, event_name, exc)


async def _adispatch(
    handlers: Sequence[GraphCallbackHandler], event_name: str, event: Any
) -> None:
    for handler in handlers:
        if handler.run_inline:
            await _adispatch_one(handler, event_name, event)
    await asyncio.gather(
        *(
            _adispatch_one(handler, event_name, event)
            for handler in handlers
            if not handler.run_inline
        )
    )


class _GraphCallbackManager(_GraphCallbackManagerBase):
    """Calls the graph handlers of a sync run."""

    def on_interrupt(self, event: GraphInterruptEvent) -> None:
        _dispatch(self.handlers, "on_interrupt", event)

    def on_resume(self, event: GraphResumeEvent) -> None:
        _dispatch(self.handlers, "on_resume", event)


class _AsyncGraphCallbackManager(_GraphCallbackManagerBase):
    """Calls the graph handlers of an async run."""

    is_async = True

    async def on_interrupt(self, event: GraphInterruptEvent) -> None:
        await _adispatch(self.handlers, "on_interrupt", event)

    async def on_resume(self, event: GraphResumeEvent) -> None:
        await _adispatch(self.handlers, "on_resume", event)


def get_sync_graph_callback_manager_for_config(
    config: RunnableConfig, *, run_id: UUID | None = None
) -> _GraphCallbackManager:
    """The dispatcher for ``config["callbacks"]``'s graph handlers, bound to ``run_id``.

    Raises:
        TypeError: ``config["callbacks"]`` is not a handler, sequence or manager.
    """
    manager: _GraphCallbackManager = _GraphCallbackManager.configure(
        config.get("callbacks"), run_id=run_id
    )
    return manager


def get_async_graph_callback_manager_for_config(
    config: RunnableConfig, *, run_id: UUID | None = None
) -> _AsyncGraphCallbackManager:
    """Async twin of :func:`get_sync_graph_callback_manager_for_config`."""
    manager: _AsyncGraphCallbackManager = _AsyncGraphCallbackManager.configure(
        config.get("callbacks"), run_id=run_id
    )
    return manager

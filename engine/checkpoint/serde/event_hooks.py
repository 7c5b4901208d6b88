"""Listeners told when the serializer refuses to load a stored class.

Register a callable with :func:`register_serde_event_listener` to count or log
refusals (a class stored by an older version of the app that is no longer
registered, data tampered with...). Each event is a :class:`SerdeEvent`:

- ``kind``: ``"msgpack_blocked"``: a stored value names a class that is not
  allowed, so it was not built (the serializer raised, or in lenient mode
  returned an ``UnknownObject``). The name is LangGraph's, kept so listeners
  written for LangGraph work unchanged, although payloads here are JSON.
  LangGraph's other kinds (``msgpack_unregistered_allowed``,
  ``msgpack_method_blocked``) never occur: unregistered classes are never
  loaded, and no stored data names a method to call.
- ``module`` and ``name``: the refused class's module and qualified name.

A listener that raises is logged and does not stop the others, nor the
serializer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import NotRequired, TypedDict

__all__ = (
    "SerdeEvent",
    "SerdeEventListener",
    "emit_serde_event",
    "register_serde_event_listener",
)

logger = logging.getLogger(__name__)


class SerdeEvent(TypedDict):
    """Something the serializer did that a listener may want to know."""

    kind: str
    module: str
    name: str
    method: NotRequired[str]


SerdeEventListener = Callable[[SerdeEvent], None]

_listeners: list[SerdeEventListener] = []
_lock = threading.Lock()


def register_serde_event_listener(listener: SerdeEventListener) -> Callable[[], None]:
    """Call ``listener`` with every serializer event from now on; returns a
    function that unregisters it (calling that twice is harmless)."""
    with _lock:
        _listeners.append(listener)

    def unregister() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unregister


def emit_serde_event(event: SerdeEvent) -> None:
    """Tell every registered listener about ``event``, in registration order."""
    with _lock:
        listeners = tuple(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            logger.warning("A serde event listener failed on %r", event, exc_info=True)

"""Serializer protocol. Knows nothing of storage."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ("SerializerProtocol",)


@runtime_checkable
class SerializerProtocol(Protocol):
    """Turns values into ``(type_tag, payload)`` and back."""

    def dumps_typed(self, obj: Any, /) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes], /) -> Any: ...

"""Serializer and cipher protocols, and the adapter for untyped serializers.

Knows nothing of storage. A saver stores what a :class:`SerializerProtocol`
makes: ``(type_tag, payload)`` pairs. Older serializers offer only
``dumps``/``loads`` (:class:`UntypedSerializerProtocol`); savers wrap those in
:class:`SerializerCompat` (see :func:`maybe_add_typed_methods`). A
:class:`CipherProtocol` encrypts payloads for
``engine.checkpoint.serde.encrypted.EncryptedSerializer``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = (
    "CipherProtocol",
    "SerializerCompat",
    "SerializerProtocol",
    "UntypedSerializerProtocol",
    "maybe_add_typed_methods",
)


class UntypedSerializerProtocol(Protocol):
    """Turns values into bytes and back, without a type tag."""

    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


@runtime_checkable
class SerializerProtocol(Protocol):
    """Turns values into ``(type_tag, payload)`` and back."""

    def dumps_typed(self, obj: Any, /) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes], /) -> Any: ...


class SerializerCompat(SerializerProtocol):
    """A typed serializer over an untyped one.

    The tag written is the value's class name (for people reading the table);
    loading ignores it and hands the payload to ``serde.loads``, which must
    know the format on its own.
    """

    def __init__(self, serde: UntypedSerializerProtocol) -> None:
        self.serde = serde

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return type(obj).__name__, self.serde.dumps(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.serde.loads(data[1])


def maybe_add_typed_methods(
    serde: SerializerProtocol | UntypedSerializerProtocol,
) -> SerializerProtocol:
    """``serde`` itself when it has ``dumps_typed``/``loads_typed``; otherwise it
    wrapped in :class:`SerializerCompat`."""
    if isinstance(serde, SerializerProtocol):
        return serde
    return SerializerCompat(serde)


class CipherProtocol(Protocol):
    """Encrypts and decrypts payloads, naming the cipher it used."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        """``(cipher_name, ciphertext)`` of ``plaintext``."""
        ...

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        """The plaintext of ``ciphertext`` made by the cipher ``ciphername``.

        Must raise, never return garbage, when the key is wrong or the
        ciphertext was altered.
        """
        ...

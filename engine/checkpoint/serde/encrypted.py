"""EncryptedSerializer: encrypt every payload a saver stores.

Wraps a serializer (tagged JSON by default) and a :class:`CipherProtocol`. A
value is serialized, then its payload encrypted; the stored type tag is the
inner tag and the cipher name joined by ``+`` (``"json+aes"``), so a reader
knows both how to decrypt and how to decode. Any saver takes it::

    serde = EncryptedSerializer.from_pycryptodome_aes()  # key from LANGGRAPH_AES_KEY
    saver = SqliteSaver.from_conn_string("checkpoints.db", serde=serde)

Checkpoints, metadata, channel values and pending writes are all encrypted;
ids, namespaces, channel names and versions stay readable (they address the
data). Metadata filters still work: the savers check them after decrypting.

A payload stored without encryption (a type tag without ``+``) is read as
plain data, so encryption can be turned on for an existing database; new
writes are encrypted. A wrong key, or altered data, raises
:class:`DecryptionError`: never a wrong value.

AES needs the optional ``cryptography`` package (the ``encryption`` extra).
"""

from __future__ import annotations

import os
from typing import Any

from engine.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import SerializationError

__all__ = ("AES_KEY_ENV", "DecryptionError", "EncryptedSerializer")

AES_KEY_ENV = "LANGGRAPH_AES_KEY"
"""Environment variable :meth:`EncryptedSerializer.from_pycryptodome_aes` reads
the key from when none is given (its text, UTF-8 encoded: 16, 24 or 32 bytes)."""

_EAX = 9
"""PyCryptodome's ``AES.MODE_EAX``, the one mode accepted as ``mode=``."""


class DecryptionError(SerializationError):
    """Stored data could not be decrypted: wrong key, other cipher, or altered data."""


class EncryptedSerializer(SerializerProtocol):
    """Serialize with ``serde``, then encrypt the payload with ``cipher``.

    Args:
        cipher: encrypts and decrypts payloads (see :class:`CipherProtocol`).
        serde: the serializer whose payloads are encrypted (default: tagged JSON).
    """

    def __init__(
        self, cipher: CipherProtocol, serde: SerializerProtocol | None = None
    ) -> None:
        self.cipher = cipher
        self.serde: SerializerProtocol = (
            serde if serde is not None else JsonPlusSerializer()
        )

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_tag, payload = self.serde.dumps_typed(obj)
        cipher_name, ciphertext = self.cipher.encrypt(payload)
        return f"{type_tag}+{cipher_name}", ciphertext

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, payload = data
        if "+" not in tag:  # stored before encryption was turned on
            return self.serde.loads_typed(data)
        type_tag, cipher_name = tag.split("+", 1)
        plaintext = self.cipher.decrypt(cipher_name, payload)
        return self.serde.loads_typed((type_tag, plaintext))

    @classmethod
    def from_pycryptodome_aes(
        cls, serde: SerializerProtocol | None = None, **kwargs: Any
    ) -> EncryptedSerializer:
        """An EncryptedSerializer using AES in EAX mode (cipher name ``"aes"``).

        LangGraph's constructor name and payload layout (nonce, tag,
        ciphertext), implemented with the ``cryptography`` package rather than
        PyCryptodome.

        Args:
            serde: the serializer whose payloads are encrypted (default: tagged JSON).
            key: the AES key, 16, 24 or 32 bytes; by default the UTF-8 bytes of
                the ``LANGGRAPH_AES_KEY`` environment variable.
            mode: only EAX (``None``, or PyCryptodome's ``AES.MODE_EAX``).

        Raises:
            ImportError: ``cryptography`` is not installed.
            ValueError: no key, a key of the wrong length, or another mode.
            TypeError: other keyword arguments.
        """
        try:
            from engine.checkpoint.serde._aes_eax import (  # noqa: PLC0415 - optional dependency
                AesEaxCipher,
            )
        except ImportError as exc:
            raise ImportError(
                "AES encryption needs the 'cryptography' package: install it with "
                "pip install 'graph-studio[encryption]' (or pip install cryptography)."
            ) from exc
        mode = kwargs.pop("mode", None)
        if mode is not None and mode != _EAX:
            raise ValueError(
                f"Only AES in EAX mode is supported (mode=None), got mode={mode!r}."
            )
        if "key" in kwargs:
            key = kwargs.pop("key")
        else:
            text = os.getenv(AES_KEY_ENV)
            if text is None:
                raise ValueError(
                    f"No AES key: pass key=... or set the {AES_KEY_ENV} environment "
                    "variable (16, 24 or 32 characters)."
                )
            key = text.encode()
            if len(key) not in (16, 24, 32):
                raise ValueError(
                    f"{AES_KEY_ENV} must be 16, 24 or 32 bytes long, got {len(key)}."
                )
        if kwargs:
            raise TypeError(
                "Unsupported AES options: "
                + ", ".join(sorted(kwargs))
                + " (only key and mode are accepted)"
            )
        return cls(AesEaxCipher(key), serde)

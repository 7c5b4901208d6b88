"""AES in EAX mode (authenticated encryption), built on the ``cryptography`` package.

EAX is what LangGraph's ``EncryptedSerializer.from_pycryptodome_aes`` uses by
default, so payloads have the same layout: a 16-byte random nonce, the 16-byte
tag, then the ciphertext; the cipher is named ``"aes"``. ``cryptography`` has
no EAX mode, so it is composed here from the two primitives the EAX paper
(Bellare, Rogaway, Wagner, 2004) defines it with, both from ``cryptography``:
OMAC (CMAC) and CTR mode::

    N' = OMAC(0 || nonce)    H' = OMAC(1 || header)
    C  = AES-CTR(key, initial counter N', message)
    C' = OMAC(2 || C)        tag = N' xor H' xor C'

where ``t ||`` prefixes a block holding the number ``t``. The tag is checked in
constant time before anything is decrypted. Importing this module needs
``cryptography``.
"""

from __future__ import annotations

import hmac
import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.cmac import CMAC

from engine.checkpoint.serde.base import CipherProtocol
from engine.checkpoint.serde.encrypted import DecryptionError

__all__ = (
    "CIPHER_NAME",
    "KEY_SIZES",
    "NONCE_SIZE",
    "TAG_SIZE",
    "AesEaxCipher",
    "eax_decrypt",
    "eax_encrypt",
)

CIPHER_NAME = "aes"
KEY_SIZES = (16, 24, 32)
NONCE_SIZE = 16
TAG_SIZE = 16
_BLOCK = 16


def _omac(key: bytes, domain: int, data: bytes) -> bytes:
    mac = CMAC(algorithms.AES(key))
    mac.update(bytes(_BLOCK - 1) + bytes((domain,)) + data)
    return mac.finalize()


def _ctr(key: bytes, counter: bytes, data: bytes) -> bytes:
    cipher = Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor()
    return cipher.update(data) + cipher.finalize()


def _xor(*blocks: bytes) -> bytes:
    result = 0
    for block in blocks:
        result ^= int.from_bytes(block)
    return result.to_bytes(_BLOCK)


def eax_encrypt(
    key: bytes, nonce: bytes, plaintext: bytes, header: bytes = b""
) -> tuple[bytes, bytes]:
    """``(ciphertext, tag)`` of ``plaintext`` under ``key`` and ``nonce``."""
    counter = _omac(key, 0, nonce)
    ciphertext = _ctr(key, counter, plaintext)
    tag = _xor(counter, _omac(key, 1, header), _omac(key, 2, ciphertext))
    return ciphertext, tag


def eax_decrypt(
    key: bytes, nonce: bytes, ciphertext: bytes, tag: bytes, header: bytes = b""
) -> bytes:
    """The plaintext, after checking ``tag``; :class:`DecryptionError` when it
    does not match (wrong key, or altered nonce, tag or ciphertext)."""
    counter = _omac(key, 0, nonce)
    expected = _xor(counter, _omac(key, 1, header), _omac(key, 2, ciphertext))
    if len(tag) != TAG_SIZE or not hmac.compare_digest(expected, tag):
        raise DecryptionError(
            "Cannot decrypt stored data: the key is wrong or the data was altered "
            "(AES-EAX authentication tag mismatch)."
        )
    return _ctr(key, counter, ciphertext)


class AesEaxCipher(CipherProtocol):
    """The ``"aes"`` cipher: AES-EAX with a fresh random nonce per payload.

    Args:
        key: 16, 24 or 32 bytes (AES-128, -192 or -256).
    """

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"The AES key must be bytes, not {type(key).__name__} "
                "(encode a text key first, e.g. key.encode())."
            )
        key = bytes(key)
        if len(key) not in KEY_SIZES:
            raise ValueError(
                f"The AES key must be 16, 24 or 32 bytes long, got {len(key)} bytes."
            )
        self._key = key

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(NONCE_SIZE)
        ciphertext, tag = eax_encrypt(self._key, nonce, plaintext)
        return CIPHER_NAME, nonce + tag + ciphertext

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if ciphername != CIPHER_NAME:
            raise DecryptionError(
                f"Cannot decrypt stored data encrypted with cipher {ciphername!r}: "
                f"this serializer's cipher is {CIPHER_NAME!r}."
            )
        data = bytes(ciphertext)
        if len(data) < NONCE_SIZE + TAG_SIZE:
            raise DecryptionError(
                f"Cannot decrypt stored data: {len(data)} bytes is shorter than an "
                "AES-EAX nonce and tag (the data was truncated or altered)."
            )
        nonce = data[:NONCE_SIZE]
        tag = data[NONCE_SIZE : NONCE_SIZE + TAG_SIZE]
        return eax_decrypt(self._key, nonce, data[NONCE_SIZE + TAG_SIZE :], tag)

"""A deterministic fake embedding for store tests: a bag of words hashed into ``DIMS``.

Texts that share words point in similar directions; the cosine of two texts without
a shared word is 0 (unless two words collide, which the test vocabulary avoids).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

__all__ = ("DIMS", "CountingEmbed", "aembed_words", "embed_words", "word_vector")

DIMS = 256


def word_vector(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in re.findall(r"[a-z]+", text.lower()):
        slot = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIMS
        vector[slot] += 1.0
    return vector


def embed_words(texts: Sequence[str]) -> list[list[float]]:
    return [word_vector(text) for text in texts]


async def aembed_words(texts: Sequence[str]) -> list[list[float]]:
    return embed_words(texts)


class CountingEmbed:
    """``embed_words`` that records every call's texts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return embed_words(texts)

"""Embeddings for semantic search: the interface stores call, and how to get one.

A store configured with ``index={"dims": ..., "embed": ...}`` turns text into vectors
through an :class:`Embeddings` object. :func:`ensure_embeddings` makes one from what a
user passes as ``embed``:

* an :class:`Embeddings` instance, or any object with LangChain's four methods
  (``embed_documents``, ``embed_query``, ``aembed_documents``, ``aembed_query``),
  such as a ``langchain_core`` ``Embeddings``: used as it is;
* a plain function ``texts -> vectors``, sync or async: wrapped;
* a ``"provider:model"`` string: built by LangChain's ``init_embeddings`` (needs the
  ``langchain`` package and the provider's package).

The engine does not depend on LangChain: the interface is duck-typed, so LangChain
objects satisfy it without this module importing them.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any, cast

__all__ = (
    "AEmbeddingsFunc",
    "Embeddings",
    "EmbeddingsFunc",
    "FunctionEmbeddings",
    "ensure_embeddings",
)

EmbeddingsFunc = Callable[[Sequence[str]], list[list[float]]]
"""A function embedding texts: one vector (list of floats) per text, same length each."""

AEmbeddingsFunc = Callable[[Sequence[str]], Awaitable[list[list[float]]]]
"""The async form of :data:`EmbeddingsFunc`."""

_METHODS = ("embed_documents", "embed_query", "aembed_documents", "aembed_query")


class Embeddings(ABC):
    """Turns text into vectors. LangChain's ``Embeddings`` interface, without LangChain.

    Implement :meth:`embed_documents` and :meth:`embed_query`; the async twins run
    them in a worker thread unless overridden. ``isinstance(obj, Embeddings)`` is
    also true for any object that has all four methods (a LangChain embeddings
    object, for instance), so those are accepted as they are.
    """

    @abstractmethod
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""

    @abstractmethod
    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Async twin of :meth:`embed_documents` (a worker thread by default)."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Async twin of :meth:`embed_query` (a worker thread by default)."""
        return await asyncio.to_thread(self.embed_query, text)

    @classmethod
    def __subclasshook__(cls, other: type) -> bool | Any:
        if cls is not Embeddings:
            return NotImplemented
        if all(callable(getattr(other, name, None)) for name in _METHODS):
            return True
        return NotImplemented


class FunctionEmbeddings(Embeddings):
    """:class:`Embeddings` over one function ``texts -> vectors``, sync or async.

    A sync function serves both the sync and the async methods (the async ones in a
    worker thread). An async function serves the async methods; the sync ones then
    run it to completion on a private event loop, which works from any thread that
    is not running an event loop, and raise a clear error on one that is.
    """

    __slots__ = ("func", "is_async")

    def __init__(self, func: EmbeddingsFunc | AEmbeddingsFunc) -> None:
        if not callable(func):
            raise TypeError(
                f"embed must be a function texts -> vectors, got {type(func).__name__}."
            )
        self.func = func
        self.is_async = _is_async_callable(func)

    def __repr__(self) -> str:
        name = getattr(self.func, "__qualname__", type(self.func).__name__)
        return f"FunctionEmbeddings({name})"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.is_async:
            return cast("EmbeddingsFunc", self.func)(texts)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aembed_documents(texts))
        raise RuntimeError(
            "The store's embedding function is async, and a sync store method was "
            "called on a running event loop. Use the async methods (aput, asearch) "
            "there, or give the store a sync embedding function."
        )

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.is_async:
            return await cast("AEmbeddingsFunc", self.func)(texts)
        return await asyncio.to_thread(cast("EmbeddingsFunc", self.func), texts)

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.aembed_documents([text]))[0]


def ensure_embeddings(
    embed: Embeddings | EmbeddingsFunc | AEmbeddingsFunc | str | None,
) -> Embeddings:
    """An :class:`Embeddings` for ``embed`` (see the module docstring for the forms).

    Raises:
        ValueError: ``embed`` is missing, or a ``"provider:model"`` string while
            LangChain's ``init_embeddings`` cannot be imported (the message says
            what to install).
        TypeError: ``embed`` is none of the accepted forms.
    """
    if embed is None:
        raise ValueError(
            "An index needs an embedding: pass embed= as an Embeddings object, a "
            "function texts -> vectors, or a 'provider:model' string."
        )
    if isinstance(embed, str):
        return _from_provider_string(embed)
    if isinstance(embed, Embeddings):
        return embed
    if callable(embed):
        return FunctionEmbeddings(embed)
    raise TypeError(
        f"embed must be an Embeddings object, a function texts -> vectors or a "
        f"'provider:model' string, got {type(embed).__name__}."
    )


def _from_provider_string(name: str) -> Embeddings:
    try:
        init_embeddings = import_module("langchain.embeddings").init_embeddings
    except (ImportError, AttributeError):
        try:
            found = f"langchain {version('langchain')} is installed but has no init_embeddings"
        except PackageNotFoundError:
            found = "langchain is not installed"
        raise ValueError(
            f"Cannot make embeddings from {name!r}: {found}. A 'provider:model' "
            "string needs langchain>=0.3.9 and the provider's package (e.g. "
            "pip install 'langchain>=0.3.9' langchain-openai). Or pass an Embeddings "
            "object or a function texts -> vectors."
        ) from None
    made = init_embeddings(name)
    if not isinstance(made, Embeddings):
        raise TypeError(f"init_embeddings({name!r}) returned {made!r}, not embeddings.")
    return made


def _is_async_callable(func: object) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 (objects with async __call__)
    return call is not None and inspect.iscoroutinefunction(call)

"""ensure_embeddings: functions (sync and async), Embeddings objects, provider strings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from engine.store.base import Embeddings, ensure_embeddings
from engine.store.base.embed import FunctionEmbeddings


def embed(texts: Sequence[str]) -> list[list[float]]:
    return [[float(len(text)), 1.0] for text in texts]


async def aembed(texts: Sequence[str]) -> list[list[float]]:
    return embed(texts)


def test_a_sync_function_serves_sync_and_async_calls() -> None:
    embeddings = ensure_embeddings(embed)

    assert isinstance(embeddings, FunctionEmbeddings)
    assert embeddings.embed_documents(["ab", "c"]) == [[2.0, 1.0], [1.0, 1.0]]
    assert embeddings.embed_query("abc") == [3.0, 1.0]
    assert asyncio.run(embeddings.aembed_query("abcd")) == [4.0, 1.0]


def test_an_async_function_serves_async_calls_and_sync_ones_off_the_loop() -> None:
    embeddings = ensure_embeddings(aembed)

    assert asyncio.run(embeddings.aembed_documents(["ab"])) == [[2.0, 1.0]]
    assert embeddings.embed_query("abc") == [3.0, 1.0]


def test_an_async_function_called_sync_on_a_running_loop_explains() -> None:
    embeddings = ensure_embeddings(aembed)

    async def call_sync() -> None:
        embeddings.embed_query("x")

    with pytest.raises(RuntimeError, match="async methods"):
        asyncio.run(call_sync())


def test_an_object_with_async_call_is_async() -> None:
    class Model:
        async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
            return embed(texts)

    embeddings = ensure_embeddings(Model())

    assert isinstance(embeddings, FunctionEmbeddings) and embeddings.is_async


def test_embeddings_objects_are_used_as_they_are() -> None:
    class Mine(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embed(texts)

        def embed_query(self, text: str) -> list[float]:
            return embed([text])[0]

    mine = Mine()

    assert ensure_embeddings(mine) is mine
    assert asyncio.run(mine.aembed_query("ab")) == [2.0, 1.0]


def test_duck_typed_embeddings_such_as_langchains_are_accepted() -> None:
    class LangChainLike:
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embed(texts)

        def embed_query(self, text: str) -> list[float]:
            return [0.0]

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return embed(texts)

        async def aembed_query(self, text: str) -> list[float]:
            return [0.0]

    duck = LangChainLike()

    assert isinstance(duck, Embeddings)
    assert ensure_embeddings(duck) is duck  # type: ignore[arg-type]


def test_a_langchain_core_embeddings_object_is_accepted() -> None:
    base = pytest.importorskip("langchain_core.embeddings").Embeddings

    class Model(base):  # type: ignore[misc, valid-type]
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embed(texts)

        def embed_query(self, text: str) -> list[float]:
            return embed([text])[0]

    model = Model()

    assert ensure_embeddings(model) is model
    assert asyncio.run(ensure_embeddings(model).aembed_query("abc")) == [3.0, 1.0]


def test_a_provider_string_without_langchain_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys  # noqa: PLC0415

    monkeypatch.setitem(sys.modules, "langchain.embeddings", None)

    with pytest.raises(ValueError, match="pip install 'langchain>=0.3.9'"):
        ensure_embeddings("openai:text-embedding-3-small")


@pytest.mark.parametrize(("embed_arg", "error"), [(None, ValueError), (42, TypeError)])
def test_missing_or_unusable_embed_is_refused(embed_arg: object, error: type) -> None:
    with pytest.raises(error, match="embed"):
        ensure_embeddings(embed_arg)  # type: ignore[arg-type]

"""Semantic search (``index=``) on every store: what is embedded, how queries rank.

The embedding is ``tests._support.embeddings``: a bag of hashed words, so a query
is closest to the field sharing the most of its words. The vocabulary below has no
hash collisions.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from engine.store.base import BaseStore, IndexConfig, InvalidStoreInputError, PutOp
from engine.store.memory import InMemoryStore
from engine.store.postgres import AsyncPostgresStore, PostgresStore
from engine.store.sqlite import AsyncSqliteStore, SqliteStore
from tests._support.embeddings import (
    DIMS,
    CountingEmbed,
    aembed_words,
    embed_words,
    word_vector,
)
from tests._support.postgres import fresh_database, pg_dsn

POSTGRES = pytest.mark.postgres
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=POSTGRES)]

MakeStore = Callable[..., AbstractContextManager[BaseStore]]


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """``make_store(**index_settings)``: a context manager giving an indexed store."""

    def make(**settings: Any) -> AbstractContextManager[BaseStore]:
        index = IndexConfig(dims=DIMS, embed=embed_words, **settings)  # type: ignore[typeddict-item]
        if request.param == "memory":
            return nullcontext(InMemoryStore(index=index))
        if request.param == "sqlite":
            return SqliteStore.from_conn_string(str(tmp_path / "s.sqlite"), index=index)
        return _postgres(index)

    yield make


class _postgres(AbstractContextManager[BaseStore]):
    def __init__(self, index: IndexConfig) -> None:
        self.index = index

    def __enter__(self) -> BaseStore:
        self.db = fresh_database(pg_dsn())
        dsn = self.db.__enter__()
        self.cm = PostgresStore.from_conn_string(dsn, index=self.index, max_size=2)
        store = self.cm.__enter__()
        store.setup()
        return store

    def __exit__(self, *exc: object) -> None:
        self.cm.__exit__(None, None, None)
        self.db.__exit__(None, None, None)


@pytest.fixture
def store(make_store: MakeStore) -> Iterator[BaseStore]:
    with make_store(fields=["text"]) as indexed:
        yield indexed


def keys(items: list[Any]) -> list[str]:
    return [item.key for item in items]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.hypot(*a) * math.hypot(*b))


# -- ranking ------------------------------------------------------------------------------


def test_query_ranks_by_cosine_similarity_of_the_indexed_field(
    store: BaseStore,
) -> None:
    store.put(("docs",), "pie", {"text": "apple pie recipe"})
    store.put(("docs",), "car", {"text": "red car engine"})
    store.put(("docs",), "bread", {"text": "banana bread recipe"})

    items = store.search(("docs",), query="apple recipe")

    assert keys(items) == ["pie", "bread", "car"]
    expected = cosine(word_vector("apple recipe"), word_vector("apple pie recipe"))
    assert items[0].score == pytest.approx(expected)
    assert items[2].score == pytest.approx(0.0)


def test_only_the_configured_fields_are_embedded(store: BaseStore) -> None:
    store.put(("docs",), "a", {"text": "blue boat", "other": "apple apple apple"})
    store.put(("docs",), "b", {"text": "apple cake"})

    assert keys(store.search(("docs",), query="apple")) == ["b", "a"]


def test_each_array_element_is_embedded_and_the_best_one_scores(
    make_store: MakeStore,
) -> None:
    with make_store(fields=["items[*].title"]) as store:
        store.put(
            ("docs",), "many", {"items": [{"title": "red car"}, {"title": "fish soup"}]}
        )
        store.put(("docs",), "one", {"items": [{"title": "fish cake green tree"}]})

        items = store.search(("docs",), query="fish soup")

    assert keys(items) == ["many", "one"]
    assert items[0].score == pytest.approx(1.0)


def test_nested_paths_and_the_whole_document(make_store: MakeStore) -> None:
    with make_store(fields=["meta.title"]) as store:
        store.put(("docs",), "a", {"meta": {"title": "quick brown fox"}})
        store.put(("docs",), "b", {"meta": {"title": "dog"}})
        assert keys(store.search(("docs",), query="fox")) == ["a", "b"]
    with make_store() as whole:  # fields default to ["$"]
        whole.put(("docs",), "a", {"x": "sea boat"})
        whole.put(("docs",), "b", {"x": "green tree"})
        assert keys(whole.search(("docs",), query="tree")) == ["b", "a"]


def test_index_false_items_come_after_ranked_ones_without_score(
    store: BaseStore,
) -> None:
    store.put(("docs",), "hidden", {"text": "apple pie"}, index=False)
    store.put(("docs",), "shown", {"text": "red car"})

    items = store.search(("docs",), query="apple pie")

    assert [(i.key, i.score is None) for i in items] == [
        ("shown", False),
        ("hidden", True),
    ]


def test_put_index_list_overrides_the_store_fields(store: BaseStore) -> None:
    store.put(
        ("docs",), "a", {"text": "red car", "title": "apple pie"}, index=["title"]
    )
    store.put(("docs",), "b", {"text": "apple cake"})

    items = store.search(("docs",), query="apple pie")

    assert keys(items) == ["a", "b"]
    assert items[0].score == pytest.approx(1.0)


def test_updating_an_item_replaces_its_vectors(store: BaseStore) -> None:
    store.put(("docs",), "a", {"text": "apple pie"})
    store.put(("docs",), "b", {"text": "apple"})
    store.put(("docs",), "a", {"text": "red car"})

    assert keys(store.search(("docs",), query="apple pie")) == ["b", "a"]

    store.put(("docs",), "b", {"text": "apple"}, index=False)
    items = store.search(("docs",), query="apple")
    assert [(i.key, i.score is None) for i in items] == [("a", False), ("b", True)]


def test_deleted_items_leave_no_vectors(store: BaseStore) -> None:
    store.put(("docs",), "a", {"text": "apple pie"})
    store.delete(("docs",), "a")
    store.put(("docs",), "a", {"text": "red car"}, index=False)

    (item,) = store.search(("docs",), query="apple pie")
    assert item.score is None


def test_query_combines_with_prefix_filter_and_paging(store: BaseStore) -> None:
    store.put(("docs", "x"), "1", {"text": "apple pie", "n": 1})
    store.put(("docs", "x"), "2", {"text": "apple", "n": 2})
    store.put(("docs", "y"), "3", {"text": "apple pie", "n": 3})
    store.put(("other",), "4", {"text": "apple pie", "n": 4})

    assert keys(store.search(("docs",), query="apple pie")) == ["3", "1", "2"]
    assert keys(
        store.search(("docs",), query="apple pie", filter={"n": {"$lt": 3}})
    ) == [
        "1",
        "2",
    ]
    assert keys(store.search(("docs",), query="apple pie", limit=1, offset=1)) == ["1"]


def test_queries_without_words_still_rank_and_empty_query_does_not(
    store: BaseStore,
) -> None:
    store.put(("docs",), "a", {"text": "apple"})

    (item,) = store.search(("docs",), query="?!")
    assert item.score == 0.0
    assert store.search(("docs",), query="")[0].score is None


def test_puts_in_one_batch_are_embedded_in_one_call() -> None:
    embed = CountingEmbed()
    store = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["t"]})

    store.batch([PutOp(("d",), "a", {"t": "apple"}), PutOp(("d",), "b", {"t": "pie"})])

    assert embed.calls == [["apple", "pie"]]


def test_the_store_exposes_its_index_config_and_embeddings(store: BaseStore) -> None:
    assert store.index_config is not None
    assert store.index_config["dims"] == DIMS
    assert store.embeddings is not None
    assert store.embeddings.embed_query("apple") == word_vector("apple")


@pytest.mark.parametrize(
    ("distance_type", "expected"),
    [
        ("inner_product", [("a", 4.0), ("b", 1.0)]),  # dot products
        ("l2", [("b", -1.0), ("a", -2.0)]),  # minus Euclidean distances
    ],
)
def test_other_distance_types(
    make_store: MakeStore, distance_type: str, expected: list[tuple[str, float]]
) -> None:
    with make_store(fields=["text"], distance_type=distance_type) as store:
        store.put(("docs",), "a", {"text": "apple apple apple pie"})
        store.put(("docs",), "b", {"text": "apple"})

        items = store.search(("docs",), query="apple pie")

    assert [(i.key, i.score) for i in items] == [
        (key, pytest.approx(score)) for key, score in expected
    ]


def test_a_vector_of_the_wrong_length_is_refused() -> None:
    store = InMemoryStore(index={"dims": 3, "embed": embed_words})

    with pytest.raises(
        ValueError, match="256 dimensions; the store's index has dims=3"
    ):
        store.put(("d",), "k", {"t": "apple"})
    assert store.get(("d",), "k") is None


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ({"dims": 0, "embed": embed_words}, "dims"),
        (
            {"dims": 2, "embed": embed_words, "fields": "x", "colour": 1},
            "Unknown index",
        ),
        ({"dims": 2, "embed": embed_words, "fields": [1]}, "fields"),
        (
            {"dims": 2, "embed": embed_words, "distance_type": "manhattan"},
            "distance_type",
        ),
    ],
)
def test_bad_index_settings_are_refused(index: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidStoreInputError, match=message):
        InMemoryStore(index=index)  # type: ignore[arg-type]


# -- async ----------------------------------------------------------------------------------


@pytest.fixture(
    params=["memory", "sqlite-async", pytest.param("postgres-async", marks=POSTGRES)]
)
async def astore(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BaseStore]:
    index = IndexConfig(dims=DIMS, embed=aembed_words, fields=["text"])
    if request.param == "memory":
        yield InMemoryStore(index=index)
    elif request.param == "sqlite-async":
        path = str(tmp_path / "s.sqlite")
        async with AsyncSqliteStore.from_conn_string(path, index=index) as lite:
            yield lite
    else:
        with fresh_database(pg_dsn()) as dsn:
            async with AsyncPostgresStore.from_conn_string(dsn, index=index) as apg:
                await apg.setup()
                yield apg


@pytest.mark.asyncio
async def test_an_async_embedding_function_serves_async_calls(
    astore: BaseStore,
) -> None:
    await astore.aput(("docs",), "pie", {"text": "apple pie"})
    await astore.aput(("docs",), "car", {"text": "red car"})

    items = await astore.asearch(("docs",), query="pie")

    assert keys(items) == ["pie", "car"]
    assert items[0].score == pytest.approx(
        cosine(word_vector("pie"), word_vector("apple pie"))
    )

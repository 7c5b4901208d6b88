"""The async twins (aget, aput, asearch, alist_namespaces, adelete, abatch, asweep_ttl)
on every store, plus AsyncPostgresStore's sync methods called from another thread."""

from __future__ import annotations

import asyncio

import pytest

from engine.store.base import BaseStore, GetOp, InvalidNamespaceError, Item, PutOp

pytestmark = pytest.mark.asyncio


async def test_aput_then_aget(astore: BaseStore) -> None:
    await astore.aput(("users", "alice"), "prefs", {"food": "ramen", "pair": (1, 2)})

    item = await astore.aget(("users", "alice"), "prefs")

    assert item is not None
    assert item.value == {"food": "ramen", "pair": (1, 2)}
    assert item.namespace == ("users", "alice")
    assert await astore.aget(("users", "alice"), "missing") is None


async def test_adelete(astore: BaseStore) -> None:
    await astore.aput(("d",), "k", {"v": 1})

    await astore.adelete(("d",), "k")
    await astore.adelete(("d",), "never")

    assert await astore.aget(("d",), "k") is None


async def test_asearch_with_filter_query_and_paging(astore: BaseStore) -> None:
    await astore.aput(("food",), "a", {"name": "apple", "price": 3})
    await astore.aput(("food",), "b", {"name": "banana", "price": 1})
    await astore.aput(("food",), "c", {"name": "apple pie", "price": 5})

    by_filter = await astore.asearch(("food",), filter={"price": {"$gte": 3}})
    by_query = await astore.asearch((), query="apple pie")
    paged = await astore.asearch((), limit=1, offset=1)

    assert [i.key for i in by_filter] == ["c", "a"]
    assert [(i.key, i.score) for i in by_query] == [("c", 1.0), ("a", 0.5)]
    assert [i.key for i in paged] == ["b"]


async def test_alist_namespaces(astore: BaseStore) -> None:
    for namespace in [("a", "b"), ("a", "c", "d"), ("x",)]:
        await astore.aput(namespace, "k", {})

    assert await astore.alist_namespaces() == [("a", "b"), ("a", "c", "d"), ("x",)]
    assert await astore.alist_namespaces(prefix=("a",), max_depth=2) == [
        ("a", "b"),
        ("a", "c"),
    ]
    assert await astore.alist_namespaces(suffix=("d",)) == [("a", "c", "d")]


async def test_abatch_runs_in_order(astore: BaseStore) -> None:
    results = await astore.abatch(
        [
            PutOp(("d",), "k", {"v": 1}),
            GetOp(("d",), "k"),
            PutOp(("d",), "k", None),
            GetOp(("d",), "k"),
        ]
    )

    assert results[0] is None
    assert isinstance(results[1], Item) and results[1].value == {"v": 1}
    assert results[3] is None


async def test_async_bad_input_is_rejected(astore: BaseStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        await astore.aput(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await astore.asearch(("",))


async def test_async_ttl_and_sweep(astore: BaseStore) -> None:
    await astore.aput(("t",), "short", {"v": 1}, ttl=0.01)
    await astore.aput(("t",), "long", {"v": 1}, ttl=60)

    await asyncio.sleep(0.9)

    assert await astore.aget(("t",), "short") is None
    assert await astore.asweep_ttl() == 1
    assert [i.key for i in await astore.asearch(("t",))] == ["long"]


async def test_async_tenant_views(astore: BaseStore) -> None:
    acme, globex = astore.scoped("acme"), astore.scoped("globex")
    await acme.aput(("docs",), "k", {"owner": "acme"})
    await globex.aput(("docs",), "k", {"owner": "globex"})

    assert [i.value["owner"] for i in await acme.asearch(())] == ["acme"]
    assert await globex.alist_namespaces() == [("docs",)]
    item = await acme.aget(("docs",), "k")
    assert item is not None and item.namespace == ("docs",)


async def test_concurrent_async_writes(astore: BaseStore) -> None:
    await asyncio.gather(*(astore.aput(("n",), f"k{i}", {"i": i}) for i in range(20)))

    assert len(await astore.asearch(("n",), limit=100)) == 20


async def test_sync_methods_work_from_another_thread(astore: BaseStore) -> None:
    await astore.aput(("d",), "k", {"v": 1})

    item = await asyncio.to_thread(astore.get, ("d",), "k")
    await asyncio.to_thread(astore.put, ("d",), "k2", {"v": 2})

    assert item is not None and item.value == {"v": 1}
    assert await astore.aget(("d",), "k2") is not None

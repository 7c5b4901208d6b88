"""TTLs (in minutes, as in LangGraph): expiry on read, refresh on read, sweep_ttl.

TTLs here are fractions of a minute: ``SHORT`` is 0.6 s. The margins are wide
(hundreds of milliseconds) so a slow machine does not make these flaky.
"""

from __future__ import annotations

import time

import pytest

from engine.store.base import BaseStore, InvalidStoreInputError, TTLConfig
from engine.store.memory import InMemoryStore

SHORT = 0.01
"""Minutes: 0.6 seconds."""


def wait(seconds: float) -> None:
    time.sleep(seconds)


def test_stores_support_ttl(store: BaseStore) -> None:
    assert store.supports_ttl is True


def test_an_expired_item_is_gone_from_get_search_and_listing(store: BaseStore) -> None:
    store.put(("t",), "short", {"v": "x"}, ttl=SHORT)
    store.put(("t",), "forever", {"v": "x"})
    store.put(("only", "short"), "k", {"v": "x"}, ttl=SHORT)
    assert store.get(("t",), "short", refresh_ttl=False) is not None

    wait(0.9)

    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["forever"]
    assert [i.key for i in store.search((), query="x")] == ["forever"]
    assert [i.key for i in store.search((), filter={"v": "x"})] == ["forever"]
    assert store.list_namespaces() == [("t",)]


def test_ttl_is_in_minutes(store: BaseStore) -> None:
    store.put(("t",), "k", {"v": 1}, ttl=1)

    wait(0.9)  # longer than SHORT in seconds, far shorter than a minute

    assert store.get(("t",), "k") is not None


def test_reads_push_expiry_back(store: BaseStore) -> None:
    store.put(("t",), "got", {"v": 1}, ttl=SHORT)
    store.put(("t", "s"), "older", {"v": 1}, ttl=SHORT)
    store.put(("t", "s"), "newer", {"v": 1}, ttl=SHORT)
    store.put(("t", "u"), "untouched", {"v": 1}, ttl=SHORT)

    wait(0.4)
    assert store.get(("t",), "got") is not None
    assert [i.key for i in store.search(("t", "s"), limit=1)] == ["newer"]
    wait(0.4)  # 0.8 s after the puts: only what was read is still alive

    assert store.get(("t",), "got", refresh_ttl=False) is not None
    assert store.get(("t", "s"), "newer", refresh_ttl=False) is not None
    assert store.get(("t", "s"), "older", refresh_ttl=False) is None
    assert store.get(("t", "u"), "untouched", refresh_ttl=False) is None


def test_refresh_ttl_false_leaves_expiry_alone(store: BaseStore) -> None:
    store.put(("t",), "k", {"v": 1}, ttl=SHORT)

    wait(0.4)
    assert store.get(("t",), "k", refresh_ttl=False) is not None
    assert len(store.search(("t",), refresh_ttl=False)) == 1
    wait(0.4)

    assert store.get(("t",), "k") is None


def test_put_without_ttl_removes_the_expiry(store: BaseStore) -> None:
    store.put(("t",), "k", {"v": 1}, ttl=SHORT)
    store.put(("t",), "k", {"v": 2}, ttl=None)

    wait(0.9)

    item = store.get(("t",), "k")
    assert item is not None and item.value == {"v": 2}


def test_put_over_an_expired_item_starts_a_new_one(store: BaseStore) -> None:
    store.put(("t",), "k", {"v": 1}, ttl=SHORT)
    first = store.get(("t",), "k", refresh_ttl=False)
    wait(0.9)

    store.put(("t",), "k", {"v": 2})

    second = store.get(("t",), "k")
    assert first is not None and second is not None
    assert second.created_at > first.created_at


def test_sweep_ttl_deletes_expired_items_and_counts_them(store: BaseStore) -> None:
    store.put(("t",), "a", {"v": 1}, ttl=SHORT)
    store.put(("t", "deep"), "b", {"v": 1}, ttl=SHORT)
    store.put(("t",), "c", {"v": 1}, ttl=60)
    store.put(("t",), "d", {"v": 1})

    assert store.sweep_ttl() == 0
    wait(0.9)

    assert store.sweep_ttl() == 2
    assert store.sweep_ttl() == 0
    assert sorted(i.key for i in store.search(())) == ["c", "d"]


def test_default_ttl_from_the_store_config() -> None:
    store = InMemoryStore(ttl=TTLConfig(default_ttl=SHORT, refresh_on_read=False))
    store.put(("t",), "default", {"v": 1})
    store.put(("t",), "explicit-none", {"v": 1}, ttl=None)

    wait(0.4)
    assert store.get(("t",), "default") is not None  # no refresh: refresh_on_read=False
    wait(0.4)

    assert store.get(("t",), "default") is None
    assert store.get(("t",), "explicit-none") is not None


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "5", True])
def test_bad_ttls_are_rejected(store: BaseStore, ttl: object) -> None:
    with pytest.raises(
        InvalidStoreInputError, match="ttl must be a positive number of minutes"
    ):
        store.put(("t",), "k", {"v": 1}, ttl=ttl)  # type: ignore[arg-type]

    assert store.get(("t",), "k") is None

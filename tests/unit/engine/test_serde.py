"""JsonPlusSerializer: JSON with type tags, round trips, and what it refuses to load."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import tracemalloc
import uuid
from decimal import Decimal
from typing import Any, NamedTuple

import orjson
import pydantic
import pytest

from engine.checkpoint.serde.jsonplus import (
    CHUNK_ITEMS,
    JsonPlusSerializer,
    PlainDict,
    UnknownObject,
    is_small_plain,
    plain_keys,
    register_type,
)
from engine.errors import SerializationError
from engine.types import Send


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Item(pydantic.BaseModel):
    sku: str
    qty: int = 1
    tags: list[str] = []


@dataclasses.dataclass
class Order:
    id: str
    items: list[Item]
    color: Color
    placed: dt.datetime


class Point(NamedTuple):
    x: int
    y: int


NOW = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)

VALUES: dict[str, Any] = {
    "none": None,
    "json": {"a": [1, 2.5, "s", True, None]},
    "tuple": (1, "a", (2, 3)),
    "set": {1, 2, 3},
    "frozenset": frozenset({"a", "b"}),
    "bytes": b"\x00\xffraw",
    "bytearray": bytearray(b"abc"),
    "datetime": NOW,
    "naive_datetime": dt.datetime(2026, 1, 2, 3, 4, 5),
    "date": dt.date(2026, 1, 2),
    "time": dt.time(3, 4, 5),
    "timedelta": dt.timedelta(days=1, seconds=2, microseconds=3),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "decimal": Decimal("12.3400"),
    "enum": Color.BLUE,
    "big_int": 2**80,
    "int": 7,
    "bool": False,
    "u64_max": 2**64 - 1,  # orjson's largest
    "past_u64": 2**64,  # tagged, alone as in a list
    "below_i64": -(2**63) - 1,
    "inf": float("inf"),
    "int_keys": {1: "one", (2, 3): "pair"},
    "tag_key": {"__t": "not a tag"},
    "pydantic": Item(sku="A1", qty=3, tags=["x"]),
    "dataclass": Order(id="o1", items=[Item(sku="B")], color=Color.RED, placed=NOW),
    "namedtuple": Point(1, 2),
    "send": Send("node", {"arg": (1, 2)}),
}


@pytest.fixture
def serde() -> JsonPlusSerializer:
    return JsonPlusSerializer()


@pytest.mark.parametrize("name", sorted(VALUES))
def test_dumps_typed_loads_typed_round_trip(
    serde: JsonPlusSerializer, name: str
) -> None:
    value = VALUES[name]

    loaded = serde.loads_typed(serde.dumps_typed(value))

    assert loaded == value
    assert type(loaded) is type(value)


def test_round_trip_nested_everything(serde: JsonPlusSerializer) -> None:
    loaded = serde.loads_typed(serde.dumps_typed(VALUES))

    assert loaded == VALUES
    assert type(loaded["dataclass"].items[0]) is Item
    assert type(loaded["tuple"][2]) is tuple


def test_pydantic_round_trip_keeps_fields_set(serde: JsonPlusSerializer) -> None:
    item = Item(sku="A1")

    loaded = serde.loads_typed(serde.dumps_typed(item))

    assert loaded.model_fields_set == {"sku"}


class Message(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    content: str
    kind: str = "ai"
    name: str | None = None
    meta: dict[str, Any] = pydantic.Field(default_factory=dict)
    calls: list[Any] = []
    ratio: float = 0.0
    made: str = pydantic.Field(default_factory=lambda: uuid.uuid4().hex)


def _stored_fields(serde: JsonPlusSerializer, value: Any) -> dict[str, Any]:
    payload = orjson.loads(serde.dumps_typed(value)[1])
    return {"v": payload["v"], "s": payload.get("s")}


def test_pydantic_fields_left_at_their_default_are_not_stored(
    serde: JsonPlusSerializer,
) -> None:
    message = Message(content="hi", made="m1")

    stored = _stored_fields(serde, message)
    loaded = serde.loads_typed(serde.dumps_typed(message))

    assert stored == {"v": {"content": "hi", "made": "m1"}, "s": None}
    assert loaded == message and loaded.model_fields_set == {"content", "made"}


def test_pydantic_defaults_changed_in_place_or_unfixed_are_stored(
    serde: JsonPlusSerializer,
) -> None:
    message = Message.model_construct(content="hi", ratio=0)  # an int, not 0.0
    message.meta["k"] = 1  # changed in place: still not "set"
    message.calls.append(False)

    stored = _stored_fields(serde, message)
    loaded = serde.loads_typed(serde.dumps_typed(message))

    assert set(stored["v"]) == {"content", "meta", "calls", "ratio", "made"}
    assert stored["s"] == ["content", "ratio"]
    assert loaded == message
    assert loaded.model_fields_set == {"content", "ratio"}
    assert type(loaded.ratio) is int and loaded.calls == [False]


def test_pydantic_extras_and_explicitly_set_defaults_round_trip(
    serde: JsonPlusSerializer,
) -> None:
    message = Message(content="hi", kind="ai", made="m1", extra_field=[1])

    stored = _stored_fields(serde, message)
    loaded = serde.loads_typed(serde.dumps_typed(message))

    assert stored["v"] == {
        "content": "hi",
        "kind": "ai",
        "made": "m1",
        "extra_field": [1],
    }
    assert loaded == message
    assert loaded.model_fields_set == message.model_fields_set


def test_pydantic_payloads_with_every_field_still_load(
    serde: JsonPlusSerializer,
) -> None:
    old = stored(
        "pydantic",
        f"{__name__}:Message",
        {
            "content": "hi",
            "kind": "ai",
            "name": None,
            "meta": {},
            "calls": [],
            "ratio": 0.0,
            "made": "m1",
        },
    )
    payload = orjson.loads(old[1])
    payload["s"] = ["content"]
    register_type(Message)

    loaded = serde.loads_typed(("json", orjson.dumps(payload)))

    assert loaded == Message(content="hi", made="m1")
    assert loaded.model_fields_set == {"content"}


def test_payload_is_plain_json_readable_without_the_serializer(
    serde: JsonPlusSerializer,
) -> None:
    tag, payload = serde.dumps_typed({"when": NOW, "n": 1, "s": "x"})

    assert tag == "json"
    assert orjson.loads(payload) == {
        "when": {"__t": "datetime", "v": NOW.isoformat()},
        "n": 1,
        "s": "x",
    }


def test_plain_json_payloads_have_no_tags(serde: JsonPlusSerializer) -> None:
    _, payload = serde.dumps_typed({"a": [1, "b", None, 1.5]})

    assert b"__t" not in payload


def test_dumps_typed_special_cases_none_and_bytes(serde: JsonPlusSerializer) -> None:
    assert serde.dumps_typed(None) == ("null", b"")
    assert serde.dumps_typed(b"raw") == ("bytes", b"raw")


def test_a_small_payload_holds_only_its_bytes(serde: JsonPlusSerializer) -> None:
    """orjson's own bytes object reserves ~4 KiB whatever it holds: a saver
    keeps a payload per step, so what it is given must be exact-size."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [serde.dumps_typed(value) for value in [*range(100), True, "text"]]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    assert kept[5] == ("json", b"5")
    assert held < 102 * 200


def test_unstorable_value_raises_naming_its_type_and_place(
    serde: JsonPlusSerializer,
) -> None:
    class Opaque:
        pass

    with pytest.raises(SerializationError, match="Opaque") as info:
        serde.dumps_typed({"deep": [Opaque()]})

    assert "UNSAFE_SERIALIZATION" in str(info.value)


def test_check_raises_like_dumps(serde: JsonPlusSerializer) -> None:
    serde.check({"ok": 1})
    with pytest.raises(SerializationError):
        serde.check(object())


@pytest.mark.parametrize("tag", ["pickle", "msgpack", "mystery"])
def test_loads_typed_refuses_unknown_payload_tags(
    serde: JsonPlusSerializer, tag: str
) -> None:
    with pytest.raises(SerializationError, match=repr(tag)):
        serde.loads_typed((tag, b"\x80\x04K\x01."))


def test_loads_refuses_unknown_value_tags(serde: JsonPlusSerializer) -> None:
    payload = orjson.dumps({"__t": "pickle", "v": "gASVAAAA"})

    with pytest.raises(SerializationError, match="'pickle'"):
        serde.loads_typed(("json", payload))


def stored(tag: str, type_name: str, value: Any) -> tuple[str, bytes]:
    return ("json", orjson.dumps({"__t": tag, "c": type_name, "v": value}))


def test_loads_refuses_a_class_that_is_not_allowed_naming_it(
    serde: JsonPlusSerializer,
) -> None:
    with pytest.raises(SerializationError, match="os:system"):
        serde.loads_typed(stored("dataclass", "os:system", {"command": "true"}))


def test_loads_refuses_a_never_seen_class_of_an_importable_module(
    serde: JsonPlusSerializer,
) -> None:
    name = f"{__name__}:NeverStored"

    with pytest.raises(SerializationError, match="NeverStored"):
        serde.loads_typed(stored("pydantic", name, {"a": 1}))


class NeverStored(pydantic.BaseModel):
    a: int


class Registered(pydantic.BaseModel):
    a: int


def test_register_type_allows_loading(serde: JsonPlusSerializer) -> None:
    register_type(Registered)

    loaded = serde.loads_typed(stored("pydantic", f"{__name__}:Registered", {"a": 1}))

    assert loaded == Registered(a=1)


def test_lenient_mode_returns_unknown_object_instead_of_raising() -> None:
    lenient = JsonPlusSerializer(lenient=True)

    loaded = lenient.loads_typed(
        stored(
            "dataclass",
            "os:system",
            {"command": "true", "when": {"__t": "date", "v": "2026-01-02"}},
        )
    )

    assert loaded == UnknownObject(
        "os:system", {"command": "true", "when": dt.date(2026, 1, 2)}
    )


def test_lenient_mode_still_refuses_pickle() -> None:
    with pytest.raises(SerializationError):
        JsonPlusSerializer(lenient=True).loads_typed(("pickle", b"\x80\x04."))


def test_unknown_object_round_trips(serde: JsonPlusSerializer) -> None:
    unknown = UnknownObject("some.module:Thing", {"a": 1})

    assert serde.loads_typed(serde.dumps_typed(unknown)) == unknown


_C = CHUNK_ITEMS  # lengths around each chunk boundary, and a few fixed ones


@pytest.mark.parametrize(
    "n", sorted({0, 1, _C - 1, _C, _C + 1, 2 * _C, 2 * _C + 1, 255, 256, 257, 3000})
)
def test_long_lists_and_states_holding_them_dump_exactly_like_orjson(
    serde: JsonPlusSerializer, n: int
) -> None:
    items = [{"id": i, "tags": ["a", i]} for i in range(n)]
    state = {"n": 1, "items": items, "nested": {"more": items[:3]}, "empty": []}

    assert serde.dumps(items) == orjson.dumps(items)
    assert serde.dumps(state) == orjson.dumps(state)
    assert serde.loads(serde.dumps(state)) == state


def test_dumping_a_long_list_peaks_near_twice_its_json(
    serde: JsonPlusSerializer,
) -> None:
    import tracemalloc  # noqa: PLC0415

    state = {"items": [{"id": i, "text": f"item number {i}"} for i in range(5000)]}
    size = len(orjson.dumps(state))
    tracemalloc.start()
    try:
        payload = serde.dumps(state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert len(payload) == size
    # orjson alone holds a buffer of ~4x the JSON; the chunked dump stays near the
    # JSON's own size (1.19x here; chunks of 256 items reached 1.39x)
    assert peak < 1.3 * size


_PIECE_CASES: list[Any] = [
    [{"id": i, "text": f"item {i}", "tags": ["a"]} for i in range(1000)],
    list(range(300)),
    [2**70, *range(600)],  # a big int in the first piece
    [*range(600), -(2**70)],  # and in the last
    [float("nan"), 1.5, float("inf")] * 200,
    [(1, 2)] * 300 + [dt.datetime(2020, 1, 1), Color.RED],
    {"n": 0, "items": list(range(1000)), "z": {"a": (1,)}},
    {"a": {"b": list(range(1000))}, "items": [Color.BLUE] * 500, "e": []},
    {"__t": 1, "items": list(range(1000))},  # the tag as a key: tagged whole
    {1: 2, "items": list(range(1000))},  # a key that is not text: tagged whole
    list(range(10)),
    {"a": 1},
    "text",
    5,
    None,
    b"bytes",
]


@pytest.mark.parametrize("value", _PIECE_CASES, ids=range(len(_PIECE_CASES)))
def test_pieces_join_into_exactly_what_dumps_typed_writes(
    serde: JsonPlusSerializer, value: Any
) -> None:
    tag, pieces = serde.dumps_typed_pieces(value)

    assert (tag, b"".join(pieces)) == serde.dumps_typed(value)


def test_a_long_list_comes_in_small_pieces(serde: JsonPlusSerializer) -> None:
    items = [{"id": i, "text": f"item number {i}"} for i in range(5000)]

    pieces = list(serde.dumps_typed_pieces({"n": 1, "items": items})[1])

    assert len(pieces) > 5000 // 64
    assert max(map(len, pieces)) < 4096  # 64 items of ~40 bytes
    assert all(type(p) is bytes for p in pieces)


def test_an_item_that_cannot_be_stored_fails_the_pieces_like_dumps(
    serde: JsonPlusSerializer,
) -> None:
    _, pieces = serde.dumps_typed_pieces([*range(1000), object()])

    with pytest.raises(SerializationError, match="builtins:object"):
        list(pieces)


def test_a_subclass_that_changes_dumps_typed_gets_one_piece_of_its_own() -> None:
    class Marked(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            tag, payload = super().dumps_typed(obj)
            return tag, b" " + payload

    value = list(range(1000))
    tag, pieces = Marked().dumps_typed_pieces(value)

    assert (tag, list(pieces)) == ("json", [b" " + orjson.dumps(value)])


# --- PlainDict: a dict its maker vouches is plain JSON ----------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"source": "loop", "step": 3, "writes": {"a": ["x"]}, "next": ["a"]},
        {"wide": list(range(200)), "nested": {"k": [True, None, "s"]}},
        {"big": 2**70, "list": [2**65, -(2**64)]},  # orjson refuses: tagged as usual
    ],
)
def test_a_plain_dict_is_written_as_the_dict_it_is(value: dict[str, Any]):
    serde = JsonPlusSerializer()
    vouched = PlainDict(value)
    assert serde.dumps_typed(vouched) == serde.dumps_typed(dict(value))
    loaded = serde.loads_typed(serde.dumps_typed(vouched))
    assert loaded == value and type(loaded) is dict


def test_plain_keys_refuse_the_tag_and_other_types():
    assert plain_keys(["a", "node", "__start__"])
    assert not plain_keys(["a", "__t"])
    assert not plain_keys(["a", 1])
    assert is_small_plain({"a": [1, "b", None, True]})
    assert not is_small_plain({"a": 1.5})  # NaN would need a tag
    assert not is_small_plain({"a": (1,)})

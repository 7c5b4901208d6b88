"""Untyped serializers wrapped for savers, and listeners told about refused classes."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from engine.checkpoint.memory import InMemorySaver
from engine.checkpoint.serde.base import (
    SerializerCompat,
    SerializerProtocol,
    maybe_add_typed_methods,
)
from engine.checkpoint.serde.event_hooks import (
    SerdeEvent,
    emit_serde_event,
    register_serde_event_listener,
)
from engine.checkpoint.serde.jsonplus import JsonPlusSerializer, UnknownObject
from engine.errors import SerializationError
from tests._support.builders import make_checkpoint, make_config, make_metadata

REFUSED = b'{"__t":"dataclass","c":"evil.module:Payload","v":{"cmd":"rm"}}'


class JsonText:
    """A serializer of the old, untyped kind."""

    def dumps(self, obj: Any) -> bytes:
        return json.dumps(obj).encode()

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


# -- SerializerCompat ---------------------------------------------------------------------


def test_an_untyped_serializer_is_wrapped_and_tags_the_class_name():
    serde = maybe_add_typed_methods(JsonText())

    assert isinstance(serde, SerializerCompat)
    assert serde.dumps_typed({"a": 1}) == ("dict", b'{"a": 1}')
    assert serde.loads_typed(("anything", b"[1, 2]")) == [1, 2]


def test_a_typed_serializer_is_returned_as_is():
    serde = JsonPlusSerializer()

    assert maybe_add_typed_methods(serde) is serde
    assert isinstance(serde, SerializerProtocol)


def test_savers_accept_an_untyped_serializer():
    saver = InMemorySaver(serde=JsonText())  # type: ignore[arg-type]
    checkpoint = make_checkpoint({"n": 1})

    stored = saver.put(
        make_config(), checkpoint, make_metadata(), checkpoint["channel_versions"]
    )

    assert isinstance(saver.serde, SerializerCompat)
    loaded = saver.get_tuple(stored)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {"n": 1}


# -- event hooks --------------------------------------------------------------------------


@pytest.fixture
def events():
    seen: list[SerdeEvent] = []
    unregister = register_serde_event_listener(seen.append)
    yield seen
    unregister()


def test_a_refused_class_is_reported_with_its_module_and_name(events):
    with pytest.raises(SerializationError):
        JsonPlusSerializer().loads(REFUSED)

    assert events == [
        {"kind": "msgpack_blocked", "module": "evil.module", "name": "Payload"}
    ]


def test_lenient_loading_reports_the_class_it_did_not_build(events):
    loaded = JsonPlusSerializer(lenient=True).loads(REFUSED)

    assert isinstance(loaded, UnknownObject)
    assert [e["name"] for e in events] == ["Payload"]


def test_allowed_classes_raise_no_event(events):
    JsonPlusSerializer().loads(b'{"__t":"tuple","v":[1]}')

    assert events == []


def test_unregistered_listeners_hear_nothing_more():
    seen: list[SerdeEvent] = []
    unregister = register_serde_event_listener(seen.append)
    unregister()
    unregister()  # harmless twice

    emit_serde_event({"kind": "msgpack_blocked", "module": "m", "name": "n"})

    assert seen == []


def test_a_failing_listener_is_logged_and_does_not_stop_the_others(caplog):
    def broken(event: SerdeEvent) -> None:
        raise RuntimeError("listener bug")

    later: list[SerdeEvent] = []
    unregister = [
        register_serde_event_listener(broken),
        register_serde_event_listener(later.append),
    ]
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(SerializationError):
            JsonPlusSerializer().loads(REFUSED)
    finally:
        for undo in unregister:
            undo()

    assert len(later) == 1
    assert "listener failed" in caplog.text

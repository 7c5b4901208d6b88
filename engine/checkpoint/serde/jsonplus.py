"""JSON-first serializer with type tags: readable by SQL and the studio, never pickle.

Plain JSON values are stored as JSON. Other values become small tagged objects
``{"__t": tag, ...}`` (tuples, sets, bytes, datetimes, UUIDs, decimals, enums,
pydantic models, dataclasses, named tuples, engine types such as ``Send``), so
they load back as the same types. Loading a class requires it to be allowed:
registered with :func:`register_type`, serialized earlier by this process, part
of a compiled graph's state schema, or from an allowed module prefix
(``langchain_core.messages``). Anything else is refused with an error that names
the type, and ``pickle`` payloads are always refused: nothing from storage can
execute code. ``lenient=True`` (used by the studio to display data) returns an
:class:`UnknownObject` instead of refusing.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import importlib
import io
import math
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import orjson

from engine.checkpoint.serde._packed_check import PACK_ITEMS, packs_plain
from engine.checkpoint.serde._plain_tree import MIN_ITEMS, is_plain_tree
from engine.checkpoint.serde.event_hooks import emit_serde_event
from engine.errors import ErrorCode, SerializationError, error_message

__all__ = (
    "JsonPlusSerializer",
    "PlainDict",
    "UnknownObject",
    "allowed_type_names",
    "is_small_plain",
    "plain_keys",
    "register_module_prefix",
    "register_type",
)

TAG = "__t"

_PLAIN = frozenset({str, bool, type(None), int})
"""Types stored as themselves. Ints beyond 64 bits are caught by orjson and
re-encoded as tagged strings (see ``JsonPlusSerializer.dumps``)."""
_PLAIN_NO_INT = frozenset({str, bool, type(None)})
_DICT_ONLY = frozenset({dict})
_STR_ONLY = frozenset({str})

_ALLOWED: dict[str, type[Any]] = {}
_ALLOWED_PREFIXES: set[str] = {"langchain_core.messages", "engine.types"}
_lock = threading.Lock()


def _type_name(cls: type[Any]) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def register_type(*classes: type[Any]) -> None:
    """Allow these classes to be loaded from storage (idempotent)."""
    with _lock:
        for cls in classes:
            _ALLOWED[_type_name(cls)] = cls


def register_module_prefix(prefix: str) -> None:
    """Allow every class from modules starting with ``prefix`` (e.g. ``"myapp.state"``)."""
    with _lock:
        _ALLOWED_PREFIXES.add(prefix)


def allowed_type_names() -> list[str]:
    """Names of the explicitly allowed classes (for diagnostics)."""
    return sorted(_ALLOWED)


@dataclasses.dataclass(frozen=True, slots=True)
class UnknownObject:
    """A stored object whose class is not allowed here; shown as data, never built."""

    type_name: str
    data: Any


_PURE_FACTORIES = frozenset({list, dict, set, frozenset, tuple})
"""Default factories whose result is always the same (an empty container)."""

_SCALARS = frozenset({str, int, float, bool, type(None)})


class _Default(NamedTuple):
    """A pydantic field's fixed default, as the serializer would store it."""

    json: bytes
    scalar: Any
    """The default itself when it is an immutable scalar (a value that *is* it
    needs no encoding to compare), else a sentinel nothing is."""
    make: Callable[[], Any]
    """A fresh default, as pydantic would make it (without inspecting the
    factory's signature on every call, as ``model_construct`` does)."""
    empty: type[Any] | None
    """The default's type when it is an empty container (any empty container of
    exactly that type is stored the same way)."""


_NOTHING: Any = object()
_defaults: dict[tuple[type[Any], str], _Default | None] = {}


def _field_default(cls: type[Any], name: str, info: Any) -> _Default | None:
    """A field's fixed default (cached per class and field); None when there is
    none: a required field, or a factory that may make something new each time."""
    key = (cls, name)
    if key in _defaults:
        return _defaults[key]
    found: _Default | None = None
    default: Any = getattr(info, "default", _NOTHING)
    factory = getattr(info, "default_factory", None)
    make: Callable[[], Any]
    if factory is not None:
        default = factory() if factory in _PURE_FACTORIES else _NOTHING
        make = factory
    elif type(default).__name__ == "PydanticUndefinedType":
        default = _NOTHING
    elif type(default) in _SCALARS:
        make = functools.partial(_same, default)
    elif type(default) in _PURE_FACTORIES and not default:
        make = type(default)
    else:
        make = functools.partial(copy.deepcopy, default)
    if default is not _NOTHING:
        with contextlib.suppress(SerializationError, orjson.JSONEncodeError):
            found = _Default(
                orjson.dumps(_Encoder().encode(default, "")),
                default if type(default) in _SCALARS else _NOTHING,
                make,
                type(default)
                if type(default) in _PURE_FACTORIES and not default
                else None,
            )
    _defaults[key] = found
    return found


_fillers: dict[type[Any], tuple[tuple[str, Callable[[], Any]], ...]] = {}


def _default_fillers(cls: type[Any]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """(field, make default) of a model's fields with a fixed default, cached."""
    fillers = _fillers.get(cls)
    if fillers is None:
        model_fields = getattr(cls, "model_fields", None) or {}
        fillers = tuple(
            (name, default.make)
            for name, info in model_fields.items()
            if (default := _field_default(cls, name, info)) is not None
        )
        _fillers[cls] = fillers
    return fillers


def _same(value: Any) -> Any:
    return value


def _dumps_or_none(encoded: Any) -> bytes | None:
    try:
        return orjson.dumps(encoded)
    except orjson.JSONEncodeError:
        return None


class _Encoder:
    """One encoding pass; collects classes to allow on the way."""

    __slots__ = ("impure", "packed", "plain", "seen_types", "vouched")

    def __init__(self, big_ints: bool = False, packed: bool = False) -> None:
        self.seen_types: list[type[Any]] = []
        self.plain = _PLAIN_NO_INT if big_ints else _PLAIN
        self.impure = False
        """Inside a container ``is_plain_tree`` refused: its parts are not
        checked again (each would re-scan what the refused check scanned)."""
        self.packed = packed
        """Ask ``packs_plain`` first, whose yes may hide a bytes-like value (for
        a result that is written at once: see ``JsonPlusSerializer._encoded``)."""
        self.vouched = False
        """Some container was left as it is on ``packs_plain``'s word."""

    def _plain_tree(self, obj: dict[Any, Any] | list[Any]) -> bool:
        """Whether a long container is plain JSON, asked once per subtree."""
        if self.impure or len(obj) < MIN_ITEMS:
            return False
        verdict = packs_plain(obj, TAG) if self.packed else None
        if verdict is None:
            verdict = is_plain_tree(obj, self.plain, TAG)
        elif verdict:
            self.vouched = True
        if verdict:
            return True
        self.impure = True
        return False

    def encode(self, obj: Any, path: str) -> Any:
        cls = type(obj)
        if cls in self.plain:
            return obj
        if cls is int:  # reached only on the big-int retry
            if -(2**63) <= obj < 2**64:
                return obj
            return {TAG: "int", "v": str(obj)}
        if cls is float:
            if math.isfinite(obj):
                return obj
            return {TAG: "float", "v": repr(obj)}
        if cls is list:
            plain = self.plain
            outer = self.impure
            if self._plain_tree(obj):
                return obj  # records, documents: checked natively or a level at a time
            kinds = set(map(type, obj))  # one pass in C
            if kinds <= plain:
                self.impure = outer
                return obj  # already JSON: no copy
            enc = self._encode_dict if kinds == _DICT_ONLY else self.encode
            copy: list[Any] | None = None
            for index, item in enumerate(obj):
                if type(item) in plain:
                    if copy is not None:
                        copy.append(item)
                    continue
                encoded = enc(item, path)
                if copy is None:
                    if encoded is item:
                        continue
                    copy = obj[:index]  # the first item that changes: copy from here on
                copy.append(encoded)
            self.impure = outer
            return obj if copy is None else copy
        if cls is dict:
            return self._encode_dict(obj, path)
        if cls is tuple:
            enc = self.encode
            return {TAG: "tuple", "v": [enc(item, path) for item in obj]}
        return self._encode_other(obj, cls, path)

    def _encode_dict(self, obj: dict[Any, Any], path: str) -> Any:
        enc = self.encode
        if set(map(type, obj)) <= _STR_ONLY and TAG not in obj:
            simple = self.plain
            if set(map(type, obj.values())) <= simple:
                return obj  # already JSON: no copy
            outer = self.impure
            if self._plain_tree(obj):
                return obj
            changed: dict[str, Any] | None = None
            for key, value in obj.items():
                if type(value) in simple:
                    continue
                encoded = enc(value, path)
                if encoded is not value:
                    if changed is None:
                        changed = {}
                    changed[key] = encoded
            self.impure = outer
            return obj if changed is None else {**obj, **changed}
        return {
            TAG: "dict",
            "v": [[enc(k, path), enc(v, path)] for k, v in obj.items()],
        }

    def _encode_other(self, obj: Any, cls: type[Any], path: str) -> Any:
        enc = self.encode
        if isinstance(obj, enum.Enum):
            self.seen_types.append(cls)
            return {TAG: "enum", "c": _type_name(cls), "v": enc(obj.value, path)}
        if isinstance(obj, (bytes, bytearray)):
            tag = "bytes" if cls is bytes else "bytearray"
            return {TAG: tag, "v": base64.b64encode(obj).decode()}
        if isinstance(obj, dt.datetime):
            return {TAG: "datetime", "v": obj.isoformat()}
        if isinstance(obj, dt.date):
            return {TAG: "date", "v": obj.isoformat()}
        if isinstance(obj, dt.time):
            return {TAG: "time", "v": obj.isoformat()}
        if isinstance(obj, dt.timedelta):
            return {TAG: "timedelta", "v": [obj.days, obj.seconds, obj.microseconds]}
        if isinstance(obj, uuid.UUID):
            return {TAG: "uuid", "v": str(obj)}
        if isinstance(obj, decimal.Decimal):
            return {TAG: "decimal", "v": str(obj)}
        if isinstance(obj, (set, frozenset)):
            tag = "set" if isinstance(obj, set) else "frozenset"
            items = [enc(item, path) for item in obj]
            with contextlib.suppress(TypeError):
                items.sort(key=orjson.dumps)
            return {TAG: tag, "v": items}
        model_fields = getattr(cls, "model_fields", None)
        if model_fields is not None and hasattr(obj, "__pydantic_fields_set__"):
            self.seen_types.append(cls)
            # Fields that were not set and still hold their default are left
            # out: loading (model_construct) fills in the same default again.
            fields_set = obj.__pydantic_fields_set__
            values: dict[str, Any] = {}
            for name, info in model_fields.items():
                value = getattr(obj, name)
                if name in fields_set:
                    values[name] = enc(value, f"{path}.{name}")
                    continue
                default = _field_default(cls, name, info)
                if default is not None and (
                    value is default.scalar
                    or (type(value) is default.empty and not value)
                ):
                    continue  # the default itself (None, "ai"), an empty []/{}
                encoded = enc(value, f"{path}.{name}")
                if default is None or _dumps_or_none(encoded) != default.json:
                    values[name] = encoded
            named = len(values)  # model fields in values; extras follow
            extra = getattr(obj, "__pydantic_extra__", None)
            if extra:
                values.update({k: enc(v, f"{path}.{k}") for k, v in extra.items()})
            out: dict[str, Any] = {TAG: "pydantic", "c": _type_name(cls), "v": values}
            # loading without "s" marks the model fields in "v" as set
            if len(fields_set) != named or not fields_set.issubset(values):
                out["s"] = sorted(fields_set)
            return out
        if dataclasses.is_dataclass(obj):
            self.seen_types.append(cls)
            fields = {
                f.name: enc(getattr(obj, f.name), f"{path}.{f.name}")
                for f in dataclasses.fields(obj)
                if hasattr(obj, f.name)
            }
            return {TAG: "dataclass", "c": _type_name(cls), "v": fields}
        if isinstance(obj, tuple) and hasattr(cls, "_fields"):
            self.seen_types.append(cls)
            return {
                TAG: "namedtuple",
                "c": _type_name(cls),
                "v": [enc(v, path) for v in obj],
            }
        if isinstance(obj, str):
            return str(obj)
        if isinstance(obj, int) and not isinstance(obj, bool):
            return int(obj)
        if isinstance(obj, float):
            return self.encode(float(obj), path)
        if isinstance(obj, dict):
            return self._encode_dict(dict(obj), path)
        if isinstance(obj, list):
            return [enc(item, path) for item in obj]
        slots_send = _send_fields(obj)
        if slots_send is not None:
            node, arg = slots_send
            packet = {TAG: "send", "node": node, "arg": enc(arg, f"{path}.arg")}
            if (timeout := obj.timeout) is not None:  # a TimeoutPolicy, as plain fields
                packet["timeout"] = {
                    "run_timeout": timeout.run_timeout,
                    "idle_timeout": timeout.idle_timeout,
                    "refresh_on": timeout.refresh_on,
                }
            return packet
        if isinstance(obj, UnknownObject):
            return {TAG: "unknown", "c": obj.type_name, "v": obj.data}
        raise SerializationError(
            error_message(
                f"Cannot store a value of type {_type_name(cls)} at {path or 'the top level'}: "
                "only JSON values, tuples, sets, bytes, dates, UUIDs, decimals, enums, "
                "pydantic models, dataclasses and named tuples can be saved.",
                ErrorCode.UNSAFE_SERIALIZATION,
            )
        )


def _send_fields(obj: Any) -> tuple[str, Any] | None:
    cls = type(obj)
    if cls.__name__ == "Send" and cls.__module__ == "engine.types":
        return obj.node, obj.arg
    return None


class _Decoder:
    __slots__ = ("lenient",)

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient

    def decode(self, obj: Any) -> Any:
        cls = type(obj)
        if cls is list:
            dec = self.decode
            return [dec(item) for item in obj]
        if cls is dict:
            tag = obj.get(TAG)
            if tag is None:
                dec = self.decode
                return {key: dec(value) for key, value in obj.items()}
            return self._decode_tagged(tag, obj)
        return obj

    def _resolve(self, name: str) -> type[Any] | None:
        cls = _ALLOWED.get(name)
        if cls is not None:
            return cls
        module_name, _, qualname = name.partition(":")
        if any(
            module_name == p or module_name.startswith(p + ".")
            for p in _ALLOWED_PREFIXES
        ):
            try:
                target: Any = importlib.import_module(module_name)
                for part in qualname.split("."):
                    target = getattr(target, part)
            except (ImportError, AttributeError) as exc:
                if self.lenient:
                    return None
                raise SerializationError(
                    f"Stored data names type {name!r}, which cannot be imported: {exc}"
                ) from exc
            if isinstance(target, type):
                return target
        emit_serde_event(
            {"kind": "msgpack_blocked", "module": module_name, "name": qualname}
        )
        if self.lenient:
            return None
        raise SerializationError(
            error_message(
                f"Refusing to load type {name!r} from storage: it is not an allowed type. "
                "Register it with engine.checkpoint.serde.jsonplus.register_type() "
                "(compiled graphs register their state schema's types automatically).",
                ErrorCode.UNSAFE_SERIALIZATION,
            )
        )

    def _decode_tagged(self, tag: str, obj: dict[str, Any]) -> Any:
        dec = self.decode
        value: Any = obj.get("v")
        if tag == "tuple":
            return tuple(dec(item) for item in value)
        if tag == "dict":
            return {dec(k): dec(v) for k, v in value}
        if tag == "set":
            return {dec(item) for item in value}
        if tag == "frozenset":
            return frozenset(dec(item) for item in value)
        if tag == "bytes":
            return base64.b64decode(value)
        if tag == "bytearray":
            return bytearray(base64.b64decode(value))
        if tag == "datetime":
            return dt.datetime.fromisoformat(value)
        if tag == "date":
            return dt.date.fromisoformat(value)
        if tag == "time":
            return dt.time.fromisoformat(value)
        if tag == "timedelta":
            return dt.timedelta(days=value[0], seconds=value[1], microseconds=value[2])
        if tag == "uuid":
            return uuid.UUID(value)
        if tag == "decimal":
            return decimal.Decimal(value)
        if tag == "int":
            return int(value)
        if tag == "float":
            return float(value)
        if tag == "send":
            from engine.types import Send, TimeoutPolicy  # noqa: PLC0415 - avoid import cycle

            timeout = obj.get("timeout")
            return Send(
                obj["node"],
                dec(obj["arg"]),
                timeout=TimeoutPolicy(**timeout) if timeout is not None else None,
            )
        if tag in ("enum", "pydantic", "dataclass", "namedtuple"):
            return self._decode_class(tag, obj)
        if tag == "unknown":
            return UnknownObject(obj["c"], value)
        raise SerializationError(
            error_message(
                f"Refusing to load stored value tagged {tag!r}: unknown or unsafe encoding "
                "(pickle and other executable formats are never loaded).",
                ErrorCode.UNSAFE_SERIALIZATION,
            )
        )

    def _decode_class(self, tag: str, obj: dict[str, Any]) -> Any:
        name = obj["c"]
        cls = self._resolve(name)
        value: Any = obj.get("v")
        if cls is None:
            return UnknownObject(name, self.decode(value))
        if tag == "enum":
            return cls(self.decode(value))
        if tag == "namedtuple":
            return cls(*(self.decode(v) for v in value))
        fields = {k: self.decode(v) for k, v in value.items()}
        if tag == "pydantic":
            stored_set = obj.get("s")
            model_fields = getattr(cls, "model_fields", None) or {}
            fields_set = (
                set(stored_set)
                if stored_set is not None
                else {k for k in fields if k in model_fields}
            )
            for name, make in _default_fillers(cls):  # defaults left out when stored
                if name not in fields:
                    fields[name] = make()
            instance = cls.model_construct(_fields_set=fields_set, **fields)
            return instance
        instance = object.__new__(cls)
        for key, item in fields.items():
            object.__setattr__(instance, key, item)
        return instance


class JsonPlusSerializer:
    """The default serializer: tagged JSON via orjson.

    Args:
        lenient: when True, values of classes that are not allowed load as
            :class:`UnknownObject` (for display) instead of raising.
    """

    def __init__(self, *, lenient: bool = False) -> None:
        self.lenient = lenient
        self._decoder = _Decoder(lenient)

    def encode(self, obj: Any) -> Any:
        """The JSON-ready form of ``obj`` (tags included)."""
        return _encoded_by(_Encoder(), obj)

    def decode(self, data: Any) -> Any:
        """Inverse of :meth:`encode` for already-parsed JSON."""
        return self._decoder.decode(data)

    def dumps(self, obj: Any) -> bytes:
        if type(obj) is PlainDict or _small_plain(obj):  # JSON as it is: no walk
            try:
                return memoryview(orjson.dumps(obj)).tobytes()
            except orjson.JSONEncodeError:
                pass  # an int beyond 64 bits: the walk below tags it
        return self._encoded(obj, _exact_dumps)

    def _encoded(self, obj: Any, write: Callable[[Any], bytes]) -> bytes:
        """``write`` (orjson, or a variant) of ``obj`` encoded; encoded again
        with its ints beyond 64 bits tagged when orjson refuses them.

        Large containers are first asked of the packed check, whose yes may
        hide a bytes-like value that orjson then refuses: ``obj`` is encoded
        again without it (the walk tags such values), so what is stored never
        depends on which check answered."""
        encoder = _Encoder(packed=True)
        try:
            return write(_encoded_by(encoder, obj))
        except orjson.JSONEncodeError as exc:
            if not encoder.vouched or "64-bit" in str(exc):
                return self._encoded_again(obj, write, exc)
        try:  # the packed check vouched for a container holding bytes
            return write(self.encode(obj))
        except orjson.JSONEncodeError as exc:
            return self._encoded_again(obj, write, exc)

    def _encoded_again(
        self, obj: Any, write: Callable[[Any], bytes], exc: orjson.JSONEncodeError
    ) -> bytes:
        """After orjson refused ``obj``'s encoded form: with big ints tagged, or
        the error for what cannot be stored."""
        if "64-bit" not in str(exc):
            raise SerializationError(f"Cannot store value: {exc}") from exc
        return write(self._encode_big_ints(obj))

    def _encode_big_ints(self, obj: Any) -> Any:
        return _encoded_by(_Encoder(big_ints=True), obj)

    def loads(self, data: bytes | str) -> Any:
        parsed = orjson.loads(data)
        raw = data if isinstance(data, bytes) else data.encode()
        if b'"__t"' not in raw:
            return parsed
        return self._decoder.decode(parsed)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind = type(obj)
        if kind is int or kind is bool:  # a counter, a flag: most values a step writes
            try:
                # copied: orjson's own bytes object reserves ~4 KiB whatever it holds
                return "json", memoryview(orjson.dumps(obj)).tobytes()
            except orjson.JSONEncodeError:
                pass  # an int beyond 64 bits: dumps tags it
        elif obj is None:
            return "null", b""
        elif kind is bytes:
            return "bytes", obj
        return "json", self.dumps(obj)

    def dumps_typed_pieces(self, obj: Any) -> tuple[str, Iterator[bytes]]:
        """``dumps_typed(obj)`` with its payload as an iterator of pieces, which
        joined are exactly that payload.

        For a saver that sends a large value in parts (Postgres): a list of more
        than ``CHUNK_ITEMS`` items, or a state dict holding one, is serialized
        ``PIECE_ITEMS`` items at a time as the iterator is read, so the whole
        payload never exists at once. Any other value (and every value when
        ``dumps_typed`` or ``dumps`` is overridden by a subclass) is one piece.
        """
        cls = type(self)
        if (
            cls.dumps_typed is JsonPlusSerializer.dumps_typed
            and cls.dumps is JsonPlusSerializer.dumps
            and _pieceable(obj)
        ):
            return "json", self._pieces(obj)
        tag, payload = self.dumps_typed(obj)
        return tag, iter((payload,))

    def _pieces(self, value: Any) -> Iterator[bytes]:
        """The JSON of ``value`` (a ``_pieceable`` one, or any value inside it)
        in pieces: what ``dumps`` writes, since a list is encoded item by item
        and a dict with plain keys value by value (see ``_Encoder``)."""
        if type(value) is list and len(value) > CHUNK_ITEMS:
            for start in range(0, len(value), PIECE_ITEMS):
                yield b"," if start else b"["
                # Its items without the brackets; no name keeps orjson's buffer
                # alive while the caller holds the piece.
                yield memoryview(self._piece(value[start : start + PIECE_ITEMS]))[
                    1:-1
                ].tobytes()
            yield b"]"
        elif _pieceable(value):  # a plain-keyed dict holding a long list
            yield b"{"
            for index, (key, item) in enumerate(value.items()):
                if index:
                    yield b","
                yield memoryview(orjson.dumps(key)).tobytes()
                yield b":"
                yield from self._pieces(item)
            yield b"}"
        else:
            yield memoryview(self._piece(value)).tobytes()

    def _piece(self, value: Any) -> bytes:
        """``value``'s JSON in orjson's own bytes object, which reserves more than
        it holds (several times a chunk's size): copied by the caller, whose copy
        is what stays alive."""
        return self._encoded(value, orjson.dumps)

    def dumps_typed_plain(self, obj: Any) -> tuple[str, bytes]:
        """For structures known to hold only JSON values (a checkpoint's versions):
        plain JSON without the type walk, tagged ``jsonraw`` so loading skips it too."""
        try:
            return "jsonraw", memoryview(orjson.dumps(obj)).tobytes()
        except TypeError:
            return self.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, payload = data
        if tag == "jsonraw":
            return orjson.loads(payload)
        if tag == "null":
            return None
        if tag == "bytes":
            return bytes(payload)
        if tag == "json":
            return self.loads(payload)
        if tag == "empty":
            return None
        raise SerializationError(
            error_message(
                f"Refusing to load stored value of type {tag!r}: only JSON payloads are "
                "accepted (pickle and other executable formats are never loaded).",
                ErrorCode.UNSAFE_SERIALIZATION,
            )
        )

    def check(self, obj: Any) -> None:
        """Raise SerializationError when ``obj`` could not be stored."""
        self.encode(obj)


class PlainDict(dict[str, Any]):
    """A dict that its maker vouches is JSON as it is, as :func:`_small_plain`
    would find it, whatever its size: ``str`` keys (never the tag), and only
    dicts, lists, ``str``, ``int``, ``bool`` and None inside, all the way down.

    :meth:`JsonPlusSerializer.dumps` writes it without walking it first (the
    same bytes as for the plain dict). The loop makes each step's checkpoint
    metadata one when it knows its parts are plain (see
    ``CheckpointBuilder._stamp_checkpoint``): the check would otherwise cost as
    much as the rest of encoding it. Savers hand it to their serializer as the
    dict it is. Nothing is vouched for what the caller adds later: whoever
    changes one keeps the promise, or makes a plain dict of it.
    """

    __slots__ = ()


def plain_keys(names: Iterable[Any]) -> bool:
    """Whether every one of ``names`` may be a key of a :class:`PlainDict`."""
    return all(type(name) is str and name != TAG for name in names)


def is_small_plain(obj: Any) -> bool:
    """Whether ``obj`` is JSON as it is and small (see :func:`_small_plain`): a
    :class:`PlainDict` may be made of it."""
    return _small_plain(obj)


SMALL_ITEMS = 48
"""At most this many items in all (keys not counted) for :func:`_small_plain`."""


def _small_plain(obj: Any) -> bool:
    """Whether ``obj`` is a scalar, or a small dict or list, that the walk would
    store exactly as it is: dicts with ``str`` keys (none the tag), lists, and
    values of the ``_PLAIN`` types (no float: NaN needs a tag) all the way down.

    Metadata and most task writes are such values; for them this check and
    ``orjson`` cost a fraction of the walk. Bigger values are left to the walk
    and to ``is_plain_tree``. Plain loops: for a few items they beat the
    ``set(map(type, ...))`` passes the big checks use.
    """
    kind = type(obj)
    if kind in _PLAIN:
        return True
    if kind is not dict and kind is not list:
        return False
    budget = SMALL_ITEMS
    pending = [obj]
    for node in pending:  # grows while it is read
        if type(node) is dict:
            if TAG in node:
                return False
            for key in node:
                if type(key) is not str:
                    return False
            node = node.values()
        budget -= len(node)
        if budget < 0:
            return False
        for item in node:
            kind = type(item)
            if kind in _PLAIN:
                continue
            if kind is not dict and kind is not list:
                return False
            pending.append(item)
    return True


CHUNK_ITEMS = PACK_ITEMS
"""Lists longer than this are written ``CHUNK_ITEMS`` items at a time (see
:func:`_exact_dumps`): as many as the plainness check packs at a time, one value
for both, so the check never holds more at once than the write. orjson's buffer
for a chunk reserves several times its JSON: at 128 records of ~55 bytes a dump
of 5,000 peaks at 1.13x its JSON (1.28x at 256 items a chunk), in the same time."""


def _exact_dumps(value: Any) -> bytes:
    """``orjson.dumps(value)`` as an exact-size bytes object.

    orjson returns its working buffer, which can be four times the size of the
    JSON (1 MiB for a 270 KiB list), and keeping that buffer costs memory for as
    long as the payload lives (the in-memory saver keeps them all), so the result
    is copied. A long list is written in chunks instead, into one growing buffer
    that becomes the result without a last copy, so the peak stays near the JSON's
    size plus a chunk rather than five times it; so is a dict holding one, value
    by value. Keys are strings here (``encode`` tags dicts with other keys), so
    writing them separately changes nothing.
    """
    if _chunked(value):
        out = io.BytesIO()
        _write_chunked(out, value)
        return out.getvalue()
    return memoryview(orjson.dumps(value)).tobytes()


def _chunked(value: Any) -> bool:
    """Whether ``value`` is written in chunks: a long list, or a (state-shaped) dict
    holding one, such as a run's input."""
    kind = type(value)
    if kind is list:
        return len(value) > CHUNK_ITEMS
    return kind is dict and any(
        type(v) is list and len(v) > CHUNK_ITEMS for v in value.values()
    )


PIECE_ITEMS = 64
"""Items of a long list serialized together by ``dumps_typed_pieces``: orjson's
buffer for them reserves several times their JSON, so a piece stays small."""


def _pieceable(value: Any) -> bool:
    """Whether ``dumps_typed_pieces`` serializes ``value`` a chunk at a time: a
    long list, or a dict holding one whose keys are stored as they are (text,
    none of them the tag), so that writing it key by key is what ``dumps`` writes."""
    if type(value) is list:
        return len(value) > CHUNK_ITEMS
    return (
        type(value) is dict
        and _chunked(value)
        and TAG not in value
        and set(map(type, value)) <= _STR_ONLY
    )


def _write_chunked(out: io.BytesIO, value: Any) -> None:
    if type(value) is dict and _chunked(value):
        out.write(b"{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.write(b",")
            out.write(orjson.dumps(key))
            out.write(b":")
            _write_chunked(out, item)
        out.write(b"}")
    elif type(value) is list and len(value) > CHUNK_ITEMS:
        for start in range(0, len(value), CHUNK_ITEMS):
            chunk = orjson.dumps(value[start : start + CHUNK_ITEMS])
            out.write(b"," if start else b"[")
            out.write(memoryview(chunk)[1:-1])  # without its brackets
            del chunk
        out.write(b"]")
    else:
        out.write(orjson.dumps(value))


def _encoded_by(encoder: _Encoder, obj: Any) -> Any:
    """``obj`` encoded by ``encoder``; the classes it met are allowed to load."""
    result = encoder.encode(obj, "")
    _remember(encoder.seen_types)
    return result


def _remember(classes: Iterable[type[Any]]) -> None:
    """Allow loading classes this process has stored (it already trusts them)."""
    for cls in classes:
        name = _type_name(cls)
        if _ALLOWED.get(name) is not cls:
            with _lock:
                _ALLOWED[name] = cls

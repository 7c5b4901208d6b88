"""Engine values as the plain JSON an Agent Server client expects.

The run event log keeps engine values with type tags (``events.jsonable``:
``{"__t": "datetime", ...}``) so they can be read back exactly; an API client
(``langgraph-sdk``) expects what the reference server sends instead: pydantic
models and dataclasses as objects, tuples and sets as arrays, datetimes as ISO
text, bytes as text. :func:`to_json` makes that, for state values, task
results, interrupt payloads and checkpoint metadata.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ("contains", "iso", "to_json")


def to_json(value: Any) -> Any:
    """``value`` as JSON data (dict with str keys, list, str, int, float, bool, None).

    Pydantic models dump in JSON mode, dataclasses become objects, enums their
    value, bytes UTF-8 text (base64 when they are not UTF-8), exceptions
    ``ValueError('...')``; anything else unknown its ``repr``.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((to_json(v) for v in value), key=repr)
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode()
    if isinstance(value, BaseException):
        return repr(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return to_json(dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
        }
    return repr(value)


def iso(moment: dt.datetime) -> str:
    """A timestamp as the reference server writes it: ``2024-06-25T17:10:33.109781+00:00``."""
    return moment.isoformat()


def contains(whole: Any, part: Any) -> bool:
    """JSON containment, as Postgres ``@>``: objects by key, arrays by element.

    ``contains({"a": 1, "b": [1, 2]}, {"b": [2]})`` is true; ``true`` is not ``1``.
    """
    if isinstance(part, Mapping):
        return isinstance(whole, Mapping) and all(
            key in whole and contains(whole[key], value) for key, value in part.items()
        )
    if isinstance(part, list):
        return isinstance(whole, list) and all(
            any(contains(item, wanted) for item in whole) for wanted in part
        )
    if isinstance(part, bool) or isinstance(whole, bool):
        return isinstance(part, bool) and isinstance(whole, bool) and part == whole
    return bool(whole == part)

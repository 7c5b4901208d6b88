"""Pure helpers over state classes: annotated keys, defaults, object -> update pairs."""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from typing import Any

from engine._internal._typing import MISSING

__all__ = ("annotated_keys", "is_pydantic_model", "object_update_items")

_KEYS: weakref.WeakKeyDictionary[type[Any], tuple[str, ...]] = (
    weakref.WeakKeyDictionary()
)


def is_pydantic_model(obj: Any) -> bool:
    """True for a pydantic v2 model class or instance, without importing pydantic."""
    cls = obj if isinstance(obj, type) else type(obj)
    return hasattr(cls, "model_fields") and hasattr(cls, "model_validate")


def annotated_keys(cls: type[Any]) -> tuple[str, ...]:
    """Annotated attribute names of a class and its bases, in definition order (cached)."""
    try:
        return _KEYS[cls]
    except (KeyError, TypeError):
        pass
    keys: list[str] = []
    for base in reversed(cls.__mro__):
        for key in getattr(base, "__annotations__", {}) or {}:
            if not key.startswith("__") and key not in keys:
                keys.append(key)
    if is_pydantic_model(cls):
        keys = [k for k in keys if k in cls.model_fields] or list(cls.model_fields)
    result = tuple(keys)
    with contextlib.suppress(TypeError):
        _KEYS[cls] = result
    return result


def object_update_items(obj: Any) -> list[tuple[str, Any]] | None:
    """A state object (pydantic model, dataclass, plain class) as update pairs.

    Pydantic and dataclass objects yield the fields that are set to something other
    than ``None`` (or explicitly set, for pydantic), the rule LangGraph applies, so a
    node may return a partially filled state object. Returns ``None`` for objects
    that are not state objects.
    """
    cls = type(obj)
    if isinstance(obj, type) or cls in (str, bytes, int, float, bool):
        return None
    keys = annotated_keys(cls) if hasattr(cls, "__mro__") else ()
    if not keys:
        return None
    if is_pydantic_model(cls):
        keep: set[str] | frozenset[str] = obj.model_fields_set
        defaults = {k: f.default for k, f in cls.model_fields.items()}
    elif dataclasses.is_dataclass(cls):
        keep = frozenset()
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    else:
        keep = frozenset()
        defaults = {}
    items: list[tuple[str, Any]] = []
    for key in keys:
        value = getattr(obj, key, MISSING)
        if value is MISSING:
            continue
        if value is not None or defaults.get(key, MISSING) is not None or key in keep:
            items.append((key, value))
    return items

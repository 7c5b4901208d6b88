"""Pure: a graph's input schema (TypedDict, pydantic model, dataclass) -> form fields.

Each :class:`InputField` says which widget edits a key and which type checks
it (``studio.forms`` builds the strict model from them):

- ``str`` -> text; ``int``/``float`` -> number; ``bool`` -> checkbox, or a
  yes/no/unset choice when the key is optional (a checkbox cannot say "unset");
- ``Literal[...]`` and enums -> a choice;
- anything else (lists, dicts, nested models, unions, ``Any``) -> a JSON textarea;
- a schema that is exactly one ``messages`` list (``MessagesState``) -> one
  ``message`` textarea, sent as ``[{"role": "user", "content": ...}]``.

No Django and no engine imports: only ``typing`` and pydantic introspection.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import typing_extensions
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = ("MESSAGES_KEY", "InputField", "Widget", "input_fields")

Widget = Literal["text", "number", "checkbox", "choice", "json", "message"]
MESSAGES_KEY = "messages"

_WRAPPERS = {
    typing.Required,
    typing.NotRequired,
    typing_extensions.Required,
    typing_extensions.NotRequired,
    typing_extensions.ReadOnly,
}


@dataclass(frozen=True, slots=True)
class InputField:
    """One key of the input and how the form edits it."""

    key: str
    """The input's key, as in the schema."""
    widget: Widget
    annotation: Any
    """The type a submitted value must have (``choice``: the value's type)."""
    required: bool
    """The schema needs the key (TypedDict required key, field without default)."""
    nullable: bool = False
    """``None`` is allowed: an empty required field is sent as ``null``."""
    choices: tuple[tuple[str, Any], ...] = ()
    """``choice`` widget: (form text, value) pairs, in order."""
    step: str = ""
    """``number`` widget: ``"1"`` for integers, ``"any"`` for floats."""
    initial: str = ""
    """The form text shown before anything is typed (the schema's default)."""
    type_hint: str = ""
    """The type, for people: ``list[dict[str, Any]]``."""
    constraints: tuple[Any, ...] = ()
    """pydantic field metadata (``Ge(1)``, ``MaxLen(64)``...) to check as well."""


def input_fields(schema: Any, kind: str) -> tuple[InputField, ...]:
    """The form fields for an input schema of ``kind`` typeddict|pydantic|dataclass|class.

    ``dict``/``Any`` schemas (and unknown kinds) have no fields: only raw JSON.
    """
    readers: dict[str, Callable[[Any], list[InputField]]] = {
        "typeddict": _typeddict_fields,
        "pydantic": _pydantic_fields,
        "dataclass": _dataclass_fields,
        "class": _class_fields,
    }
    reader = readers.get(kind)
    fields = reader(schema) if reader is not None else []
    if [f.key for f in fields] == [MESSAGES_KEY] and _is_list(fields[0].annotation):
        return (
            InputField(
                key=MESSAGES_KEY,
                widget="message",
                annotation=str,
                required=True,
                type_hint="a user message",
            ),
        )
    return tuple(fields)


# -- schema kinds ----------------------------------------------------------------


def _typeddict_fields(schema: Any) -> list[InputField]:
    declared: frozenset[str] = getattr(schema, "__required_keys__", frozenset())
    return [
        _field(key, annotation, required=_required_key(annotation, key in declared))
        for key, annotation in _hints(schema).items()
    ]


def _required_key(annotation: Any, declared: bool) -> bool:
    """An explicit ``Required``/``NotRequired`` wins: under ``from __future__ import
    annotations`` the class cannot see them, so ``__required_keys__`` may be wrong."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _required_key(annotation.__origin__, declared)
    if origin in (typing.Required, typing_extensions.Required):
        return True
    if origin in (typing.NotRequired, typing_extensions.NotRequired):
        return False
    if origin in (typing_extensions.ReadOnly,):
        return _required_key(get_args(annotation)[0], declared)
    return declared


def _pydantic_fields(schema: type[BaseModel]) -> list[InputField]:
    fields = []
    for key, info in schema.model_fields.items():
        default = info.default if info.default is not PydanticUndefined else _NO_DEFAULT
        fields.append(
            _field(
                info.alias or key,
                info.annotation,
                required=info.is_required(),
                default=default,
                constraints=tuple(info.metadata),
            )
        )
    return fields


def _dataclass_fields(schema: Any) -> list[InputField]:
    hints = _hints(schema)
    fields = []
    for item in dataclasses.fields(schema):
        if not item.init:
            continue
        has_default = item.default is not dataclasses.MISSING
        has_factory = item.default_factory is not dataclasses.MISSING
        fields.append(
            _field(
                item.name,
                hints.get(item.name, Any),
                required=not (has_default or has_factory),
                default=item.default if has_default else _NO_DEFAULT,
            )
        )
    return fields


def _class_fields(schema: Any) -> list[InputField]:
    return [
        _field(
            key,
            annotation,
            required=not hasattr(schema, key),
            default=getattr(schema, key, _NO_DEFAULT),
        )
        for key, annotation in _hints(schema).items()
        if not key.startswith("_")
    ]


# -- one field -------------------------------------------------------------------


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT: Any = _NoDefault()


def _field(
    key: str,
    annotation: Any,
    *,
    required: bool,
    default: Any = _NO_DEFAULT,
    constraints: tuple[Any, ...] = (),
) -> InputField:
    base = _unwrap(annotation)
    base, nullable = _without_none(base)
    initial = _initial(default)
    hint = _describe(base) + (" or null" if nullable else "")
    common: dict[str, Any] = {
        "key": key,
        "required": required,
        "nullable": nullable,
        "initial": initial,
        "type_hint": hint,
        "constraints": constraints,
    }
    if base is bool:
        if required or isinstance(default, bool):
            return InputField(widget="checkbox", annotation=bool, **common)
        yes_no: tuple[tuple[str, Any], ...] = (("true", True), ("false", False))
        return InputField(widget="choice", annotation=bool, choices=yes_no, **common)
    if base is int or base is float:
        step = "1" if base is int else "any"
        return InputField(widget="number", annotation=base, step=step, **common)
    if base is str:
        return InputField(widget="text", annotation=str, **common)
    choices = _choices(base)
    if choices:
        return InputField(widget="choice", annotation=base, choices=choices, **common)
    if initial == "" and default is not _NO_DEFAULT and default is not None:
        common["initial"] = _json_text(default)
    return InputField(widget="json", annotation=base, **common)


def _unwrap(annotation: Any) -> Any:
    """Drop ``Required``/``NotRequired``/``ReadOnly`` and ``Annotated`` metadata."""
    while True:
        origin = get_origin(annotation)
        if origin in _WRAPPERS:
            annotation = get_args(annotation)[0]
        elif origin is typing.Annotated:
            annotation = annotation.__origin__
        else:
            return annotation


def _without_none(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) not in (Union, types.UnionType):
        return annotation, annotation is type(None)
    args = get_args(annotation)
    rest = [a for a in args if a is not type(None)]
    if len(rest) == len(args):
        return annotation, False
    if len(rest) == 1:
        return rest[0], True
    return Union[tuple(rest)], True  # noqa: UP007 - built from a runtime tuple


def _choices(annotation: Any) -> tuple[tuple[str, Any], ...]:
    if get_origin(annotation) is Literal:
        values = get_args(annotation)
    elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = tuple(member.value for member in annotation)
    else:
        return ()
    if not values or not all(isinstance(v, str | int | float | bool) for v in values):
        return ()
    return tuple((_form_text(v), v) for v in values)


def _is_list(annotation: Any) -> bool:
    base, _ = _without_none(_unwrap(annotation))
    return base is list or get_origin(base) is list


def _initial(default: Any) -> str:
    if default is _NO_DEFAULT or default is None:
        return ""
    if isinstance(default, enum.Enum):
        default = default.value
    if isinstance(default, str | int | float | bool):
        return _form_text(default)
    return ""


def _form_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return ""


def _describe(annotation: Any) -> str:
    if annotation is Any:
        return "any JSON"
    if isinstance(annotation, type) and get_origin(annotation) is None:
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("typing_extensions.", "")


def _hints(schema: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(schema, include_extras=True)
    except Exception:
        hints: dict[str, Any] = {}
        for base in reversed(getattr(schema, "__mro__", (schema,))):
            hints.update(getattr(base, "__annotations__", {}) or {})
        return hints

"""Pure: a graph's input schema (TypedDict, pydantic model, dataclass) -> form fields.

Each :class:`InputField` says which widget edits a key and which type checks
it (``studio.forms`` builds the strict model from them):

- ``str`` -> text; ``int``/``float`` -> number; ``bool`` -> checkbox, or a
  yes/no/unset choice when the key is optional (a checkbox cannot say "unset");
- ``Literal[...]`` and enums -> a choice;
- anything else (lists, dicts, nested models, unions, ``Any``) -> a JSON textarea;
- a schema that is exactly one ``messages`` list (``MessagesState``) -> one
  ``message`` textarea, sent as ``[{"role": "user", "content": ...}]``;
- managed values (``RemainingSteps``, ``IsLastStep``: the runtime computes them
  for each step, a caller never sends them) -> no field.

What people read next to a field comes from pydantic's ``Field`` on the schema
(in a TypedDict or dataclass, as ``Annotated[int, Field(...)]``): its
``description``, ``examples`` and constraints, the default, and two keys of its
``json_schema_extra`` (they show in the API's JSON schema too):

- ``MONEY_MINOR`` (``"x-money-minor"``): the int is an amount in minor units of
  this currency (``{"x-money-minor": "CNY"}``: fen). The form shows and takes the
  amount in the currency (``480.50``) and sends minor units (``48050``);
  ``"x-minor-digits"`` says how many minor digits the currency has (default 2);
- ``UNIT`` (``"x-unit"``): a unit shown next to a number (``"seconds"``).

No Django and no engine imports: only ``typing`` and pydantic introspection.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections import abc
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, Union, get_args, get_origin

import typing_extensions
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = (
    "MESSAGES_KEY",
    "MINOR_DIGITS",
    "MONEY_MINOR",
    "UNIT",
    "InputField",
    "Widget",
    "input_fields",
    "major_text",
)

Widget = Literal["text", "number", "money", "checkbox", "choice", "json", "message"]
MESSAGES_KEY = "messages"
MONEY_MINOR = "x-money-minor"
"""``json_schema_extra`` key: the int is an amount in minor units of this currency."""
MINOR_DIGITS = "x-minor-digits"
"""``json_schema_extra`` key: the currency's minor digits (2 when not given)."""
UNIT = "x-unit"
"""``json_schema_extra`` key: a unit to show next to a number."""

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
    description: str = ""
    """``Field(description=...)``: what the key means, for people."""
    examples: tuple[str, ...] = ()
    """``Field(examples=[...])`` as form text (money in the currency)."""
    unit: str = ""
    """Shown next to the field: a currency code for money, or ``x-unit``."""
    minor_digits: int = 0
    """``money`` widget: digits after the point (CNY: 2, fen to yuan)."""

    @property
    def placeholder(self) -> str:
        """The first example, shown in an empty text or number box."""
        return self.examples[0] if self.examples and self.widget != "json" else ""


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
        if not _is_managed(annotation)
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
        if any(_managed_class(item) for item in info.metadata):
            continue
        default = info.default if info.default is not PydanticUndefined else _NO_DEFAULT
        fields.append(
            _field(
                info.alias or key,
                info.annotation,
                required=info.is_required(),
                default=default,
                constraints=tuple(info.metadata),
                infos=(info,),
            )
        )
    return fields


def _dataclass_fields(schema: Any) -> list[InputField]:
    hints = _hints(schema)
    fields = []
    for item in dataclasses.fields(schema):
        if not item.init or _is_managed(hints.get(item.name, Any)):
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
        if not key.startswith("_") and not _is_managed(annotation)
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
    infos: tuple[FieldInfo, ...] = (),
) -> InputField:
    infos = infos or _field_infos(annotation)
    if not constraints:
        constraints = tuple(item for info in infos for item in info.metadata)
    extra = _extra(infos)
    base = _unwrap(annotation)
    base, nullable = _without_none(base)
    initial = _initial(default)
    hint = _describe(base) + (" or null" if nullable else "")
    examples = tuple(
        example for info in infos for example in (info.examples or ()) or ()
    )
    common: dict[str, Any] = {
        "key": key,
        "required": required,
        "nullable": nullable,
        "initial": initial,
        "type_hint": hint,
        "constraints": constraints,
        "description": " ".join(info.description for info in infos if info.description),
        "examples": tuple(_form_text(e) for e in examples if _is_scalar(e)),
        "unit": str(extra.get(UNIT) or ""),
    }
    if base is bool:
        if required or isinstance(default, bool):
            return InputField(widget="checkbox", annotation=bool, **common)
        yes_no: tuple[tuple[str, Any], ...] = (("true", True), ("false", False))
        return InputField(widget="choice", annotation=bool, choices=yes_no, **common)
    currency = extra.get(MONEY_MINOR)
    if base is int and isinstance(currency, str) and currency:
        digits = int(extra.get(MINOR_DIGITS, 2))
        return InputField(
            widget="money",
            annotation=int,
            step=_step(digits),
            minor_digits=digits,
            **common
            | {
                "unit": currency,
                "initial": major_text(default, digits)
                if isinstance(default, int) and not isinstance(default, bool)
                else "",
                "examples": tuple(
                    major_text(e, digits)
                    for e in examples
                    if isinstance(e, int) and not isinstance(e, bool)
                ),
                "type_hint": f"an amount in {currency}"
                + (f", sent in minor units (1/{10**digits})" if digits else ""),
            },
        )
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
    common["examples"] = tuple(
        text for text in (_json_line(e) for e in examples) if text
    )
    return InputField(widget="json", annotation=base, **common)


def major_text(minor: int, digits: int = 2) -> str:
    """An amount in minor units as the currency's text: ``48050`` -> ``"480.50"``."""
    if digits <= 0:
        return str(minor)
    return f"{Decimal(minor).scaleb(-digits):.{digits}f}"


def _step(digits: int) -> str:
    return "1" if digits <= 0 else f"{Decimal(1).scaleb(-digits):.{digits}f}"


def _field_infos(annotation: Any) -> tuple[FieldInfo, ...]:
    """``Field(...)`` objects in ``Annotated`` metadata (under Required & co. too)."""
    found: list[FieldInfo] = []
    while True:
        origin = get_origin(annotation)
        if origin in _WRAPPERS:
            annotation = get_args(annotation)[0]
        elif origin is typing.Annotated:
            found.extend(m for m in annotation.__metadata__ if isinstance(m, FieldInfo))
            annotation = annotation.__origin__
        else:
            return tuple(found)


def _is_managed(annotation: Any) -> bool:
    """A managed value (``Annotated[int, RemainingStepsManager]``): never input.

    Recognized by shape, not by import (this module imports no engine): an
    ``Annotated`` metadata item that is a class deriving from one named
    ``ManagedValue`` (the engine's, and LangGraph's for a loaded LangGraph graph).
    """
    while True:
        origin = get_origin(annotation)
        if origin in _WRAPPERS:
            annotation = get_args(annotation)[0]
        elif origin is typing.Annotated:
            if any(_managed_class(m) for m in annotation.__metadata__):
                return True
            annotation = annotation.__origin__
        else:
            return False


def _managed_class(item: Any) -> bool:
    return isinstance(item, type) and any(
        base.__name__ == "ManagedValue" for base in item.__mro__[1:]
    )


def _extra(infos: tuple[FieldInfo, ...]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for info in infos:
        if isinstance(info.json_schema_extra, dict):
            merged.update(info.json_schema_extra)
    return merged


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


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
    return base in (list, abc.Sequence) or get_origin(base) in (list, abc.Sequence)


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


def _json_line(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
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

"""Strict pydantic forms for POST endpoints (STYLE.md S6), and the start-a-run form.

``StrictForm`` is the base of every form: strict types, unknown keys refused,
form strings read with ``model_validate_strings`` ("40" is an int, "abc" is not).

``RunInputForm`` is built per graph from its input schema's fields
(``studio.input_fields``). It binds a POST in one of two shapes:

- **fields**: one ``input.<key>`` value per schema key (the generated form);
- **raw JSON**: one ``input`` value holding the whole input object.

Binding never raises for bad input: the result carries the errors by field,
so a view can re-render the form next to them (422) without ``try/except``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Json,
    TypeAdapter,
    ValidationError,
    create_model,
)

from studio import json_input
from studio.input_fields import InputField

__all__ = (
    "FIELD_PREFIX",
    "RAW_INPUT",
    "BoundRunInput",
    "FieldState",
    "RunInputForm",
    "StrictForm",
)

_NOT_FIELDS = frozenset({"csrfmiddlewaretoken", "HEADERS"})  # CSRF input; ws-send echo
FIELD_PREFIX = "input."
"""Generated fields are posted as ``input.<key>``."""
RAW_INPUT = "input"
"""The raw JSON alternative posts the whole input object as ``input``."""
FORM_ERRORS = ""
"""Key of errors that belong to no single field."""


class StrictForm(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Self:
        """Validate form strings ("40", "on", JSON text) without loosening strict mode."""
        return cls.model_validate_strings(
            {k: v for k, v in data.items() if k not in _NOT_FIELDS}
        )


@dataclass(frozen=True, slots=True)
class FieldState:
    """One field as the template shows it: the field, what was typed, its errors."""

    field: InputField
    value: str
    errors: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{FIELD_PREFIX}{self.field.key}"

    @property
    def dom_id(self) -> str:
        return "input-" + re.sub(r"[^A-Za-z0-9_-]+", "-", self.field.key)

    @property
    def checked(self) -> bool:
        return self.value == "true"


@dataclass(frozen=True, slots=True)
class BoundRunInput:
    """A submitted (or blank) start-a-run form: values, errors and, if valid, the input."""

    rows: tuple[FieldState, ...]
    raw: str = ""
    mode: Literal["fields", "json"] = "fields"
    raw_errors: tuple[str, ...] = ()
    form_errors: tuple[str, ...] = ()
    input: dict[str, Any] | None = None
    """The run's input, when the form is valid."""

    @property
    def is_valid(self) -> bool:
        return self.input is not None

    @property
    def mixed(self) -> bool:
        """Some fields are required and some are not (the form explains the marks)."""
        required = {row.field.required for row in self.rows}
        return required == {True, False}

    @property
    def raw_placeholder(self) -> str:
        return json.dumps({row.field.key: None for row in self.rows}, indent=2)


class RunInputForm:
    """The start-a-run form of one graph: its fields and the strict model checking them.

    Args:
        fields: from ``studio.input_fields.input_fields``.
        schema: the input schema; a pydantic one also checks the whole input, so
            its model validators report here rather than when the run fails.
    """

    def __init__(self, fields: tuple[InputField, ...], schema: Any = None) -> None:
        self.fields = fields
        self.schema = schema if isinstance(schema, type) else None
        self._by_key = {f.key: f for f in fields}

    def blank(self) -> BoundRunInput:
        return BoundRunInput(rows=tuple(FieldState(f, f.initial) for f in self.fields))

    def bind(self, data: Mapping[str, Any]) -> BoundRunInput:
        """Check a POST. Never raises for bad input; see ``BoundRunInput.input``."""
        posted = {k: v for k, v in data.items() if k not in _NOT_FIELDS}
        if RAW_INPUT in posted:
            return self._bind_raw(str(posted[RAW_INPUT]), posted)
        return self._bind_fields(posted)

    # -- the generated fields ----------------------------------------------------

    def _bind_fields(self, posted: Mapping[str, Any]) -> BoundRunInput:
        values = {f.key: _posted_text(f, posted) for f in self.fields}
        errors: dict[str, list[str]] = {}
        for name in posted:
            key = name.removeprefix(FIELD_PREFIX)
            if key == name or key not in self._by_key:
                errors.setdefault(FORM_ERRORS, []).append(f"Unknown field {name!r}.")
        payload: dict[str, str] = {}
        nulls: list[str] = []
        for f in self.fields:
            text = values[f.key].strip() if f.widget == "money" else values[f.key]
            if text == "":
                if f.required and f.nullable:
                    nulls.append(f.key)
                elif f.required:
                    errors.setdefault(f.key, []).append("This field is required.")
                continue
            if f.widget == "money":
                minor = _minor_units(text, f)
                if isinstance(minor, str):
                    errors.setdefault(f.key, []).append(minor)
                    continue
                text = str(minor)
            payload[f.key] = text
        checked: dict[str, Any] = {}
        try:
            model = self._model.model_validate_strings(payload)
            checked = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
        except ValidationError as exc:
            _collect(exc, errors)
        result = self._to_input(checked) | dict.fromkeys(nulls)
        if not errors:
            _collect_whole(self.schema, result, errors)
        rows = tuple(
            FieldState(f, values[f.key], tuple(errors.get(f.key, ())))
            for f in self.fields
        )
        return BoundRunInput(
            rows=rows,
            form_errors=tuple(_others(errors, self._by_key)),
            input=None if errors else result,
        )

    def _to_input(self, checked: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in checked.items():
            f = self._by_key[key]
            if f.widget == "choice":
                value = dict(f.choices)[value]
            elif f.widget == "message":
                value = [{"role": "user", "content": value}]
            result[key] = value
        return result

    @cached_property
    def _model(self) -> type[StrictForm]:
        definitions: dict[str, Any] = {
            f"f{index}": (_form_type(f), Field(default=None, alias=f.key))
            for index, f in enumerate(self.fields)
        }
        return create_model("RunInput", __base__=StrictForm, **definitions)

    # -- raw JSON ----------------------------------------------------------------

    def _bind_raw(self, raw: str, posted: Mapping[str, Any]) -> BoundRunInput:
        problems: list[str] = []
        others = [name for name in posted if name != RAW_INPUT]
        if others:
            problems.append(f"Unknown field {others[0]!r}.")
        value: Any = None
        try:
            value = json_input.loads(raw or "{}")
        except ValueError as exc:
            problems.append(f"Not valid JSON: {exc}.")
        if not problems and not isinstance(value, dict):
            problems.append("The input must be a JSON object: {...}.")
        if not problems and self.fields:
            unknown = sorted(set(value) - set(self._by_key))
            if unknown:
                known = ", ".join(self._by_key)
                problems.append(
                    f"Unknown key {unknown[0]!r}; the input schema has: {known}."
                )
        if not problems:
            errors: dict[str, list[str]] = {}
            self._check_raw(value, errors)
            _collect_whole(self.schema, value, errors)
            problems = [
                f"{key}: {message}" if key else message
                for key, messages in errors.items()
                for message in messages
            ]
        return BoundRunInput(
            rows=self.blank().rows,
            raw=raw,
            mode="json",
            raw_errors=tuple(problems),
            input=None if problems else value,
        )

    def _check_raw(self, value: dict[str, Any], errors: dict[str, list[str]]) -> None:
        """The raw input against the fields: required keys there, each value of its
        type (JSON rules, strictly: ``"5"`` is not an int) and within its limits."""
        for f in self.fields:
            if f.widget == "message":
                continue
            if f.key not in value:
                if f.required:
                    errors.setdefault(f.key, []).append("Field required")
                continue
            checker = self._raw_checkers.get(f.key)
            if checker is None:
                continue
            try:
                checker.validate_json(json.dumps(value[f.key]), strict=True)
            except ValidationError as exc:
                for error in exc.errors(include_url=False):
                    where = ".".join(str(part) for part in error["loc"])
                    text = error["msg"].removeprefix("Value error, ")
                    errors.setdefault(f.key, []).append(
                        f"{where}: {text}" if where else text
                    )

    @cached_property
    def _raw_checkers(self) -> dict[str, TypeAdapter[Any]]:
        checkers: dict[str, TypeAdapter[Any]] = {}
        for f in self.fields:
            kind = f.annotation
            if f.nullable:
                kind = kind | None
            if f.constraints:
                kind = Annotated[(kind, *f.constraints)]
            try:
                checkers[f.key] = TypeAdapter(kind)
            except Exception:  # a type pydantic cannot check: any JSON
                continue
        return checkers


# -- helpers ---------------------------------------------------------------------

_DECIMAL = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?$")


def _minor_units(text: str, f: InputField) -> int | str:
    """Money typed in the currency (``480.50``) as minor units (``48050``), exactly;
    or why the text is not an amount."""
    example = f.examples[0] if f.examples else "480.50"
    if not _DECIMAL.match(text):
        return f"Enter an amount in {f.unit}, like {example}."
    decimals = text.partition(".")[2]
    if len(decimals) > f.minor_digits:
        return (
            f"Use at most {f.minor_digits} decimals, like {example}."
            if f.minor_digits
            else f"Enter a whole amount in {f.unit}."
        )
    return int(Decimal(text).scaleb(f.minor_digits))


def _posted_text(f: InputField, posted: Mapping[str, Any]) -> str:
    value = posted.get(f"{FIELD_PREFIX}{f.key}")
    if f.widget == "checkbox":
        # An unchecked box is not sent at all: that is "false", never "missing".
        return "false" if value is None else str(value)
    return "" if value is None else str(value)


def _form_type(f: InputField) -> Any:
    """The type the form text must parse to, strictly."""
    if f.widget == "choice":
        return Literal[tuple(text for text, _ in f.choices)]
    if f.widget == "message":
        return Annotated[str, Field(min_length=1)]
    base = f.annotation
    if f.widget == "number" and base is float:
        base = Annotated[float, Field(allow_inf_nan=False)]
    if f.constraints:
        base = Annotated[(base, *f.constraints)]
    if f.widget == "json":
        base = _json_type(base)
    return base


def _json_type(annotation: Any) -> Any:
    """``Json[annotation]``, or ``Json[Any]`` when pydantic cannot check the type."""
    checked: Any = Json[annotation]  # type: ignore[misc]
    try:
        TypeAdapter(checked)
    except Exception:
        return Json[Any]  # type: ignore[misc]
    return checked


def _collect(exc: ValidationError, errors: dict[str, list[str]]) -> None:
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        key, rest = (loc[0], loc[1:]) if loc else (FORM_ERRORS, [])
        where = ".".join(rest)
        text = error["msg"].removeprefix("Value error, ")
        message = f"{where}: {text}" if where else text
        errors.setdefault(key, []).append(message)


def _collect_whole(
    schema: Any, value: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    """A pydantic input schema checks the whole input (its own validators too)."""
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return
    try:
        schema.model_validate(value)
    except ValidationError as exc:
        _collect(exc, errors)


def _others(
    errors: dict[str, list[str]], fields: Mapping[str, InputField]
) -> list[str]:
    """Errors not shown next to a field: form-level ones and unknown keys."""
    return [
        f"{key}: {message}" if key else message
        for key, messages in errors.items()
        if key not in fields
        for message in messages
    ]

"""The "fork with edits" form: fields from the state schema, and checking a submission.

Pure (no Django, no engine calls): given the state schema, each key's reducer
kind, the values at the checkpoint and the POST, it says which update to make
or what is wrong, field by field. Only edited fields become the update:

- a last-value field is prefilled with its current value; it is part of the
  update when its parsed value differs;
- a reducer field starts empty: what you type is passed to the reducer (items
  to append for ``operator.add``, messages to add or replace for
  ``add_messages``), exactly as ``update_state`` would.

Each field is checked against its type from the schema (pydantic's strict JSON
mode: ``"5"`` is not an int). A pydantic state schema also validates the whole
merged state, so its own validators report next to the fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from studio import json_input
from studio.input_fields import InputField, input_fields
from studio.presentation.diff import MISSING, Kind, plain
from studio.presenters import ForkField

__all__ = ("FIELD_PREFIX", "BoundFork", "bind_fork", "fork_fields")

FIELD_PREFIX = "state."
_CONTROLS = frozenset({"as_node", "run", "csrfmiddlewaretoken"})
_HELP: dict[str, str] = {
    "value": "",
    "append": "Items to append (a JSON list); the reducer adds them to the current list.",
    "messages": "Messages to add, or to replace by id (a JSON list); leave empty to keep.",
    "reducer": "An update passed to this key's reducer (JSON); leave empty to keep.",
}


@dataclass(frozen=True, slots=True)
class BoundFork:
    """A checked submission: the update to make, or the errors to show."""

    fields: tuple[ForkField, ...]
    update: dict[str, Any] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    @property
    def is_valid(self) -> bool:
        return not self.errors and not any(f.errors for f in self.fields)


def fork_fields(
    schema: Any,
    schema_kind: str,
    keys: tuple[str, ...],
    kinds: Mapping[str, Kind],
    values: Mapping[str, Any],
) -> tuple[ForkField, ...]:
    """The blank form: one field per state key, prefilled from ``values``."""
    specs = _specs(schema, schema_kind)
    return tuple(
        _field(key, specs.get(key), kinds.get(key, "value"), values.get(key, MISSING))
        for key in keys
    )


def bind_fork(
    blank: tuple[ForkField, ...],
    posted: Mapping[str, str],
    *,
    schema: Any,
    schema_kind: str,
    values: Mapping[str, Any],
    reducers: Mapping[str, Callable[[Any, Any], Any]],
) -> BoundFork:
    """Check a submission against the blank form. Never raises for bad input."""
    specs = _specs(schema, schema_kind)
    by_key = {f.key: f for f in blank}
    problems = [
        f"Unknown field {name!r}."
        for name in posted
        if name not in _CONTROLS
        and (
            not name.startswith(FIELD_PREFIX) or name[len(FIELD_PREFIX) :] not in by_key
        )
    ]
    update: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    texts: dict[str, str] = {}
    for key, blank_field in by_key.items():
        text = str(posted.get(FIELD_PREFIX + key, blank_field.value)).replace(
            "\r\n", "\n"
        )
        texts[key] = text
        current = values.get(key, MISSING)
        try:
            value = _parse(blank_field, specs.get(key), text, current)
        except ValueError as exc:
            errors[key] = [str(exc)]
            continue
        if value is not MISSING:
            update[key] = value
    if not errors and not problems:
        _check_model(schema, schema_kind, values, update, reducers, errors, problems)
    if not update and not errors and not problems:
        problems.append("Nothing to change: edit at least one field.")
    fields = tuple(
        replace(f, value=texts[f.key], errors=tuple(errors.get(f.key, ())))
        for f in blank
    )
    return BoundFork(fields=fields, update=update, errors=tuple(problems))


# -- fields -------------------------------------------------------------------------------


def _specs(schema: Any, schema_kind: str) -> dict[str, InputField]:
    if schema is None:
        return {}
    return {f.key: f for f in input_fields(schema, schema_kind)}


def _field(key: str, spec: InputField | None, kind: Kind, current: Any) -> ForkField:
    hint = spec.type_hint if spec is not None else "any JSON"
    if kind != "value":
        return ForkField(
            key=key,
            widget="json",
            value="",
            kind=kind,
            help=_HELP[kind],
            type_hint=hint,
        )
    widget = spec.widget if spec is not None else "json"
    choices: tuple[tuple[str, str], ...] = ()
    if widget in ("checkbox", "choice") and spec is not None:
        pairs = spec.choices or (("true", True), ("false", False))
        choices = (("", "— not set —"), *((text, text) for text, _ in pairs))
        widget = "choice"
    elif widget == "message":
        widget = "json"
    return ForkField(
        key=key,
        widget=widget,
        value=_text(widget, spec, current),
        kind=kind,
        help="",
        type_hint=hint,
        step=spec.step if spec is not None else "",
        choices=choices,
    )


def _text(widget: str, spec: InputField | None, current: Any) -> str:
    if current is MISSING or (current is None and widget != "json"):
        return ""
    if widget == "text" and isinstance(current, str):
        return current
    if widget == "choice" and spec is not None:
        pairs = spec.choices or (("true", True), ("false", False))
        return next((text for text, value in pairs if value == current), "")
    if (
        widget == "number"
        and isinstance(current, int | float)
        and not isinstance(current, bool)
    ):
        return str(current)
    return json.dumps(plain(current), indent=2, ensure_ascii=False)


# -- parsing ----------------------------------------------------------------------------


def _parse(f: ForkField, spec: InputField | None, text: str, current: Any) -> Any:
    """The field's new value, or MISSING when the field leaves the key unchanged."""
    if f.kind != "value":
        if not text.strip():
            return MISSING
        return _json(text, _reducer_type(f.kind, spec))
    if f.widget == "text":
        if text == "" and (current is MISSING or current is None):
            return MISSING
        value: Any = text
    elif f.widget == "choice":
        if text == "":
            return MISSING
        pairs = (spec.choices if spec is not None else ()) or (
            ("true", True),
            ("false", False),
        )
        found = dict(pairs)
        if text not in found:
            raise ValueError(f"Choose one of: {', '.join(found)}.")
        value = found[text]
    elif f.widget == "number":
        if text.strip() == "":
            if current is MISSING or current is None:
                return MISSING
            raise ValueError("Enter a number (the field cannot be emptied).")
        value = _number(text.strip(), spec)
    else:
        if text.strip() == "":
            if current is MISSING:
                return MISSING
            raise ValueError("Enter a JSON value (null to clear it).")
        value = _json(text, _typed(spec))
    if (
        current is not MISSING
        and plain(value) == plain(current)
        and type(value) is type(current)
    ):
        return MISSING
    return value


def _number(text: str, spec: InputField | None) -> int | float:
    whole = spec is None or spec.annotation is int
    try:
        return int(text) if whole else float(text)
    except ValueError:
        raise ValueError(
            "Enter a whole number." if whole else "Enter a number."
        ) from None


def _typed(spec: InputField | None) -> Any:
    if spec is None:
        return Any
    if not spec.nullable:
        return spec.annotation
    try:
        return spec.annotation | None
    except TypeError:  # not a type that supports "|": check without the None
        return spec.annotation


def _reducer_type(kind: str, spec: InputField | None) -> Any:
    if kind == "append" and spec is not None:
        return spec.annotation  # the update is a list like the state's
    return Any


def _json(text: str, annotation: Any) -> Any:
    try:
        value = json_input.loads(text)  # depth, NaN, repeated keys: before pydantic
    except ValueError as exc:
        raise ValueError(f"Not valid JSON: {exc}.") from exc
    if annotation is Any:
        return value
    try:
        adapter = TypeAdapter(annotation)
    except Exception:  # a type pydantic cannot check: accept any JSON
        return value
    try:
        return adapter.validate_json(text, strict=True)
    except ValidationError as exc:
        raise ValueError(_message(exc)) from exc


def _message(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"])
        lines.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return "; ".join(lines[:3])


def _check_model(
    schema: Any,
    schema_kind: str,
    values: Mapping[str, Any],
    update: Mapping[str, Any],
    reducers: Mapping[str, Callable[[Any, Any], Any]],
    errors: dict[str, list[str]],
    problems: list[str],
) -> None:
    """A pydantic state schema validates the merged state (its validators included)."""
    if schema_kind != "pydantic" or not (
        isinstance(schema, type) and issubclass(schema, BaseModel)
    ):
        return
    merged = dict(values)
    for key, value in update.items():
        reducer = reducers.get(key)
        try:
            merged[key] = reducer(merged.get(key), value) if reducer else value
        except Exception as exc:  # the user's reducer refused the update
            errors.setdefault(key, []).append(f"The reducer refused it: {exc}")
    if errors:
        return
    try:
        schema.model_validate(merged)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            loc = [str(p) for p in error["loc"]]
            if loc and loc[0] in schema.model_fields:
                where = ".".join(loc[1:])
                text = f"{where}: {error['msg']}" if where else str(error["msg"])
                errors.setdefault(loc[0], []).append(text)
            else:
                problems.append(str(error["msg"]))

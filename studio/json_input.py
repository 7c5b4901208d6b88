"""JSON typed or sent by people and programs, parsed strictly (pure: no Django).

Every place that takes JSON text from outside (the API's bodies, the start-run
form's raw input, fork edits) parses it with :func:`loads`, which refuses what
Python's ``json`` would accept but the rest of the studio cannot store or show:

- ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON; the database's JSON check
  refuses them after a checkpoint may already be written), and numbers too
  large for a float (``1e400``, which Python reads as infinity);
- a key given twice (``{"action": "reject", "action": "approve"}``: parsers
  disagree on which one wins);
- nesting deeper than :data:`MAX_DEPTH` (a value nested 10,000 deep made
  ``RecursionError`` in the parser, the diff and the serializer).

Each refusal is a ``ValueError`` with a message a person can act on.

:data:`WHOLE_NUMBER` makes an integer field of a strict pydantic model read
JSON's way: ``10`` or ``10.0`` (one number to JSON and to JSON Schema), never
``"10"``, ``true`` or ``10.5``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import ValidationInfo, ValidatorFunctionWrapHandler, WrapValidator

__all__ = ("MAX_DEPTH", "WHOLE_NUMBER", "loads", "whole_number")

MAX_DEPTH = 64
"""The deepest nesting of objects and arrays accepted (state values are far shallower)."""


def loads(text: str | bytes) -> Any:
    """``text`` as JSON data. Raises ``ValueError`` saying what is wrong with it."""
    _check_depth(text)
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_refuse,
            parse_float=_finite,
        )
    except RecursionError:
        raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise ValueError(str(exc)[:200]) from None


def whole_number(
    value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
) -> Any:
    """``10.0`` as ``10`` (JSON has one number type); a form's ``"10"`` as ``10``."""
    mode: str = info.mode  # "string" under model_validate_strings (not in its type)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif mode == "string" and isinstance(value, str):
        text = value.strip()
        if _INTEGER_TEXT.fullmatch(text):
            value = int(text)
    return handler(value)


WHOLE_NUMBER = WrapValidator(whole_number)
"""``Annotated[int, Field(ge=1), WHOLE_NUMBER]``: ``10`` and ``10.0`` pass, ``"10"``
only from a form (``model_validate_strings``). After the ``Field`` (before it, the
bounds vanish from the JSON Schema)."""
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,18}")


def _check_depth(text: str | bytes) -> None:
    """Refuse deep nesting before parsing (brackets outside strings, in one pass)."""
    raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    if raw.count("[") + raw.count("{") <= MAX_DEPTH:
        return
    depth = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep")
        elif char in "]}":
            depth -= 1


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"the key {key!r} appears more than once")
        data[key] = value
    return data


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a JSON number")
    return value


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")

"""StateValidationError: pydantic's ValidationError, raised for a state value.

Imported only when a pydantic state schema refuses a value (``_schema`` imports
this module lazily), so graphs without pydantic states never load pydantic.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from engine.errors import ErrorCode, InvalidUpdateError, error_message

__all__ = ("StateValidationError", "state_validation_error")


class StateValidationError(InvalidUpdateError, ValidationError):
    """A value does not fit a pydantic state schema (LangGraph raises pydantic's
    ``ValidationError`` there; this is one, and an ``InvalidUpdateError`` too).

    ``errors()``, ``error_count()`` and ``title`` are pydantic's; the message
    starts with where the value came from (the input, a node, a command) and an
    ``ErrorCode``, then pydantic's report.
    """

    summary: str = ""

    def __str__(self) -> str:
        detail = ValidationError.__str__(self)
        return f"{self.summary}\n{detail}" if self.summary else detail


def state_validation_error(
    exc: ValidationError, schema: type[Any], where: str
) -> ValidationError:
    """The error to raise for ``exc``: pydantic's own, named for ``where``."""
    errors = exc.errors()
    fields = ", ".join(
        ".".join(str(part) for part in err["loc"]) or "(root)" for err in errors
    )
    summary = error_message(
        f"Invalid value for {where} in state {schema.__name__}: field(s) {fields}: "
        f"{errors[0]['msg']}",
        ErrorCode.INVALID_STATE,
    )
    try:
        details = cast(list[InitErrorDetails], errors)  # same fields, read back
        error = StateValidationError.from_exception_data(exc.title, details)
    except (KeyError, TypeError, ValueError):  # an error type pydantic cannot rebuild
        exc.add_note(summary)
        return exc
    error.summary = summary
    return error

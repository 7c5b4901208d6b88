"""``interrupt(response_schema=...)``: what a client is shown, and checking its answer.

A JSON Schema ``dict`` is shown as given and answers are not checked. A Python
type (pydantic model, dataclass, ``TypedDict``...) is shown as its JSON Schema,
and each answer is validated against it; the validated object is what
``interrupt()`` returns. Pydantic is imported only when a type is given.
"""

from __future__ import annotations

import functools
from typing import Any

from engine.errors import _mark_invalid_resume

__all__ = ("ResumeSchema", "resume_schema")


class ResumeSchema:
    """A response schema given as a Python type: its JSON Schema and its validator."""

    __slots__ = ("_adapter", "json_schema")

    def __init__(self, schema: Any) -> None:
        from pydantic import TypeAdapter  # noqa: PLC0415 - only when a type is given

        self._adapter: Any = TypeAdapter(schema)
        self.json_schema: dict[str, Any] = self._adapter.json_schema()

    def validate(self, answer: Any) -> Any:
        """The answer as the schema's type; pydantic's ``ValidationError`` (marked,
        see ``engine.errors.is_invalid_resume``) when it does not fit."""
        from pydantic import ValidationError  # noqa: PLC0415

        try:
            return self._adapter.validate_python(answer)
        except ValidationError as exc:
            _mark_invalid_resume(exc)
            raise


@functools.lru_cache(maxsize=256)
def _cached(schema: Any) -> ResumeSchema:
    return ResumeSchema(schema)


def resume_schema(schema: Any) -> ResumeSchema | None:
    """The validator for ``schema``; None for no schema or a JSON Schema dict."""
    if schema is None or isinstance(schema, dict):
        return None
    try:
        return _cached(schema)
    except TypeError:  # an unhashable schema object: build it each time
        return ResumeSchema(schema)

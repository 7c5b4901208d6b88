"""Structured answers: a schema's name and JSON Schema, and a model's answer parsed into it.

A schema is a pydantic model class, a dataclass, a TypedDict or a JSON Schema
dict (with a ``title``). Parsing gives an instance of the class for pydantic
models and dataclasses, and a dict for TypedDicts and JSON Schemas (as
LangChain does).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import BaseModel, TypeAdapter

__all__ = (
    "parse_json_text",
    "parse_structured",
    "schema_description",
    "schema_json",
    "schema_name",
)


def _is_model(schema: Any) -> bool:
    return isinstance(schema, type) and issubclass(schema, BaseModel)


def schema_name(schema: Any) -> str:
    if isinstance(schema, dict):
        name = schema.get("title") or schema.get("name")
        if not name:
            raise ValueError(
                "A JSON Schema used as a response format needs a 'title' (its name)."
            )
        return str(name)
    return str(getattr(schema, "__name__", type(schema).__name__))


def schema_description(schema: Any) -> str:
    if isinstance(schema, dict):
        return str(schema.get("description", ""))
    doc = getattr(schema, "__doc__", None) or ""
    if _is_model(schema) and doc == BaseModel.__doc__:
        return ""
    return doc.strip()


def schema_json(schema: Any) -> dict[str, Any]:
    """The JSON Schema of the answer's arguments."""
    if isinstance(schema, dict):
        return dict(schema.get("parameters") or schema.get("schema") or schema)
    if _is_model(schema):
        return dict(schema.model_json_schema())
    return dict(TypeAdapter(schema).json_schema())


def parse_structured(schema: Any, data: Any) -> Any:
    """``data`` (a dict) validated as ``schema``.

    Raises:
        pydantic.ValidationError: the data does not fit the schema.
    """
    if isinstance(schema, dict):
        if not isinstance(data, dict):
            raise ValueError(
                f"Expected an object for {schema_name(schema)}, got {data!r}"
            )
        return data
    if _is_model(schema):
        return schema.model_validate(data)
    if dataclasses.is_dataclass(schema):
        return TypeAdapter(schema).validate_python(data)
    return TypeAdapter(schema).validate_python(data)


def parse_json_text(text: str) -> Any:
    """JSON from a model's text answer, tolerating a fenced ```json block."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        if stripped.startswith("json"):
            stripped = stripped[4:]
    return json.loads(stripped)

"""Pregel's schema methods: the input, output, context and config schemas.

``SchemaMethods`` is a base class of :class:`~engine.pregel.main.Pregel`; the
work is in ``_schemas``, which imports pydantic only when a schema is asked
for, never on a run's path.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._typing import RunnableConfig
from engine.pregel import _schemas
from engine.pregel._subgraph import CompiledGraph
from engine.warnings import LangGraphDeprecatedSinceV10

if TYPE_CHECKING:
    pass

__all__ = ("SchemaMethods",)


class SchemaMethods(CompiledGraph):
    """Names and schemas of a graph, as LangChain's ``Runnable`` exposes them."""

    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        """The graph's name, with ``suffix`` as LangChain adds it (``LangGraphInput``)."""
        return _schemas.graph_name(self._as_pregel, suffix, name)

    @property
    def InputType(self) -> Any:
        """What the input channel accepts (None when the input is several channels)."""
        return _schemas.input_type(self._as_pregel)

    @property
    def OutputType(self) -> Any:
        """What the output channel holds (None when the output is several channels)."""
        return _schemas.output_type(self._as_pregel)

    def get_input_schema(self, config: RunnableConfig | None = None) -> Any:
        """The input as a pydantic model class."""
        return _schemas.input_model(self._as_pregel)

    def get_output_schema(self, config: RunnableConfig | None = None) -> Any:
        """The output as a pydantic model class."""
        return _schemas.output_model(self._as_pregel)

    @property
    def input_schema(self) -> Any:
        """:meth:`get_input_schema` (LangChain's ``Runnable.input_schema``)."""
        return self.get_input_schema()

    @property
    def output_schema(self) -> Any:
        """:meth:`get_output_schema` (LangChain's ``Runnable.output_schema``)."""
        return self.get_output_schema()

    def get_input_jsonschema(
        self, config: RunnableConfig | None = None
    ) -> dict[str, Any]:
        """JSON Schema of the input."""
        schema: dict[str, Any] = self.get_input_schema(config).model_json_schema()
        return schema

    def get_output_jsonschema(
        self, config: RunnableConfig | None = None
    ) -> dict[str, Any]:
        """JSON Schema of the output."""
        schema: dict[str, Any] = self.get_output_schema(config).model_json_schema()
        return schema

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        """JSON Schema of the run's context (``context_schema``), None without one.

        Raises:
            ValueError: a context schema that is not a pydantic model, a
                TypedDict or a dataclass.
        """
        return _schemas.context_jsonschema(self._as_pregel.context_schema)

    def config_schema(self, *, include: Sequence[str] | None = None) -> Any:
        """Deprecated, as in LangGraph 1.0: use :meth:`get_context_jsonschema`.

        The run config as a pydantic model: ``configurable`` is the context
        schema, plus the config keys named in ``include``.
        """
        _deprecated("config_schema")
        return _schemas.config_model(self._as_pregel, include)

    def get_config_jsonschema(
        self, *, include: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """Deprecated, as in LangGraph 1.0: use :meth:`get_context_jsonschema`."""
        _deprecated("get_config_jsonschema")
        schema: dict[str, Any] = _schemas.config_model(
            self._as_pregel, include
        ).model_json_schema()
        return schema


def _deprecated(method: str) -> None:
    warnings.warn(
        LangGraphDeprecatedSinceV10(
            f"`{method}` is deprecated. Use `get_context_jsonschema` instead."
        ),
        stacklevel=3,
    )

"""Tools for the prebuilt agent: plain functions with a name, a description and typed args."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.prebuilt._injected import Injection, find_injections

__all__ = ("Tool", "as_tool", "tool")


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable the model may ask for by ``name`` with JSON ``args``."""

    name: str
    description: str
    func: Callable[..., Any]
    parameters: dict[str, Any]
    """JSON Schema of the arguments."""
    return_direct: bool = False
    injected: tuple[Injection, ...] = ()
    """Parameters the ToolNode fills in (``InjectedState``...), hidden from the model."""

    def invoke(self, args: dict[str, Any]) -> Any:
        return self.func(**args)

    async def ainvoke(self, args: dict[str, Any]) -> Any:
        result = self.func(**args)
        return await result if inspect.isawaitable(result) else result


def _schema(func: Callable[..., Any], hidden: frozenset[str]) -> dict[str, Any]:
    try:
        from pydantic import create_model  # noqa: PLC0415 - only needed for schemas
    except ImportError:  # pragma: no cover
        return {"type": "object"}
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in hidden:
            continue
        annotation = param.annotation if param.annotation is not param.empty else Any
        default = param.default if param.default is not param.empty else ...
        fields[name] = (annotation, default)
    model = create_model(f"{func.__name__}_args", **fields)
    schema: dict[str, Any] = model.model_json_schema()
    return schema


def as_tool(obj: Any) -> Tool:
    """A :class:`Tool` from a Tool, a LangChain tool, or a plain function."""
    if isinstance(obj, Tool):
        return obj
    name = getattr(obj, "name", None)
    if (
        isinstance(name, str)
        and callable(getattr(obj, "invoke", None))
        and not inspect.isfunction(obj)
    ):
        wrapped = getattr(obj, "func", None) or getattr(obj, "coroutine", None)
        injected = find_injections(wrapped) if callable(wrapped) else ()
        hidden = {i.name for i in injected}
        args = dict(getattr(obj, "args", {}) or {})
        return Tool(
            name=name,
            description=str(getattr(obj, "description", "")),
            func=lambda **kwargs: obj.invoke(kwargs),
            parameters={k: v for k, v in args.items() if k not in hidden},
            injected=injected,
        )
    if not callable(obj):
        raise TypeError(f"Cannot use {obj!r} as a tool: pass a function or a Tool")
    injected = find_injections(obj)
    return Tool(
        name=obj.__name__,
        description=inspect.getdoc(obj) or "",
        func=obj,
        parameters=_schema(obj, frozenset(i.name for i in injected)),
        injected=injected,
    )


def tool(func: Callable[..., Any] | None = None, *, return_direct: bool = False) -> Any:
    """Decorator: make a function a :class:`Tool` (``@tool`` or ``@tool(return_direct=True)``)."""

    def wrap(f: Callable[..., Any]) -> Tool:
        base = as_tool(f)
        return Tool(
            base.name,
            base.description,
            base.func,
            base.parameters,
            return_direct,
            base.injected,
        )

    return wrap(func) if func is not None else wrap

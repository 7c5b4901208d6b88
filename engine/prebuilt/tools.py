"""Tools for the prebuilt agent: plain functions with a name, a description and typed args."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.prebuilt._injected import Injection, find_injections
from engine.pregel._node_callable import is_async_callable

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
    args_model: Any = None
    """The pydantic model the model's arguments are checked against (plain functions)."""
    lc_tool: Any = None
    """The LangChain tool this wraps, if any (the ToolNode then calls it directly)."""

    def parse_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """The model's arguments checked (and coerced) against the tool's signature.

        Arguments the function does not take are dropped; those it takes but the
        model did not send are left to the function's defaults.

        Raises:
            pydantic.ValidationError: an argument is missing or has the wrong type.
        """
        if self.args_model is None:
            return args
        checked = self.args_model.model_validate(args)
        return {
            k: getattr(checked, k) for k in self.args_model.model_fields if k in args
        }

    def invoke(self, args: dict[str, Any]) -> Any:
        return self.func(**args)

    async def ainvoke(self, args: dict[str, Any]) -> Any:
        """Await an async tool; run a sync one in a worker thread (as LangChain
        tools do), so that the event loop and the other calls go on."""
        if is_async_callable(self.func):
            return await self.func(**args)
        result = await asyncio.to_thread(functools.partial(self.func, **args))
        return await result if inspect.isawaitable(result) else result


def _args_model(func: Callable[..., Any], hidden: frozenset[str]) -> Any:
    from pydantic import ConfigDict, create_model  # noqa: PLC0415 - only for tools

    fields: dict[str, Any] = {}
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    for name, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in hidden:
            continue
        annotation = (
            hints.get(name, Any) if param.annotation is not param.empty else Any
        )
        default = param.default if param.default is not param.empty else ...
        fields[name] = (annotation, default)
    return create_model(
        f"{func.__name__}_args",
        __config__=ConfigDict(arbitrary_types_allowed=True),
        **fields,
    )


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
            return_direct=bool(getattr(obj, "return_direct", False)),
            injected=injected,
            lc_tool=obj,
        )
    if not callable(obj):
        raise TypeError(f"Cannot use {obj!r} as a tool: pass a function or a Tool")
    injected = find_injections(obj)
    model = _args_model(obj, frozenset(i.name for i in injected))
    return Tool(
        name=obj.__name__,
        description=inspect.getdoc(obj) or "",
        func=obj,
        parameters=model.model_json_schema(),
        injected=injected,
        args_model=model,
    )


def tool(func: Callable[..., Any] | None = None, *, return_direct: bool = False) -> Any:
    """Decorator: make a function a :class:`Tool` (``@tool`` or ``@tool(return_direct=True)``)."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return dataclasses.replace(as_tool(f), return_direct=return_direct)

    return wrap(func) if func is not None else wrap

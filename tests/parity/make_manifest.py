"""Write ``langgraph_manifest.json``: LangGraph 1.2's public modules, names and signatures.

Run it with a Python that has LangGraph installed (``make bench`` creates
``.venv-bench`` with it; any venv with ``langgraph>=1.2,<1.3``,
``langgraph-checkpoint-sqlite`` and ``langgraph-checkpoint-postgres`` will do),
from the repository root, after a LangGraph upgrade::

    .venv-bench/bin/python tests/parity/make_manifest.py

It walks every public module of ``langgraph`` (``langgraph-checkpoint``,
``-checkpoint-sqlite``, ``-checkpoint-postgres`` and ``-prebuilt`` included);
modules and names starting with ``_`` are private and left out. A module's public
names are its ``__all__``; without one, the classes, functions and values it
defines itself (names it merely imports, such as ``typing.Any``, are not part of
its surface; nor are type variables and loggers). Each class or function is described
once, under its shortest public address, by :func:`describe`: parameter names,
kinds and defaults, and for a class its public methods and attributes (those
defined by LangGraph classes, not inherited from ``object`` or LangChain),
TypedDict keys or enum members.

``tests/unit/engine/test_parity_manifest.py`` imports :func:`describe` from here
to describe the engine's objects the same way, so this module imports nothing
but the standard library.
"""

from __future__ import annotations

import ast
import enum
import importlib
import importlib.metadata
import inspect
import json
import logging
import pkgutil
import sys
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = (
    "MANIFEST",
    "describe",
    "describe_member",
    "is_literal",
    "literal_repr",
    "public_names",
)

MANIFEST = Path(__file__).with_name("langgraph_manifest.json")

DISTRIBUTIONS = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langgraph-prebuilt",
)

# Namespace packages (no __init__.py): pkgutil does not list them under langgraph.
NAMESPACE_ROOTS = ("langgraph.checkpoint", "langgraph.store", "langgraph.cache")

_LITERALS = (type(None), bool, int, float, str, bytes)

Description = dict[str, Any]


def is_literal(value: Any) -> bool:
    """Whether ``value`` is compared by value (plain data), not only for presence."""
    if type(value) in _LITERALS:
        return True
    if type(value) in (tuple, frozenset):
        return all(is_literal(item) for item in value)
    return isinstance(value, enum.Enum)


def literal_repr(value: Any) -> str:
    """A stable text for a literal default or constant (enums by class and member)."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if type(value) is frozenset:
        return f"frozenset({sorted(map(literal_repr, value))})"
    if type(value) is tuple:
        return f"({', '.join(literal_repr(item) for item in value)},)"
    return repr(value)


def _params(obj: Any, *, drop_first: bool = False) -> list[str] | None:
    """The signature as Python writes it: ``["a", "b=None", "*", "c=1", "**kw"]``.

    ``"/"`` ends the positional-only parameters and ``"*"`` starts the keyword-only
    ones (when there is no ``*args``); a default that is not plain data is ``...``.
    """
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = list(signature.parameters.values())
    if drop_first and params and params[0].kind is not params[0].VAR_POSITIONAL:
        params = params[1:]
    described: list[str] = []
    star = False
    for param in params:
        kind = param.kind
        if kind is param.VAR_POSITIONAL:
            described.append(f"*{param.name}")
            star = True
            continue
        if kind is param.VAR_KEYWORD:
            described.append(f"**{param.name}")
            continue
        if kind is param.KEYWORD_ONLY and not star:
            described.append("*")
            star = True
        if (
            kind is not param.POSITIONAL_ONLY
            and "/" not in described
            and any(p.kind is p.POSITIONAL_ONLY for p in params)
        ):
            described.append("/")
        if param.default is param.empty:
            described.append(param.name)
        else:
            default = param.default
            text = literal_repr(default) if is_literal(default) else "..."
            described.append(f"{param.name}={text}")
    if params and params[-1].kind is params[-1].POSITIONAL_ONLY:
        described.append("/")
    return described


def _is_public_owner(owner: type, root: str) -> bool:
    return owner.__module__.split(".")[0] == root


def describe_member(cls: type, name: str) -> Description | None:
    """One class member: a method's parameters (without ``self``/``cls``), or an
    attribute (with its value when it is plain data); None when absent."""
    for owner in cls.__mro__:
        if name in vars(owner):
            raw = vars(owner)[name]
            break
    else:
        return None
    if isinstance(raw, staticmethod):
        return {"kind": "method", "params": _params(raw.__func__)}
    if isinstance(raw, classmethod):
        return {"kind": "method", "params": _params(raw.__func__, drop_first=True)}
    if inspect.isfunction(raw):
        return {"kind": "method", "params": _params(raw, drop_first=True)}
    if inspect.isclass(raw):
        return {"kind": "class"}
    if isinstance(raw, property) or inspect.isdatadescriptor(raw):
        return {"kind": "attribute"}
    if callable(raw) and hasattr(raw, "__get__"):
        return {"kind": "method", "params": None}
    if is_literal(raw):
        return {"kind": "attribute", "value": literal_repr(raw)}
    return {"kind": "attribute"}


def _members(cls: type) -> dict[str, Description]:
    root = cls.__module__.split(".")[0]
    members: dict[str, Description] = {}
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is None or not _is_public_owner(owner, root):
            continue  # inherited from object, typing, pydantic, LangChain...
        described = describe_member(cls, name)
        if described is not None:
            if owner is not cls:
                described["defined_in"] = f"{owner.__module__}.{owner.__qualname__}"
            members[name] = described
    return members


def describe(obj: Any) -> Description:
    """What a caller relies on: kind, parameters (names, kinds, defaults), members."""
    if inspect.isclass(obj):
        if _is_typeddict(obj):
            hints = obj.__annotations__
            return {"kind": "typeddict", "keys": sorted(hints)}
        if issubclass(obj, enum.Enum):
            return {"kind": "enum", "names": [m.name for m in obj]}
        return {
            "kind": "class",
            "params": None if _is_protocol(obj) else _params(obj),
            "members": _members(obj),
        }
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj):
        return {"kind": "function", "params": _params(obj)}
    if is_literal(obj):
        return {"kind": "value", "value": literal_repr(obj)}
    if callable(obj) and not _is_typing_form(obj):
        return {"kind": "callable", "params": _params(obj)}
    return {"kind": "value"}


def _is_typeddict(cls: type) -> bool:
    # typing.is_typeddict misses typing_extensions' TypedDicts on some versions
    return typing.is_typeddict(cls) or type(cls).__name__ == "_TypedDictMeta"


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _is_typing_form(obj: Any) -> bool:
    module = getattr(type(obj), "__module__", "")
    return module in ("typing", "typing_extensions", "types")


def _assigned_here(module: ModuleType) -> set[str]:
    """Names the module's own source assigns at top level (not those it imports)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def public_names(module: ModuleType) -> list[str]:
    """``__all__``, else the classes, functions and values the module defines itself."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return sorted(name for name in declared if not name.startswith("_"))
    assigned = _assigned_here(module)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, ModuleType | typing.TypeVar):
            continue
        if isinstance(value, logging.Logger):
            continue
        if inspect.isclass(value) or inspect.isfunction(value):
            if getattr(value, "__module__", None) == module.__name__:
                names.append(name)
        elif name in assigned:
            names.append(name)
    return sorted(names)


def _walk(package: str) -> list[str]:
    found = [package]
    module = importlib.import_module(package)
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if info.name.startswith("_"):
            continue
        found.extend(_walk(f"{package}.{info.name}"))
    return found


def public_modules() -> list[str]:
    """Every importable public module of the installed LangGraph distributions."""
    modules = set(_walk("langgraph"))
    for root in NAMESPACE_ROOTS:
        modules.update(_walk(root))
    return sorted(modules)


def _address(module: str) -> tuple[int, str]:
    return (module.count("."), module)


def build() -> dict[str, Any]:
    modules: dict[str, dict[str, Any]] = {}
    objects: dict[str, Description] = {}
    homes: dict[int, str] = {}  # id(object) -> its shortest public address
    classes: dict[str, Any] = {}
    loaded = {name: importlib.import_module(name) for name in public_modules()}
    for module_name in sorted(loaded, key=_address):
        module = loaded[module_name]
        entries: dict[str, Any] = {}
        for name in public_names(module):
            if not hasattr(module, name):
                continue  # a stale __all__ entry in LangGraph itself
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                home = homes.setdefault(id(value), f"{module_name}.{name}")
                classes.setdefault(home, value)
                if home not in objects:
                    objects[home] = describe(value)
                entries[name] = home
            else:
                entries[name] = describe(value)
        modules[module_name] = dict(sorted(entries.items()))
    # A member a class inherits from another public LangGraph class is recorded
    # under that class's address, so a difference in it is reported once.
    origins = {
        f"{value.__module__}.{value.__qualname__}": address
        for address, value in classes.items()
        if inspect.isclass(value)
    }
    for address, described in objects.items():
        for member in described.get("members", {}).values():
            owner = member.pop("defined_in", None)
            if owner in origins and origins[owner] != address:
                member["defined_in"] = origins[owner]
    return {
        "generated_by": "tests/parity/make_manifest.py",
        "python": ".".join(map(str, sys.version_info[:2])),
        "distributions": {
            dist: importlib.metadata.version(dist) for dist in DISTRIBUTIONS
        },
        "modules": dict(sorted(modules.items())),
        "objects": dict(sorted(objects.items())),
    }


def dump(value: Any, depth: int = 0, key: str = "") -> str:
    """JSON with one line per name, member or parameter list (readable diffs)."""
    expand = isinstance(value, dict) and value and (depth < 3 or key == "members")
    if not expand:
        return json.dumps(value)
    pad = " " * (depth + 1)
    items = [f"{pad}{json.dumps(k)}: {dump(v, depth + 1, k)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"


def main() -> None:
    manifest = build()
    MANIFEST.write_text(dump(manifest) + "\n")
    counts = (len(manifest["modules"]), len(manifest["objects"]))
    print(f"wrote {MANIFEST}: {counts[0]} modules, {counts[1]} classes and functions")


if __name__ == "__main__":
    main()

"""Every public engine module declares a sorted, complete ``__all__`` (httpx-style).

Public means: no path component starts with ``_``. Sorted means ruff's RUF022
"isort-style" order (SCREAMING_CASE, then CamelCase, then the rest), the order the
modules are written in. Complete means every class and function the module defines
under a public name is exported, and every exported name exists.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

import engine

# Public helpers that are not (yet) exported; each is a finding for the lead.
UNDECLARED_KNOWN: dict[str, str] = {}


def public_modules() -> list[str]:
    names = ["engine"]
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        names.append(info.name)
    return sorted(names)


def import_or_skip(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # optional backends (sqlite, postgres drivers)
        pytest.skip(f"{name}: {exc}")


def isort_key(name: str) -> tuple[int, str]:
    if re.fullmatch(r"[A-Z0-9_]+", name):
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def defined_here(module: ModuleType) -> list[str]:
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == module.__name__
    )


def known_gap(name: str) -> list[pytest.MarkDecorator]:
    if name not in UNDECLARED_KNOWN:
        return []
    return [
        pytest.mark.xfail(
            strict=True,
            reason=f"engine: public names missing from __all__: {UNDECLARED_KNOWN[name]}",
        )
    ]


MODULES = public_modules()


def test_public_modules_are_discovered() -> None:
    for expected in (
        "engine.channels",
        "engine.checkpoint.memory",
        "engine.checkpoint.serde.jsonplus",
        "engine.config",
        "engine.errors",
        "engine.graph",
        "engine.graph.message",
        "engine.runtime",
        "engine.types",
    ):
        assert expected in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_every_name_exists(name: str) -> None:
    module = import_or_skip(name)
    exported = getattr(module, "__all__", None)
    if exported is None:
        assert defined_here(module) == [], f"{name} defines public names but no __all__"
        return

    assert list(exported) == sorted(exported, key=isort_key), name
    assert len(set(exported)) == len(exported), name
    assert [n for n in exported if not hasattr(module, n)] == [], name


@pytest.mark.parametrize("name", [pytest.param(n, marks=known_gap(n)) for n in MODULES])
def test_all_is_complete(name: str) -> None:
    module = import_or_skip(name)
    exported = set(getattr(module, "__all__", ()))

    assert [n for n in defined_here(module) if n not in exported] == []


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (
            "engine.graph",
            {"END", "START", "MessagesState", "StateGraph", "add_messages"},
        ),
        (
            "engine.types",
            {
                "Command",
                "Interrupt",
                "RetryPolicy",
                "Send",
                "StateSnapshot",
                "interrupt",
            },
        ),
        (
            "engine.errors",
            {
                "EmptyInputError",
                "GraphInterrupt",
                "GraphRecursionError",
                "InvalidUpdateError",
            },
        ),
        ("engine.config", {"get_config", "get_store", "get_stream_writer"}),
        ("engine.runtime", {"Runtime", "get_runtime"}),
        ("engine.checkpoint.memory", {"InMemorySaver"}),
        (
            "engine.channels",
            {
                "BinaryOperatorAggregate",
                "EphemeralValue",
                "LastValue",
                "NamedBarrierValue",
                "Topic",
            },
        ),
    ],
)
def test_langgraph_names_are_exported(module: str, names: set[str]) -> None:
    # A LangGraph program ports by renaming its imports: these names must be there.
    assert names <= set(importlib.import_module(module).__all__)


def test_control_flow_signals_are_base_exceptions() -> None:
    from engine.errors import GraphBubbleUp, GraphInterrupt, ParentCommand  # noqa: PLC0415

    assert not issubclass(GraphBubbleUp, Exception)
    assert issubclass(GraphInterrupt, GraphBubbleUp)
    assert issubclass(ParentCommand, GraphBubbleUp)

"""The engine against LangGraph 1.2's public surface, recorded in a manifest.

``tests/parity/langgraph_manifest.json`` (written by ``tests/parity/make_manifest.py``
from an installed LangGraph) lists every public module of LangGraph, its public
names, and for classes and functions their parameters (names, kinds, defaults)
and public methods. Porting a program is a change of import prefix only if each
of these exists at the same path under ``engine`` and accepts the same calls:

- every module and name exists (``langgraph.x.Y`` -> ``engine.x.Y``);
- a constant has the same value; a LangGraph class is a class here too, a
  TypedDict has the same keys, an enum the same members;
- a function, class or method accepts every LangGraph parameter: positional ones
  at the same position under the same name, keyword-only ones by name, with the
  same default (a default that is not plain data only has to exist), ``*args``
  and ``**kwargs`` where LangGraph has them; our extra parameters are optional.

``DIFFERENCES`` is the allow-list: each entry is a LangGraph address (a module, a
name, ``Class.method``, ``function(param)``, ``TypedDict['key']``) and a one-line
reason; an entry covers what lies under its address. ``DELIBERATE`` entries are
explained, with how to get LangGraph's behaviour, in the README's "Differences
from LangGraph" section (a test checks each is mentioned there); ``MISSING``
entries ("not yet: issue 13") are what remains to port (none today). An entry that no longer
covers a difference fails the test, so the list only shrinks. After a LangGraph
upgrade, regenerate the manifest (``tests/parity/make_manifest.py``) and read
what this test reports.
"""

from __future__ import annotations

import functools
import importlib
import json
from types import ModuleType
from typing import Any

import pytest

from engine.graph import START, StateGraph
from engine.runtime import Runtime
from tests.parity.make_manifest import MANIFEST, describe, describe_member

NOT_YET = "not yet: issue 13"


def _group(reason: str, *addresses: str) -> dict[str, str]:
    return dict.fromkeys(addresses, reason)


_PREGEL = "langgraph.pregel.Pregel"

# Deliberate: each is explained, with how to get LangGraph's behaviour, in the
# README's "Differences from LangGraph" section.
DELIBERATE: dict[str, str] = {
    **_group(
        "Serializer: tagged JSON, never pickle; allow classes with register_type()",
        "langgraph.checkpoint.serde.jsonplus.EMPTY_BYTES",
        "langgraph.checkpoint.serde.jsonplus.EXT_CONSTRUCTOR_KW_ARGS",
        "langgraph.checkpoint.serde.jsonplus.EXT_CONSTRUCTOR_POS_ARGS",
        "langgraph.checkpoint.serde.jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG",
        "langgraph.checkpoint.serde.jsonplus.EXT_METHOD_SINGLE_ARG",
        "langgraph.checkpoint.serde.jsonplus.EXT_NUMPY_ARRAY",
        "langgraph.checkpoint.serde.jsonplus.EXT_PYDANTIC_V1",
        "langgraph.checkpoint.serde.jsonplus.EXT_PYDANTIC_V2",
        "langgraph.checkpoint.serde.jsonplus.EXT_DELTA_SNAPSHOT",
        "langgraph.checkpoint.serde.jsonplus.InvalidModuleError",
        "langgraph.checkpoint.serde.jsonplus.LC_REVIVER",
        "langgraph.checkpoint.serde.jsonplus.JsonPlusSerializer",
        "langgraph.checkpoint.base.BaseCheckpointSaver.with_allowlist",
    ),
    **_group(
        "Storage layout: our tables differ (values stored once per version, deltas)",
        "langgraph.checkpoint.base.LATEST_VERSION",
        "langgraph.checkpoint.postgres.base",
        "langgraph.checkpoint.postgres.BasePostgresSaver",
        "langgraph.checkpoint.sqlite.utils",
        "langgraph.store.postgres.base",
        "langgraph.store.sqlite.base",
        "langgraph.store.sqlite.SqliteStore.MIGRATIONS",
        "langgraph.store.sqlite.SqliteStore.VECTOR_MIGRATIONS",
    ),
    **_group(
        'ShallowPostgresSaver: deprecated in LangGraph; use durability="exit"',
        "langgraph.checkpoint.postgres.ShallowPostgresSaver",
        "langgraph.checkpoint.postgres.aio.AsyncShallowPostgresSaver",
        "langgraph.checkpoint.postgres.shallow",
    ),
    **_group(
        "MessageGraph: deprecated in LangGraph; use StateGraph(MessagesState)",
        "langgraph.graph.MessageGraph",
        "langgraph.graph.message.MessageGraph",
    ),
    **_group(
        "HumanInterrupt: deprecated in LangGraph 1.0 (langgraph.prebuilt.interrupt)",
        "langgraph.prebuilt.interrupt",
    ),
    **_group(
        "LangGraph internals: langgraph.utils shims, langgraph.pregel.debug printers",
        "langgraph.utils",
        "langgraph.pregel.debug",
    ),
    **_group(
        "CompiledStateGraph: built by StateGraph.compile(); its task class is the runtime's",
        "langgraph.graph.state.CompiledStateGraph(+channels)",
        "langgraph.graph.state.CompiledStateGraph(+input_channels)",
        "langgraph.graph.state.CompiledStateGraph(+nodes)",
        "langgraph.graph.state.CompiledStateGraph(+output_channels)",
        "langgraph.graph.state.CompiledStateGraph(builder)",
        "langgraph.graph.state.CompiledStateGraph(schema_to_mapper)",
        "langgraph.graph.state.CompiledStateGraph.attach_branch",
        "langgraph.graph.state.CompiledStateGraph.attach_edge",
        "langgraph.graph.state.CompiledStateGraph.attach_node",
        "langgraph.types.PregelExecutableTask",
    ),
    **_group(
        "UUID.subsec: reads UUID versions 7 and 8; the engine makes version 6 ids",
        "langgraph.checkpoint.base.id.UUID.subsec",
    ),
}

# Still to port (issue 13): the README's differences list names them in one line.
MISSING: dict[str, str] = {}

DIFFERENCES: dict[str, str] = {**DELIBERATE, **MISSING}


# -- comparing ---------------------------------------------------------------------


def engine_address(langgraph_address: str) -> str:
    return "engine" + langgraph_address.removeprefix("langgraph")


class Signature:
    """A parameter list from the manifest's notation, ready to compare."""

    def __init__(self, params: list[str]) -> None:
        self.positional: list[tuple[str, str | None]] = []
        self.keyword: dict[str, str | None] = {}
        self.positional_only = 0
        self.var_positional = False
        self.var_keyword = False
        keyword_only = False
        for param in params:
            if param == "/":
                self.positional_only = len(self.positional)
            elif param == "*":
                keyword_only = True
            elif param.startswith("**"):
                self.var_keyword = True
            elif param.startswith("*"):
                self.var_positional = True
                keyword_only = True
            else:
                name, _, default = param.partition("=")
                value = default if "=" in param else None
                if keyword_only:
                    self.keyword[name] = value
                else:
                    self.positional.append((name, value))

    def by_keyword(self, name: str) -> tuple[bool, str | None]:
        """Whether ``name`` can be passed by keyword here, and its default."""
        if name in self.keyword:
            return True, self.keyword[name]
        for index, (own, default) in enumerate(self.positional):
            if own == name and index >= self.positional_only:
                return True, default
        return False, None


def _default_problem(theirs: str | None, ours: str | None) -> str | None:
    if theirs is None:
        return None
    if ours is None:
        return f"has no default here (LangGraph: {theirs})"
    if theirs != "..." and ours != theirs:
        return f"defaults to {ours} here (LangGraph: {theirs})"
    return None


def compare_params(theirs: list[str], ours: list[str]) -> dict[str, str]:
    """Differences that break a call written for LangGraph: ``{"(param)": why}``."""
    lg, own = Signature(theirs), Signature(ours)
    problems: dict[str, str] = {}
    if lg.var_positional and not own.var_positional:
        problems["(*args)"] = "takes no *args here"
    if lg.var_keyword and not own.var_keyword:
        problems["(**kwargs)"] = "takes no **kwargs here"
    for index, (name, default) in enumerate(lg.positional):
        if index >= len(own.positional):
            if not own.var_positional:
                problems[f"({name})"] = f"no positional parameter {index} here"
            continue
        own_name, own_default = own.positional[index]
        if index >= lg.positional_only and own_name != name:
            problems[f"({name})"] = f"positional parameter {index} is {own_name!r} here"
            continue
        if why := _default_problem(default, own_default):
            problems[f"({name})"] = why
    for name, default in lg.keyword.items():
        accepted, own_default = own.by_keyword(name)
        if not accepted:
            problems[f"({name})"] = "no such keyword parameter here"
        elif why := _default_problem(default, own_default):
            problems[f"({name})"] = why
    lg_names = {name for name, _ in lg.positional} | set(lg.keyword)
    for index, (name, default) in enumerate(own.positional):
        if default is None and name not in lg_names and index >= len(lg.positional):
            problems[f"(+{name})"] = "an extra required parameter here"
    for name, default in own.keyword.items():
        if default is None and name not in lg_names:
            problems[f"(+{name})"] = "an extra required parameter here"
    return problems


@functools.cache
def _samples() -> tuple[Any, ...]:
    """Engine instances, for attributes that are set per instance, not on the class."""
    builder = StateGraph(dict)
    builder.add_node("node", lambda state: state)
    builder.add_edge(START, "node")
    return (builder.compile(), Runtime())


def _has_attribute(cls: type, name: str) -> bool:
    if hasattr(cls, name):
        return True
    if any(name in getattr(klass, "__annotations__", {}) for klass in cls.__mro__):
        return True
    return any(isinstance(s, cls) and hasattr(s, name) for s in _samples())


def compare_object(address: str, theirs: dict[str, Any], ours: Any) -> dict[str, str]:
    """Differences between a LangGraph class or function and the engine's object."""
    problems: dict[str, str] = {}
    mine = describe(ours)
    kind = theirs["kind"]
    if kind == "typeddict":
        if mine["kind"] != "typeddict":
            return {address: "is not a TypedDict here"}
        for key in sorted(set(theirs["keys"]) - set(mine["keys"])):
            problems[f"{address}[{key!r}]"] = "no such key here"
        return problems
    if kind == "enum":
        if mine["kind"] != "enum":
            return {address: "is not an enum here"}
        for member in sorted(set(theirs["names"]) - set(mine["names"])):
            problems[f"{address}.{member}"] = "no such member here"
        return problems
    if kind == "class" and mine["kind"] != "class":
        return {address: "is a class in LangGraph, not here"}
    if theirs.get("params") is not None and mine.get("params") is not None:
        for key, why in compare_params(theirs["params"], mine["params"]).items():
            problems[f"{address}{key}"] = why
    for name, member in theirs.get("members", {}).items():
        where = f"{member.get('defined_in', address)}.{name}"
        if not _has_attribute(ours, name):
            problems[where] = "no such member here"
            continue
        if member["kind"] != "method" or member.get("params") is None:
            continue
        own = describe_member(ours, name)
        if own is None or own["kind"] != "method":
            continue  # an attribute holding a callable; presence is what we check
        if own.get("params") is None:
            continue
        for key, why in compare_params(member["params"], own["params"]).items():
            problems[f"{where}{key}"] = why
    return problems


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def find_differences(manifest: dict[str, Any]) -> dict[str, str]:
    """Every difference between the manifest and the engine: ``{address: why}``."""
    problems: dict[str, str] = {}
    compared: set[tuple[str, int]] = set()
    objects = manifest["objects"]
    for module_name, names in manifest["modules"].items():
        module = _import(engine_address(module_name))
        if module is None:
            problems[module_name] = f"no module {engine_address(module_name)}"
            continue
        for name, entry in names.items():
            address = f"{module_name}.{name}"
            if not hasattr(module, name):
                problems[address] = f"{engine_address(module_name)} has no {name}"
                continue
            ours = getattr(module, name)
            if isinstance(entry, str):  # a class or function, described once
                if (entry, id(ours)) in compared:
                    continue
                compared.add((entry, id(ours)))
                problems.update(compare_object(entry, objects[entry], ours))
            elif "value" in entry:
                mine = describe(ours)
                if mine.get("value") != entry["value"]:
                    problems[address] = (
                        f"is {mine.get('value', type(ours).__name__)} here "
                        f"(LangGraph: {entry['value']})"
                    )
    return problems


def covered_by(address: str, entry: str) -> bool:
    return address == entry or any(
        address.startswith(entry + sep) for sep in (".", "(", "[")
    )


def _load_manifest() -> dict[str, Any]:
    return json.loads(MANIFEST.read_text())


@pytest.fixture(scope="module")
def differences() -> dict[str, str]:
    return find_differences(_load_manifest())


# -- the tests -------------------------------------------------------------------


def test_the_manifest_describes_langgraph_1_2() -> None:
    manifest = _load_manifest()

    assert manifest["distributions"]["langgraph"].startswith("1.2.")
    assert "langgraph.graph" in manifest["modules"]
    assert "langgraph.checkpoint.sqlite" in manifest["modules"]


def test_the_engine_has_langgraphs_public_modules_names_and_signatures(
    differences: dict[str, str],
) -> None:
    unexplained = {
        address: why
        for address, why in differences.items()
        if not any(covered_by(address, entry) for entry in DIFFERENCES)
    }

    assert not unexplained, "\n" + "\n".join(
        f"{address}: {why}" for address, why in sorted(unexplained.items())
    )


def test_every_allowed_difference_is_still_a_difference(
    differences: dict[str, str],
) -> None:
    stale = [
        entry
        for entry in DIFFERENCES
        if not any(covered_by(address, entry) for address in differences)
    ]

    assert not stale, f"remove these DIFFERENCES entries, they now match: {stale}"


def test_the_readme_explains_every_deliberate_difference() -> None:
    readme = (MANIFEST.parents[2] / "README.md").read_text()
    section = readme.split("## Differences from LangGraph", 1)[1].split("\n## ", 1)[0]
    for reason in set(DELIBERATE.values()):
        label = reason.split(":", 1)[0]
        assert label in section, f"README's differences do not mention {label!r}"
    if MISSING:  # and it says what is still missing
        assert "not yet" in section.lower()
    else:
        assert "`MISSING` list is\nempty" in section


def test_every_allowed_difference_gives_a_one_line_reason() -> None:
    for entry, reason in DIFFERENCES.items():
        assert entry.startswith("langgraph"), entry
        assert reason.strip() and "\n" not in reason, entry


# -- the comparison itself -----------------------------------------------------------


def _params(function: Any) -> list[str]:
    described = describe(function)["params"]
    assert described is not None
    return list(described)


def test_compare_params_accepts_the_same_call_shape_with_extras_optional() -> None:
    def theirs(a, b=None, *, c=1, **kwargs): ...
    def ours(a, b=None, *, c=1, d=2, **kwargs): ...

    assert compare_params(_params(theirs), _params(ours)) == {}


@pytest.mark.parametrize(
    ("ours", "address"),
    [
        (lambda b, a=None, *, c=1, **kwargs: None, "(a)"),  # positions swapped
        (lambda a, b=0, *, c=1, **kwargs: None, "(b)"),  # another default
        (lambda a, b=None, **kwargs: None, "(c)"),  # keyword missing
        (lambda a, b=None, *, c=1: None, "(**kwargs)"),
        (lambda a, b=None, *, c=1, d, **kwargs: None, "(+d)"),  # required extra
    ],
)
def test_compare_params_finds_what_breaks_a_langgraph_call(
    ours: Any, address: str
) -> None:
    def theirs(a, b=None, *, c=1, **kwargs): ...

    assert address in compare_params(_params(theirs), _params(ours))


def test_an_entry_covers_the_addresses_below_it() -> None:
    assert covered_by("langgraph.pregel.remote.RemoteGraph", "langgraph.pregel.remote")
    assert covered_by("langgraph.func.task(timeout)", "langgraph.func.task")
    assert not covered_by("langgraph.func.tasks", "langgraph.func.task")


def test_no_private_module_or_name_is_in_the_manifest() -> None:
    manifest = _load_manifest()
    for module_name, names in manifest["modules"].items():
        assert not any(part.startswith("_") for part in module_name.split("."))
        assert not any(name.startswith("_") for name in names), module_name

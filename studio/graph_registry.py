"""The graph registry: ``settings.STUDIO_GRAPHS`` name -> compiled graph, loaded lazily.

An entry is ``"package.module:attr"`` or ``"path/to/file.py:attr"`` (relative to the
repository root, like ``langgraph.json``). ``attr`` is a compiled graph, or a callable
taking no arguments that returns one. Nothing is imported until a graph is asked for.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import sys
import threading
from pathlib import Path
from types import FunctionType
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from studio.errors import GraphNotFound

__all__ = (
    "GraphLoadError",
    "clear_cache",
    "declared",
    "describe",
    "get_graph",
    "graph_names",
    "graph_specs",
)

_lock = threading.Lock()
_loaded: dict[tuple[str, str], Any] = {}


class GraphLoadError(Exception):
    """A ``STUDIO_GRAPHS`` entry could not be imported or did not yield a graph.

    An operator's configuration error: it names the entry and keeps the cause.
    """

    def __init__(self, name: str, spec: str, reason: str) -> None:
        super().__init__(f"STUDIO_GRAPHS[{name!r}] = {spec!r}: {reason}")
        self.name = name
        self.spec = spec
        self.reason = reason


def graph_specs() -> dict[str, str]:
    """The configured entries, by name, sorted. Imports nothing.

    ``STUDIO_GRAPHS`` plus, when ``STUDIO_GRAPHS_FILE`` names a ``langgraph.json``
    file, its ``graphs`` map (paths resolved against the file's folder).
    """
    graphs: dict[str, str] = dict(getattr(settings, "STUDIO_GRAPHS", {}))
    graphs.update(_file_specs(getattr(settings, "STUDIO_GRAPHS_FILE", "") or ""))
    return dict(sorted(graphs.items()))


def _file_specs(path_text: str) -> dict[str, str]:
    """The ``graphs`` map of the ``STUDIO_GRAPHS_FILE`` file, read again only when
    the file changed (its modification time or size): a worker asks for it twice
    a run, pages on every render, and reading it resolved every ``.py`` entry's
    path again each time."""
    if not path_text:
        return {}
    path = Path(path_text)
    if not path.is_absolute():
        path = Path(settings.BASE_DIR) / path
    try:
        stat = path.stat()
    except OSError as exc:
        raise GraphLoadError(
            "*", str(path), f"cannot read the graphs file: {exc}"
        ) from exc
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    cached = _file_cache.get(key)
    if cached is None:
        cached = _read_graphs_file(path)
        with _lock:
            _file_cache.clear()  # one file at a time: the setting names one
            _file_cache[key] = cached
    return dict(cached)


_file_cache: dict[tuple[str, int, int], dict[str, str]] = {}


def _read_graphs_file(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise GraphLoadError(
            "*", str(path), f"cannot read the graphs file: {exc}"
        ) from exc
    graphs = data.get("graphs") if isinstance(data, dict) else None
    if not isinstance(graphs, dict):
        raise GraphLoadError("*", str(path), 'the file has no "graphs" object')
    specs: dict[str, str] = {}
    for name, spec in graphs.items():
        if not isinstance(spec, str):
            raise GraphLoadError(str(name), repr(spec), "each graph must be a string")
        target, sep, attr = spec.rpartition(":")
        if sep and target.endswith(".py") and not Path(target).is_absolute():
            target = str((path.parent / target).resolve())
            spec = f"{target}:{attr}"
        specs[str(name)] = spec
    return specs


def graph_names() -> list[str]:
    return list(graph_specs())


def get_graph(name: str) -> Any:
    """The compiled graph registered as ``name``; loaded on first use, then cached."""
    spec = graph_specs().get(name)
    if spec is None:
        raise GraphNotFound(f"There is no graph named {name!r}.", graph=name)
    key = (name, spec)
    with _lock:
        if key not in _loaded:
            _loaded[key] = _load(name, spec)
        return _loaded[key]


def describe(name: str) -> str:
    """One line about the graph: the first line of its module's docstring.

    Falls back to the docstring of the entry's factory function; ``""`` when
    neither has one.
    Call after :func:`get_graph` succeeded (the module is then imported).
    """
    spec = graph_specs().get(name)
    if spec is None:
        raise GraphNotFound(f"There is no graph named {name!r}.", graph=name)
    target, _, attr = spec.rpartition(":")
    try:
        module = (
            import_file(target)
            if target.endswith(".py")
            else importlib.import_module(target)
        )
    except Exception:
        return ""
    factory = getattr(module, attr, None)
    factory_doc = factory.__doc__ if isinstance(factory, FunctionType) else None
    for doc in (module.__doc__, factory_doc):
        if doc and doc.strip():
            return doc.strip().splitlines()[0].strip().replace("``", "")
    return ""


def declared(name: str, attr: str) -> Any:
    """A module-level declaration next to the graph's factory (``GOVERNANCE``,
    ``THREAD_TITLE``...), or None: unknown graph, module that cannot be imported,
    or no such attribute."""
    spec = graph_specs().get(name)
    if spec is None:
        return None
    target = spec.rpartition(":")[0]
    try:
        module = (
            import_file(target)
            if target.endswith(".py")
            else importlib.import_module(target)
        )
    except Exception:  # an unloadable entry cannot run either; its pages say why
        return None
    return getattr(module, attr, None)


def clear_cache() -> None:
    with _lock:
        _loaded.clear()


@receiver(setting_changed)
def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "STUDIO_GRAPHS":
        clear_cache()


def _load(name: str, spec: str) -> Any:
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise GraphLoadError(
            name, spec, 'expected "module:attr" or "path/to/file.py:attr".'
        )
    try:
        module = (
            import_file(target)
            if target.endswith(".py")
            else importlib.import_module(target)
        )
    except Exception as exc:
        raise GraphLoadError(name, spec, f"import failed: {exc!r}") from exc
    try:
        obj = getattr(module, attr)
    except AttributeError as exc:
        raise GraphLoadError(
            name, spec, f"{target} has no attribute {attr!r}."
        ) from exc
    if not hasattr(obj, "invoke") and callable(getattr(obj, "compile", None)):
        try:
            obj = obj.compile()
        except Exception as exc:
            raise GraphLoadError(name, spec, f"compile() failed: {exc!r}") from exc
    if not hasattr(obj, "invoke") and callable(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise GraphLoadError(name, spec, f"{attr}() failed: {exc!r}") from exc
    if not hasattr(obj, "invoke"):
        raise GraphLoadError(
            name, spec, f"{attr} is not a compiled graph ({type(obj).__name__})."
        )
    return obj


def import_file(target: str) -> Any:
    """The module of the file ``target`` (relative to the repository root), imported
    once under a name made of its resolved path."""
    known = _module_names.get(target)
    if known is not None and known in sys.modules:
        return sys.modules[known]  # without resolving its path again
    path = Path(target)
    if not path.is_absolute():
        path = Path(settings.BASE_DIR) / path
    digest = hashlib.sha1(
        str(path.resolve()).encode(), usedforsecurity=False
    ).hexdigest()[:10]
    module_name = f"_studio_graph_{path.stem}_{digest}"
    if module_name in sys.modules:
        _module_names[target] = module_name
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None or not path.is_file():
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    _module_names[target] = module_name
    return module


_module_names: dict[str, str] = {}
"""``import_file``'s targets and the names their modules were imported under."""

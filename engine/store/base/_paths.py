"""Field paths: which text of a stored value is embedded for semantic search.

A path names parts of a JSON-like value:

* ``"$"`` (or ``""``): the whole value, as JSON text with sorted keys;
* ``"a.b"``: key ``b`` of the object under key ``a``;
* ``"items[0]"``, ``"items[-1]"``, ``"items[*]"``: one element, counted from the
  end, or every element of a list;
* ``"*"``: every value of an object (or element of a list);
* ``"{title,meta.author}"``: several fields of one object, each a dotted path.

Each selected scalar becomes one text (``str(value)``), each selected object or
list its JSON text; missing parts and ``None`` select nothing. Pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ("get_text_at_path", "tokenize_path")

_CLOSERS = {"[": "]", "{": "}"}


def tokenize_path(path: str) -> list[str]:
    """Split a path into tokens: field names, ``[...]`` selectors and ``{...}`` groups.

    Example::

        tokenize_path("a.items[*].{x,y.z}")  # ["a", "items", "[*]", "{x,y.z}"]
    """
    tokens: list[str] = []
    name: list[str] = []
    i = 0
    while i < len(path):
        char = path[i]
        if char in _CLOSERS:
            if name:
                tokens.append("".join(name))
                name = []
            end = _group_end(path, i)
            tokens.append(path[i:end])
            i = end
            continue
        if char == ".":
            if name:
                tokens.append("".join(name))
                name = []
        else:
            name.append(char)
        i += 1
    if name:
        tokens.append("".join(name))
    return tokens


def _group_end(path: str, start: int) -> int:
    """Index just past the bracket or brace group opening at ``start`` (or the end)."""
    opener, closer = path[start], _CLOSERS[path[start]]
    depth = 0
    for i in range(start, len(path)):
        if path[i] == opener:
            depth += 1
        elif path[i] == closer:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(path)


def get_text_at_path(obj: Any, path: str | Sequence[str]) -> list[str]:
    """The texts a path selects in ``obj`` (see the module docstring), in order.

    Args:
        obj: a JSON-like value (dicts, lists, strings, numbers, booleans, None).
        path: a path string, or the tokens :func:`tokenize_path` made from one.

    Example::

        get_text_at_path({"items": [{"x": "a"}, {"x": "b"}]}, "items[*].x")  # ["a", "b"]
    """
    if isinstance(obj, Mapping) and not isinstance(obj, dict):
        obj = dict(obj)
    if not path or path == "$":
        return [_json(obj)]
    tokens = tokenize_path(path) if isinstance(path, str) else list(path)
    return _select(obj, tokens, 0)


def _select(obj: Any, tokens: list[str], at: int) -> list[str]:
    if at == len(tokens):
        return _leaf(obj)
    token = tokens[at]
    if token.startswith("[") and token.endswith("]"):
        return _select_index(obj, token[1:-1], tokens, at)
    if token.startswith("{") and token.endswith("}"):
        return _select_group(obj, token[1:-1]) if isinstance(obj, dict) else []
    if token == "*":
        if not isinstance(obj, (dict, list)):
            return []
        children = obj.values() if isinstance(obj, dict) else obj
        return [text for child in children for text in _select(child, tokens, at + 1)]
    if isinstance(obj, dict) and token in obj:
        return _select(obj[token], tokens, at + 1)
    return []


def _select_index(obj: Any, index: str, tokens: list[str], at: int) -> list[str]:
    if not isinstance(obj, list):
        return []
    if index == "*":
        return [text for child in obj for text in _select(child, tokens, at + 1)]
    try:
        position = int(index)
    except ValueError:
        return []
    if position < 0:
        position += len(obj)
    if not 0 <= position < len(obj):
        return []
    return _select(obj[position], tokens, at + 1)


def _select_group(obj: dict[str, Any], fields: str) -> list[str]:
    """``{a,b.c}``: each field is a dotted path of object keys."""
    texts: list[str] = []
    for field in fields.split(","):
        keys = tokenize_path(field.strip())
        if not keys:
            continue
        current: Any = obj
        for key in keys:
            if not isinstance(current, dict) or key not in current:
                current = None
                break
            current = current[key]
        texts.extend(_leaf(current))
    return texts


def _leaf(obj: Any) -> list[str]:
    if isinstance(obj, (str, int, float, bool)):
        return [str(obj)]
    if isinstance(obj, (dict, list)):
        return [_json(obj)]
    return []


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)

"""Field paths of semantic search: tokenize_path and get_text_at_path."""

from __future__ import annotations

import json

import pytest

from engine.store.base import get_text_at_path, tokenize_path

DOC = {
    "name": "test",
    "info": {
        "age": 25,
        "tags": ["a", "b", "c"],
        "meta": {"created": "2024-01-01", "updated": "2024-01-02"},
    },
    "items": [
        {"id": 1, "value": "first", "tags": ["x", "y"]},
        {"id": 2, "value": "second", "tags": ["y", "z"]},
        {"id": 3, "value": "third", "tags": ["z", "w"]},
    ],
    "empty": None,
    "zeros": [0, 0.0, "0"],
    "empty_list": [],
    "empty_dict": {},
    "flag": True,
}


@pytest.mark.parametrize(
    ("path", "tokens"),
    [
        ("a.b.c", ["a", "b", "c"]),
        ("items[*].value", ["items", "[*]", "value"]),
        ("items[-1]", ["items", "[-1]"]),
        ("{a,b.c}", ["{a,b.c}"]),
        ("x.{a,b}.y", ["x", "{a,b}", "y"]),
        ("m[[0]]", ["m", "[[0]]"]),
        ("", []),
    ],
)
def test_tokenize_path(path: str, tokens: list[str]) -> None:
    assert tokenize_path(path) == tokens


@pytest.mark.parametrize(
    ("path", "texts"),
    [
        ("name", ["test"]),
        ("info.age", ["25"]),
        ("flag", ["True"]),
        ("info.meta.created", ["2024-01-01"]),
        ("items[0].value", ["first"]),
        ("items[-1].value", ["third"]),
        ("items[1].tags[0]", ["y"]),
        ("items[*].value", ["first", "second", "third"]),
        ("info.meta.*", ["2024-01-01", "2024-01-02"]),
        ("{name,info.age}", ["test", "25"]),
        ("items[*].{id,value}", ["1", "first", "2", "second", "3", "third"]),
        ("items[*].tags[*]", ["x", "y", "y", "z", "z", "w"]),
        ("zeros[*]", ["0", "0.0", "0"]),
        ("empty", []),
        ("empty_list", ["[]"]),
        ("empty_dict", ["{}"]),
        ("info.tags", ['["a", "b", "c"]']),
        ("nonexistent", []),
        ("items[99].value", []),
        ("items[*].nonexistent", []),
        ("items[].value", []),
        ("items[abc].value", []),
        ("{unclosed", []),
        ("nested[{invalid}]", []),
        ("name[0]", []),
        ("name.*", []),
    ],
)
def test_get_text_at_path(path: str, texts: list[str]) -> None:
    assert get_text_at_path(DOC, path) == texts


def test_the_whole_document_is_its_sorted_json() -> None:
    whole = [json.dumps(DOC, sort_keys=True, ensure_ascii=False)]

    assert get_text_at_path(DOC, "$") == whole
    assert get_text_at_path(DOC, "") == whole
    assert get_text_at_path({"é": "ü"}, "$") == ['{"é": "ü"}']


def test_pre_tokenized_paths_and_missing_objects() -> None:
    assert get_text_at_path(DOC, ["items", "[0]", "value"]) == ["first"]
    assert get_text_at_path(None, "any.path") == []
    assert get_text_at_path({}, "any.path") == []

"""The reducer-aware state diff (studio.presentation.diff): pure, no Django."""

from __future__ import annotations

import dataclasses
import datetime as dt

from pydantic import BaseModel

from studio.presentation.diff import (
    MISSING,
    Change,
    diff_state,
    diff_values,
    keys_of,
    message_id,
    plain,
    summarize,
)


def changes(old, new, kinds=None):
    found, cut = diff_state(old, new, kinds)
    assert cut is False
    return [(c.path, c.op, c.old, c.new) for c in found]


# -- last-value fields -------------------------------------------------------------


def test_diff_state_last_value_shows_old_and_new() -> None:
    assert changes({"budget_ok": False}, {"budget_ok": True}) == [
        ("budget_ok", "changed", False, True)
    ]


def test_diff_state_unchanged_keys_give_no_changes() -> None:
    assert (
        changes(
            {"a": 1, "b": [1, 2], "c": {"x": 1}}, {"a": 1, "b": [1, 2], "c": {"x": 1}}
        )
        == []
    )


def test_diff_state_added_and_removed_keys() -> None:
    assert changes({"gone": 1}, {"new": "x"}) == [
        ("new", "added", MISSING, "x"),
        ("gone", "removed", 1, MISSING),
    ]


def test_diff_state_first_checkpoint_adds_everything() -> None:
    assert changes(None, {"question": "q", "n": 0}) == [
        ("question", "added", MISSING, "q"),
        ("n", "added", MISSING, 0),
    ]


def test_diff_state_type_change_with_equal_value_is_a_change() -> None:
    assert changes({"n": 1}, {"n": True}) == [("n", "changed", 1, True)]
    assert changes({"n": 1}, {"n": 1.0}) == [("n", "changed", 1, 1.0)]


def test_diff_state_none_to_value_is_a_change_not_an_add() -> None:
    assert changes({"decision": None}, {"decision": "ok"}) == [
        ("decision", "changed", None, "ok")
    ]


# -- nested dicts and lists ------------------------------------------------------------


def test_diff_state_nested_dict_change_has_a_dotted_path() -> None:
    old = {"evidence": {"ab12": {"claim": "old", "source": "s"}}}
    new = {"evidence": {"ab12": {"claim": "new", "source": "s"}}}

    assert changes(old, new, {"evidence": "reducer"}) == [
        ("evidence.ab12.claim", "changed", "old", "new")
    ]


def test_diff_state_nested_dict_added_and_removed_entries() -> None:
    old = {"evidence": {"a": {"claim": "x"}}}
    new = {"evidence": {"b": {"claim": "y"}}}

    assert changes(old, new, {"evidence": "reducer"}) == [
        ("evidence.b", "added", MISSING, {"claim": "y"}),
        ("evidence.a", "removed", {"claim": "x"}, MISSING),
    ]


def test_diff_state_list_items_change_by_index() -> None:
    old = {"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]}
    new = {"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 3}]}

    assert changes(old, new) == [("items.1.qty", "changed", 2, 3)]


def test_diff_state_list_growth_at_the_end_is_appended() -> None:
    assert changes({"topics": ["a"]}, {"topics": ["a", "b", "c"]}) == [
        ("topics", "appended", MISSING, ["b", "c"])
    ]


def test_diff_state_list_shrinking_removes_tail_items() -> None:
    assert changes({"topics": ["a", "b", "c"]}, {"topics": ["a", "b"]}) == [
        ("topics.2", "removed", "c", MISSING)
    ]


def test_diff_state_rewritten_list_of_other_length_is_one_change() -> None:
    assert changes({"topics": ["a", "b"]}, {"topics": ["x", "y", "z"]}) == [
        ("topics", "changed", ["a", "b"], ["x", "y", "z"])
    ]


def test_diff_state_dict_replaced_by_scalar_is_one_change() -> None:
    assert changes({"d": {"a": 1}}, {"d": "flat"}) == [
        ("d", "changed", {"a": 1}, "flat")
    ]


def test_diff_state_deep_values_are_not_recursed_forever() -> None:
    old: dict = {"v": 1}
    new: dict = {"v": 2}
    for _ in range(20):
        old, new = {"n": old}, {"n": new}

    found = changes({"deep": old}, {"deep": new})

    assert len(found) == 1
    path, op, _, _ = found[0]
    assert op == "changed"
    assert path.startswith("deep.n.n.")
    assert path.count(".") == 8


# -- append reducers ---------------------------------------------------------------------


def test_diff_state_append_reducer_shows_only_appended_items() -> None:
    old = {"checks": [{"check": "budget", "ok": True}]}
    new = {
        "checks": [
            {"check": "budget", "ok": True},
            {"check": "compliance", "ok": False},
        ]
    }

    assert changes(old, new, {"checks": "append"}) == [
        ("checks", "appended", MISSING, [{"check": "compliance", "ok": False}])
    ]


def test_diff_state_append_reducer_from_nothing_appends_all() -> None:
    assert changes({}, {"log": ["a", "b"]}, {"log": "append"}) == [
        ("log", "appended", MISSING, ["a", "b"])
    ]


def test_diff_state_append_reducer_empty_start_is_no_change() -> None:
    assert changes({}, {"log": []}, {"log": "append"}) == []


def test_diff_state_append_reducer_that_rewrote_history_falls_back_to_paths() -> None:
    assert changes(
        {"log": ["a", "b"]}, {"log": ["a", "X", "c"]}, {"log": "append"}
    ) == [
        ("log.1", "changed", "b", "X"),
        ("log.2", "added", MISSING, "c"),
    ]


def test_diff_state_append_reducer_on_numbers_is_old_to_new() -> None:
    assert changes({"total": 3}, {"total": 5}, {"total": "append"}) == [
        ("total", "changed", 3, 5)
    ]


# -- messages ------------------------------------------------------------------------------


def test_diff_state_messages_added_by_id() -> None:
    old = {"messages": [{"id": "m1", "role": "user", "content": "hi"}]}
    new = {
        "messages": [
            {"id": "m1", "role": "user", "content": "hi"},
            {"id": "m2", "role": "assistant", "content": "hello"},
        ]
    }

    assert changes(old, new, {"messages": "messages"}) == [
        (
            "messages[id=m2]",
            "message_added",
            MISSING,
            {"id": "m2", "role": "assistant", "content": "hello"},
        )
    ]


def test_diff_state_messages_replaced_and_removed_by_id() -> None:
    old = {
        "messages": [
            {"id": "m1", "content": "draft"},
            {"id": "m2", "content": "bye"},
        ]
    }
    new = {"messages": [{"id": "m1", "content": "final"}]}

    assert changes(old, new, {"messages": "messages"}) == [
        (
            "messages[id=m1]",
            "message_replaced",
            {"id": "m1", "content": "draft"},
            {"id": "m1", "content": "final"},
        ),
        ("messages[id=m2]", "message_removed", {"id": "m2", "content": "bye"}, MISSING),
    ]


def test_diff_state_messages_from_nothing_are_all_added() -> None:
    new = {"messages": [{"id": "a", "content": "x"}, {"id": "b", "content": "y"}]}

    assert [c[:2] for c in changes({}, new, {"messages": "messages"})] == [
        ("messages[id=a]", "message_added"),
        ("messages[id=b]", "message_added"),
    ]


def test_diff_state_messages_without_ids_compare_by_position() -> None:
    old = {"messages": [{"content": "a"}]}
    new = {"messages": [{"content": "a"}, {"content": "b"}]}

    assert changes(old, new, {"messages": "messages"}) == [
        ("messages", "appended", MISSING, [{"content": "b"}])
    ]


def test_diff_state_message_objects_are_compared_as_plain_data() -> None:
    @dataclasses.dataclass
    class Msg:
        id: str
        content: str

    old = {"messages": [Msg("m1", "a")]}
    new = {"messages": [Msg("m1", "b")]}

    assert changes(old, new, {"messages": "messages"}) == [
        (
            "messages[id=m1]",
            "message_replaced",
            {"id": "m1", "content": "a"},
            {"id": "m1", "content": "b"},
        )
    ]


# -- limits, keys, plain ------------------------------------------------------------------


def test_diff_state_stops_at_max_changes() -> None:
    old = {f"k{i}": i for i in range(10)}
    new = {f"k{i}": i + 1 for i in range(10)}

    found, cut = diff_state(old, new, max_changes=3)

    assert cut is True
    assert [c.path for c in found] == ["k0", "k1", "k2"]


def test_change_key_is_the_top_level_state_key() -> None:
    assert Change("evidence.ab12.claim", "changed").key == "evidence"
    assert Change("messages[id=m1]", "message_added").key == "messages"
    assert Change("status", "changed").key == "status"
    assert keys_of(
        [Change("a.b", "added"), Change("c", "added"), Change("a.c", "removed")]
    ) == ["a", "c"]


def test_diff_values_of_two_missing_values_is_nothing() -> None:
    assert list(diff_values("k", MISSING, MISSING)) == []


def test_plain_turns_models_dataclasses_and_containers_into_json_data() -> None:
    class Model(BaseModel):
        a: int = 1
        when: dt.date = dt.date(2025, 1, 2)

    @dataclasses.dataclass
    class Point:
        x: int
        y: tuple[int, ...]

    value = {
        1: Model(),
        "p": Point(1, (2, 3)),
        "s": {3, 1},
        "b": b"\x00\x01",
        "t": dt.datetime(2025, 1, 2, 3, 4, 5),
        "e": ValueError("bad"),
        "o": object,
    }

    assert plain(value) == {
        "1": {"a": 1, "when": "2025-01-02"},
        "p": {"x": 1, "y": [2, 3]},
        "s": [1, 3],
        "b": "<2 bytes>",
        "t": "2025-01-02T03:04:05",
        "e": "ValueError: bad",
        "o": "<class 'object'>",
    }


def test_plain_survives_self_referencing_values() -> None:
    loop: list = []
    loop.append(loop)

    assert isinstance(plain(loop), list)


def test_message_id_reads_dicts_and_objects() -> None:
    class Obj:
        id = "o1"

    assert message_id({"id": "d1"}) == "d1"
    assert message_id(Obj()) == "o1"
    assert message_id({"content": "x"}) is None
    assert message_id({"id": ""}) is None


# -- summaries -------------------------------------------------------------------------------


def test_summarize_short_values_fit_on_one_line() -> None:
    assert summarize("5").short == '"5"'
    assert summarize(5).short == "5"
    assert summarize(None).short == "null"
    assert summarize(True).short == "true"
    assert summarize({"a": [1, 2]}).short == '{"a": [1, 2]}'
    assert summarize(MISSING).short == "—"
    assert not summarize("x").long


def test_summarize_long_values_are_cut_with_the_full_text_behind() -> None:
    text = summarize({"report": "x" * 300}, limit=40)

    assert text.long
    assert len(text.short) == 40
    assert text.short.endswith("…")
    assert '"report": "' + "x" * 300 + '"' in text.full
    assert text.full.startswith("{\n  ")


def test_summarize_multiline_strings_keep_their_lines_in_full() -> None:
    text = summarize("Report\n- one\n- two")

    assert text.long
    assert text.full == "Report\n- one\n- two"
    assert "\n" not in text.short


def test_summarize_keeps_markup_as_text_for_the_template_to_escape() -> None:
    assert summarize("<script>alert(1)</script>").short == '"<script>alert(1)</script>"'


def test_changes_carry_their_path_as_unambiguous_parts() -> None:
    """The breadcrumb and JSONPath of a diff row: a key may contain dots."""
    changes, _ = diff_state(
        {"a.b": {"x": [1, 2]}, "messages": [{"id": "m1", "content": "hi"}]},
        {"a.b": {"x": [1, 3]}, "messages": [{"id": "m1", "content": "yo"}]},
        {"messages": "messages"},
    )

    assert [(c.path, c.parts) for c in changes] == [
        ("a.b.x.1", ("a.b", "x", 1)),
        ("messages[id=m1]", ("messages", ("id", "m1"))),
    ]

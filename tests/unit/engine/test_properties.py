"""Property: the result of a super-step does not depend on the order tasks finish in.

Writes are applied in task-path order, so random DAGs of nodes with reducers reach
the same final state however their parallel tasks are scheduled. Checked twice:
purely (``apply_writes`` on shuffled task lists) and end to end (nodes sleep random
tiny amounts, so threads finish in a different order on each run).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine._internal._constants import PULL, PUSH
from engine.channels import BinaryOperatorAggregate, LastValue
from engine.checkpoint.base import empty_checkpoint
from engine.graph import START, StateGraph
from engine.pregel._algo import PregelTaskWrites, apply_writes

FAST = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples on every run; only thread timing varies
    suppress_health_check=[HealthCheck.too_slow],
)


# -- pure: apply_writes ----------------------------------------------------------------


@st.composite
def step_tasks(draw: st.DrawFn) -> list[PregelTaskWrites]:
    names = draw(
        st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True)
    )
    pushes = draw(st.integers(min_value=0, max_value=12))
    tasks = []
    paths: list[tuple[Any, ...]] = [(PULL, n) for n in names] + [
        (PUSH, i) for i in range(pushes)
    ]
    for path in paths:
        items = draw(st.lists(st.integers(0, 9), max_size=3))
        total = draw(st.integers(-5, 5))
        tasks.append(
            PregelTaskWrites(
                path=path,
                name=str(path[1]) if path[0] == PULL else "worker",
                writes=[("items", items), ("total", total)],
                triggers=(),
            )
        )
    return tasks


def apply_in(order: list[PregelTaskWrites]) -> tuple[list[int], int, dict[str, Any]]:
    channels = {
        "items": BinaryOperatorAggregate(list, operator.add),
        "total": BinaryOperatorAggregate(int, operator.add),
        "last": LastValue(int),
    }
    checkpoint = empty_checkpoint()
    apply_writes(checkpoint, channels, order, iter(range(1, 10)).__next__, {})
    return (
        channels["items"].get(),
        channels["total"].get(),
        checkpoint["channel_versions"],
    )


@FAST
@given(data=st.data(), tasks=step_tasks())
def test_apply_writes_result_ignores_task_order(
    data: st.DataObject, tasks: list[PregelTaskWrites]
) -> None:
    shuffled = data.draw(st.permutations(tasks))

    assert apply_in(list(shuffled)) == apply_in(tasks)


# -- end to end: random DAGs -------------------------------------------------------------


class Acc(TypedDict):
    items: Annotated[list[str], operator.add]
    total: Annotated[int, operator.add]


@st.composite
def dags(draw: st.DrawFn) -> list[tuple[list[int], bool]]:
    """For node j: its predecessors (indices < j; empty = START) and whether they join."""
    size = draw(st.integers(min_value=2, max_value=5))
    shape = []
    for j in range(size):
        preds = (
            draw(st.lists(st.integers(0, j - 1), unique=True, max_size=3)) if j else []
        )
        shape.append((sorted(preds), draw(st.booleans())))
    return shape


def build(shape: list[tuple[list[int], bool]], delays: dict[int, float]) -> Any:
    def make(i: int) -> Callable[[Acc], dict[str, Any]]:
        def node(state: Acc) -> dict[str, Any]:
            time.sleep(delays.get(i, 0.0))
            return {
                "items": [f"n{i}:{len(state['items'])}"],
                "total": i + state["total"],
            }

        return node

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Acc)
    for i in range(len(shape)):
        builder.add_node(f"n{i}", make(i))
    for j, (preds, join) in enumerate(shape):
        if not preds:
            builder.add_edge(START, f"n{j}")
        elif join and len(preds) > 1:
            builder.add_edge([f"n{p}" for p in preds], f"n{j}")
        else:
            for p in preds:
                builder.add_edge(f"n{p}", f"n{j}")
    return builder.compile()


DELAYS = st.dictionaries(
    st.integers(0, 4), st.sampled_from([0.0, 0.0005, 0.001, 0.002])
)


@FAST
@given(shape=dags(), first=DELAYS, second=DELAYS)
def test_random_dag_final_state_ignores_completion_order(
    shape: list[tuple[list[int], bool]],
    first: dict[int, float],
    second: dict[int, float],
) -> None:
    baseline = build(shape, {}).invoke({"items": [], "total": 0})

    assert build(shape, first).invoke({"items": [], "total": 0}) == baseline
    assert build(shape, second).invoke({"items": [], "total": 0}) == baseline


@settings(max_examples=15, deadline=None, derandomize=True)
@given(shape=dags(), delays=DELAYS)
def test_random_dag_stream_of_values_ignores_completion_order(
    shape: list[tuple[list[int], bool]], delays: dict[int, float]
) -> None:
    baseline = list(
        build(shape, {}).stream({"items": [], "total": 0}, stream_mode="values")
    )

    assert (
        list(
            build(shape, delays).stream({"items": [], "total": 0}, stream_mode="values")
        )
        == baseline
    )

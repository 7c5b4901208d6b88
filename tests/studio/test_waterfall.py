"""Step waterfall geometry (studio.services.waterfall.build_step): pure."""

from __future__ import annotations

import pytest

from studio.services.waterfall import build_step


def task(task_id: str, node: str, started: float, finished: float, **extra) -> dict:
    return {
        "task_id": task_id,
        "node": node,
        "started": started,
        "finished": finished,
        **extra,
    }


def test_build_step_places_tasks_waits_and_the_save_on_one_scale() -> None:
    barrier = {
        "started": 100.0,
        "finished": 101.0,
        "waits": {"fast": 0.75, "slow": 0.0},
    }
    tasks = [
        task("slow", "compliance", 100.0, 101.0),
        task("fast", "budget", 100.0, 100.25),
    ]

    step = build_step(2, "c2", tasks, barrier, save=1.0)

    budget, compliance = sorted(step.bars, key=lambda b: b.node)
    assert (step.wall, step.save) == (1.0, 1.0)
    assert budget.duration == pytest.approx(0.25)
    assert budget.wait == pytest.approx(0.75)
    assert (budget.x, budget.width) == (0.0, 125.0)
    assert (budget.wait_x, budget.wait_width) == (125.0, 375.0)
    assert (compliance.x, compliance.width, compliance.wait_width) == (0.0, 500.0, 0.0)
    assert (step.save_x, step.save_width) == (500.0, 500.0)
    assert step.slowest == "compliance"
    assert budget.duration_ms == pytest.approx(250.0)


def test_build_step_without_a_barrier_event_uses_the_tasks_span() -> None:
    tasks = [
        task("a", "review", 10.0, 10.5, interrupts=[{"id": "i"}]),
        task("b", "other", 10.25, 11.0, error="boom"),
    ]

    step = build_step(5, "", tasks, None, save=None)

    review, other = step.bars
    assert step.wall == pytest.approx(1.0)
    assert (review.x, review.width, review.interrupted) == (0.0, 500.0, True)
    assert (other.x, other.width, other.error) == (250.0, 750.0, True)
    assert step.save_width == 0.0


def test_build_step_gives_instant_tasks_a_visible_bar() -> None:
    step = build_step(
        1, "c", [task("a", "n", 5.0, 5.0)], {"started": 5.0, "finished": 5.0}, None
    )

    assert step.bars[0].width == 2.0


def test_build_step_without_tasks_is_empty() -> None:
    step = build_step(0, "c0", [], {"started": 1.0, "finished": 1.5, "waits": {}}, 0.5)

    assert step.bars == ()
    assert step.slowest == ""
    assert step.save_x == 500.0

"""The pipeline's steps keep one shape: a plain function (month: date, pipeline_run_id) ->
StepResult (finops.core.steps), in its app's month_step.py, with a Celery task of its own that
runs it alone. Pinned here, so a step cannot drift back to taking "YYYY-MM" text or returning a
bare dict."""

from __future__ import annotations

import datetime as dt
import inspect
import typing

import pytest
from django.utils.module_loading import import_string

from finops.celery import app as celery_app
from finops.core.pipeline_wake import STEP_WAITING
from finops.core.steps import StepResult
from finops.pipeline import steps as pipeline_steps
from finops.pipeline.services import pipeline_open_months_start, pipeline_start
from finops.pipeline.steps import STEPS, STEPS_BY_KEY, Step, UnknownStepError, step_run

MAY = dt.date(2025, 5, 1)


def test_the_steps_in_order() -> None:
    assert [s.key for s in STEPS] == [
        "attribute",
        "run_economics",
        "endpoint_costs",
        "budgets",
        "anomalies",
        "recommendations",
    ]
    assert set(STEPS_BY_KEY) == {s.key for s in STEPS}


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.key)
def test_each_step_takes_the_month_as_a_date_and_returns_a_step_result(step: Step) -> None:
    signature = inspect.signature(step.run)
    params = [(p.name, p.kind, p.default) for p in signature.parameters.values()]
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    empty = inspect.Parameter.empty
    assert params == [("month", positional, empty), ("pipeline_run_id", positional, empty)]
    assert typing.get_type_hints(step.run) == {
        "month": dt.date,
        "pipeline_run_id": int | None,
        "return": StepResult,
    }
    assert step.run.__module__.endswith(".month_step"), step.run.__module__


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.key)
def test_each_step_has_a_registered_task_of_its_own(step: Step) -> None:
    task = import_string(step.task)  # the pipeline reads its time limits so
    assert task.name == step.task
    assert step.task in celery_app.tasks
    params = list(inspect.signature(task.run).parameters)
    assert params == ["month", "pipeline_run_id"], step.task


def test_a_step_result_as_a_task_returns_it() -> None:
    done = StepResult(MAY, {"budgets": 2})
    assert done.task_result() == {"month": "2025-05", "budgets": 2}
    waiting = StepResult(MAY, {"parts": 3}, waiting=True)
    assert waiting.task_result() == {"month": "2025-05", "parts": 3, STEP_WAITING: True}


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.key)
def test_step_run_calls_each_step_by_name_with_the_date(
    step: Step, monkeypatch: pytest.MonkeyPatch
) -> None:
    """step_run is the pipeline's one door into a step: an explicit call per key, no lookup."""
    calls: list[tuple[str, dt.date, int | None]] = []

    def recorded(key: str) -> object:
        def run(month: dt.date, pipeline_run_id: int | None) -> StepResult:
            calls.append((key, month, pipeline_run_id))
            return StepResult(month, {"step": key})

        return run

    for other in STEPS:
        name = getattr(other.run, "__name__")  # noqa: B009 (a Protocol has no __name__)
        monkeypatch.setattr(pipeline_steps, name, recorded(other.key))
    assert step_run(step.key, MAY, 7) == StepResult(MAY, {"step": step.key})
    assert calls == [(step.key, MAY, 7)]


def test_step_run_refuses_a_step_no_longer_defined() -> None:
    with pytest.raises(UnknownStepError, match="'gone'"):
        step_run("gone", MAY, None)


def test_step_run_and_the_services_that_start_a_run_take_the_month_as_a_date() -> None:
    hints = typing.get_type_hints(step_run)
    assert hints == {
        "key": str,
        "month": dt.date,
        "pipeline_run_id": int | None,
        "return": StepResult,
    }
    assert typing.get_type_hints(pipeline_start)["months"] == list[dt.date]
    assert typing.get_type_hints(pipeline_open_months_start)["today"] == dt.date

"""Shared chart helpers (tasks/render/charts.py): tick steps and number formats."""

from __future__ import annotations

import math

import pytest

from benchcert.tasks.render.charts import REPORT_STEPS, TREND_STEPS, fmt_interval, fmt_percent, nice_step


@pytest.mark.parametrize(("span", "target", "report", "trend"), [
    (1.0, 10, 0.1, 0.1), (0.12, 5, 0.05, 0.025), (0.3, 10, 0.05, 0.05), (0.9, 5, 0.2, 0.2),
    (0.1, 5, 0.02, 0.02), (7.0, 5, 2.0, 2.0), (0.011, 5, 0.005, 0.0025), (0.45, 5, 0.1, 0.1)])
def test_nice_step_per_step_set(span, target, report, trend):
    assert math.isclose(nice_step(span, target, REPORT_STEPS), report)
    assert math.isclose(nice_step(span, target, TREND_STEPS), trend)
    assert nice_step(span, target) == nice_step(span, target, REPORT_STEPS)


def test_nice_step_is_at_least_span_over_target_and_falls_back_to_ten():
    for span in (0.013, 0.37, 2.9, 93.0):
        for steps in (REPORT_STEPS, TREND_STEPS):
            assert nice_step(span, 7, steps) >= span / 7 * (1 - 1e-9)
    assert math.isclose(nice_step(0.6, 1, REPORT_STEPS), 1.0)  # raw 0.6 > 5 * 0.1: the next decade
    assert nice_step(1.0, 0) == nice_step(1.0, 1)  # a target below 1 counts as 1


def test_percent_and_interval_formats():
    assert fmt_percent(0.4567) == "45.67%" and fmt_percent(None) == "\u2014" and fmt_percent(math.nan) == "\u2014"
    assert fmt_interval(0.4, 0.5) == "[40.00, 50.00]"
    assert fmt_interval(None, 0.5) == "\u2014" and fmt_interval(0.1, math.inf) == "\u2014"

"""The one milliseconds format (``columns.ms``) and the one by-unit format (``columns.by_unit``) the reports share.

Each was folded from formatters that printed the same text for every value their callers give: the references
below are those formatters as they were, and Hypothesis checks the shared ones print the same.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_dpd.benchmark.report.ab import BUYER_METRICS
from hyperpod_dpd.benchmark.report.prediction import METRICS
from hyperpod_dpd.columns import by_unit, ms

SECONDS = st.floats(allow_nan=True, allow_infinity=True)


@pytest.mark.parametrize(("seconds", "kwargs", "text"), [
    (None, {}, "-"),
    (None, {"missing": "unmeasured"}, "unmeasured"),
    (0.0, {}, "0.0"),
    (0.01234, {}, "12.3"),
    (1.23456, {}, "1,234.6"),
    (12.3456, {"digits": 0}, "12,346"),
    (0.00004, {"digits": 1}, "0.0"),
    (-0.0025, {}, "-2.5"),
    (math.inf, {"digits": 0}, "inf"),
    (math.nan, {}, "nan"),
])
def test_ms_prints_seconds_as_grouped_milliseconds(seconds: float | None, kwargs: dict[str, object],
                                                   text: str) -> None:
    assert ms(seconds, **kwargs) == text  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "unit", "named", "text"), [
    (None, "ms", True, "-"),
    (0.5, "ms", False, "500.0"),
    (0.5, "ms", True, "500.0 ms"),
    (12.345, "s", True, "12.35 s"),
    (0.01234, "USD/Mtok", False, "0.012"),
    (12345.67, "tok/s", False, "12,345.7"),
    (12345.67, "", True, "12,345.7"),
])
def test_by_unit_prints_each_unit_to_its_decimals(value: float | None, unit: str, named: bool, text: str) -> None:
    assert by_unit(value, unit, named=named) == text


@given(st.none() | SECONDS)
def test_ms_is_the_bench_tables_and_the_stage_table(seconds: float | None) -> None:
    assert ms(seconds) == ("-" if seconds is None else f"{seconds * 1e3:,.1f}")  # columns.milliseconds
    assert ms(seconds, missing="unmeasured") == (  # decomposition._ms
        "unmeasured" if seconds is None else f"{seconds * 1e3:,.1f}")


@given(SECONDS.filter(lambda v: not math.isnan(v)), st.sampled_from([0, 1]))
def test_ms_is_the_advisors_table(seconds: float, digits: int) -> None:
    """advisor/render.py's _ms (a NaN prints ``saturated`` before it) and _range; advise --trace's _ms, finite."""
    assert ms(seconds, digits=digits) == f"{seconds * 1000:,.{digits}f}"


def _scaled(value: float | None, unit: str) -> str:
    """ab._scaled, as it was."""
    if value is None:
        return "-"
    return f"{value * 1e3:,.1f}" if unit == "ms" else f"{value:,.3f}" if unit == "USD/Mtok" else f"{value:,.1f}"


def _value(value: float | None, unit: str) -> str:
    """prediction._value, as it was."""
    if value is None:
        return "-"
    return f"{value * 1e3:,.1f} ms" if unit == "ms" else f"{value:,.2f} s" if unit == "s" else f"{value:,.1f}"


@given(st.none() | SECONDS, st.sampled_from(sorted({metric.unit for metric in BUYER_METRICS})))
def test_by_unit_is_the_ab_tables(value: float | None, unit: str) -> None:
    assert by_unit(value, unit) == _scaled(value, unit)


@given(st.none() | SECONDS, st.sampled_from(sorted({unit for _, _, unit in METRICS})))
def test_by_unit_named_is_the_prediction_table(value: float | None, unit: str) -> None:
    assert by_unit(value, unit, named=True) == _value(value, unit)

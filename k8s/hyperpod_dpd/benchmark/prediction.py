"""Measured against predicted: the advisor's estimate for the same traffic, beside what the benchmark saw.

The advisor (``hyperpod_dpd.advisor``, the ``advisor`` extra) is imported only when a comparison is
asked for. Measured latencies are medians (p50); the difference is ``(measured - predicted) /
predicted``, so +20% on TPOT means the endpoint is 20% slower per token than predicted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hyperpod_dpd.benchmark.ab import change
from hyperpod_dpd.benchmark.results import BenchmarkResults
from hyperpod_dpd.benchmark.scenario import Scenario
from hyperpod_dpd.columns import percent, render_columns
from hyperpod_dpd.load_point import Load, column_header
from hyperpod_dpd.spec import DpdSpec

ADVISOR_EXTRA = "advisor"
LAYOUTS = ("disaggregated", "aggregated")


class Predicted(Protocol):
    @property
    def ttft_s(self) -> float: ...
    @property
    def tpot_s(self) -> float: ...
    @property
    def e2e_s(self) -> float: ...
    @property
    def output_tokens_per_s(self) -> float: ...
    @property
    def gpus(self) -> int: ...


class AdvicePoint(Protocol):
    @property
    def concurrency(self) -> int: ...
    @property
    def request_rate(self) -> float | None: ...
    @property
    def aggregated(self) -> Predicted: ...
    @property
    def disaggregated(self) -> Predicted: ...


class AdviceLike(Protocol):
    @property
    def points(self) -> Sequence[AdvicePoint]: ...
    @property
    def assumptions(self) -> Mapping[str, Any]: ...


def predict(spec: DpdSpec, scenario: Scenario, *, baseline_nodes: int = 1) -> AdviceLike:
    """The advisor's estimate for ``scenario`` on ``spec``; a missing advisor names the extra to install."""
    from hyperpod_dpd.errors import UsageError  # noqa: PLC0415

    try:
        from hyperpod_dpd.advisor import Traffic, advise  # noqa: PLC0415 - heavy, optional
    except ImportError as err:
        raise UsageError(f"--compare needs the advisor ({err}): pip install 'hyperpod-dpd[{ADVISOR_EXTRA}]'"
                              ) from None
    if not scenario.request_rates:
        advice: AdviceLike = advise(spec, Traffic(isl=scenario.isl, osl=scenario.osl,
                                                  concurrency=tuple(scenario.concurrency)),
                                    baseline_nodes=baseline_nodes)
        return advice
    # The advisor predicts one open-loop rate per call (its queueing model is per arrival rate).
    each = [advise(spec, Traffic(isl=scenario.isl, osl=scenario.osl, request_rate=rate), baseline_nodes=baseline_nodes)
            for rate in scenario.request_rates]
    return Advice(points=tuple(point for advice in each for point in advice.points),
                  assumptions=dict(each[0].assumptions))


@dataclass(frozen=True)
class Advice:
    """Several of the advisor's answers as one (its points, one assumption set: the same spec and lengths)."""

    points: Sequence[AdvicePoint]
    assumptions: Mapping[str, Any]


def point_load(point: AdvicePoint) -> Load:
    return Load(rate=point.request_rate) if point.request_rate is not None else Load(concurrency=point.concurrency)


METRICS = (("TTFT p50", "ttft_s", "ms"), ("TPOT p50", "tpot_s", "ms"), ("E2E p50", "e2e_s", "s"),
           ("output tok/s", "output_tokens_per_s", ""))


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    load: Load
    layout: str
    metric: str
    unit: str
    measured: float | None
    predicted: float

    @property
    def difference_percent(self) -> float | None:
        return change(self.measured, self.predicted)

    def as_dict(self) -> dict[str, Any]:
        return {**self.load.as_dict(), "layout": self.layout, "metric": self.metric,
                "measured": self.measured, "predicted": self.predicted,
                "difference_percent": self.difference_percent}


def compare(measured: BenchmarkResults, advice: AdviceLike, *, layout: str = "disaggregated") -> list[ComparisonRow]:
    """One row per measured level and metric, against the advice point of the same load."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    points = {point_load(point): point for point in advice.points}
    rows = []
    for level in measured.levels:
        point = points.get(level.load)
        if point is None or not level.completed:
            continue
        predicted = getattr(point, layout)
        values = {"ttft_s": level.ttft.p50, "tpot_s": level.tpot.p50, "e2e_s": level.e2e.p50,
                  "output_tokens_per_s": level.output_tokens_per_s}
        rows += [ComparisonRow(load=level.load, layout=layout, metric=label, unit=unit,
                               measured=values[key], predicted=float(getattr(predicted, key)))
                 for label, key, unit in METRICS]
    return rows


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value * 1e3:,.1f} ms"
    if unit == "s":
        return f"{value:,.2f} s"
    return f"{value:,.1f}"


def render_comparison(rows: Sequence[ComparisonRow], assumptions: Mapping[str, Any] | None = None) -> str:
    if not rows:
        return "measured against predicted: no level to compare (none completed, or the advisor has no such point)"
    table = [[f"{row.load.cell()} {row.layout}", row.metric, _value(row.measured, row.unit),
              _value(row.predicted, row.unit), percent(row.difference_percent)] for row in rows]
    lines = ["measured against predicted (difference = (measured - predicted) / predicted)",
             *render_columns((f"{column_header([row.load for row in rows])} LAYOUT", "METRIC", "MEASURED",
                              "PREDICTED", "DIFF"), table)]
    if assumptions:
        lines += ["", "the prediction assumes:", *(f"  {key}: {value}" for key, value in sorted(assumptions.items()))]
    return "\n".join(lines)

"""Measured against predicted: the advisor's estimate for the same traffic, beside what the benchmark saw.

The advisor (``hyperpod_dpd.advisor``, the ``advisor`` extra) is imported only when a comparison is
asked for. Measured latencies are medians (p50); the difference is ``(measured - predicted) /
predicted``, so +20% on TPOT means the endpoint is 20% slower per token than predicted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hyperpod_dpd.benchmark.report.ab import change
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.columns import by_unit, percent, render_columns
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
    from hyperpod_dpd.errors import UsageError, install_extra  # noqa: PLC0415

    try:
        from hyperpod_dpd.advisor import Traffic, advise  # noqa: PLC0415 - heavy, optional
    except ImportError as err:
        raise UsageError(f"--compare needs the advisor ({err}): {install_extra(ADVISOR_EXTRA)}") from None
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
# The advisor's own range for a figure, where it states one (advisor.estimates.Estimate.ttft_band_s and
# tpot_band_s): the same simulation from the least to the most variable service times (estimates.VARIABILITY),
# widened by a by-analogy model's spread and the model's error: a calibration's residual, or uncalibrated its
# error against AWS's published points (docs/advise.md, "Ranges, not one number").
BANDS = {"ttft_s": "ttft_band_s", "tpot_s": "tpot_band_s"}
BAND = ("the advisor's range: its simulation from the least to the most variable service times, widened by a "
        "by-analogy model's spread and the model's error: a calibration's residual, or uncalibrated its error against "
        "AWS's published points (advisor.estimates, ttft_band_s/tpot_band_s)")


def _band(predicted: Any, key: str) -> tuple[float, float] | None:
    """The advisor's range for ``key``, when its estimate carries one (a saturated layout, and an estimate
    made without ranges, carry none)."""
    band = getattr(predicted, BANDS[key], None) if key in BANDS else None
    if band is None:
        return None
    low, high = (float(v) for v in band)
    return low, high


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    load: Load
    layout: str
    metric: str
    unit: str
    measured: float | None
    predicted: float
    predicted_band: tuple[float, float] | None = None  # the advisor's own range around ``predicted`` (BAND)

    @property
    def difference_percent(self) -> float | None:
        return change(self.measured, self.predicted)

    @property
    def within_band(self) -> bool | None:
        """Whether the measurement lies inside the advisor's range; None without either."""
        if self.measured is None or self.predicted_band is None:
            return None
        return self.predicted_band[0] <= self.measured <= self.predicted_band[1]

    def as_dict(self) -> dict[str, Any]:
        return {**self.load.as_dict(), "layout": self.layout, "metric": self.metric,
                "measured": self.measured, "predicted": self.predicted,
                "predicted_band": None if self.predicted_band is None else list(self.predicted_band),
                "within_band": self.within_band, "difference_percent": self.difference_percent}


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
                               measured=values[key], predicted=float(getattr(predicted, key)),
                               predicted_band=_band(predicted, key))
                 for label, key, unit in METRICS]
    return rows


def render_comparison(rows: Sequence[ComparisonRow], assumptions: Mapping[str, Any] | None = None) -> str:
    if not rows:
        return "measured against predicted: no level to compare (none completed, or the advisor has no such point)"
    def band(row: ComparisonRow) -> str:
        if row.predicted_band is None:
            return "-"
        inside = {True: "inside", False: "outside", None: ""}[row.within_band]
        low, high = (by_unit(value, row.unit, named=True) for value in row.predicted_band)
        return f"{low} - {high} {inside}".strip()

    table = [[f"{row.load.cell()} {row.layout}", row.metric,
              *(by_unit(value, row.unit, named=True) for value in (row.measured, row.predicted)),
              percent(row.difference_percent), band(row)] for row in rows]
    lines = ["measured against predicted (difference = (measured - predicted) / predicted; RANGE is "
             f"{BAND}, '-' where it gives none)",
             *render_columns((f"{column_header([row.load for row in rows])} LAYOUT", "METRIC", "MEASURED",
                              "PREDICTED", "DIFF", "RANGE"), table)]
    if assumptions:
        lines += ["", "the prediction assumes:", *(f"  {key}: {value}" for key, value in sorted(assumptions.items()))]
    return "\n".join(lines)

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
from hyperpod_dpd.benchmark.table import percent
from hyperpod_dpd.columns import render_columns
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
    from hyperpod_dpd.cli._common import UserFacingError  # noqa: PLC0415 - the CLI's error type, no CLI import

    try:
        from hyperpod_dpd.advisor import Traffic, advise  # noqa: PLC0415 - heavy, optional
    except ImportError as err:
        raise UserFacingError(f"--compare needs the advisor ({err}): pip install 'hyperpod-dpd[{ADVISOR_EXTRA}]'"
                              ) from None
    advice: AdviceLike = advise(spec, Traffic(isl=scenario.isl, osl=scenario.osl,
                                              concurrency=tuple(scenario.concurrency)),
                                baseline_nodes=baseline_nodes)
    return advice


METRICS = (("TTFT p50", "ttft_s", "ms"), ("TPOT p50", "tpot_s", "ms"), ("E2E p50", "e2e_s", "s"),
           ("output tok/s", "output_tokens_per_s", ""))


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    concurrency: int
    layout: str
    metric: str
    unit: str
    measured: float | None
    predicted: float

    @property
    def difference_percent(self) -> float | None:
        return change(self.measured, self.predicted)

    def as_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "layout": self.layout, "metric": self.metric,
                "measured": self.measured, "predicted": self.predicted,
                "difference_percent": self.difference_percent}


def compare(measured: BenchmarkResults, advice: AdviceLike, *, layout: str = "disaggregated") -> list[ComparisonRow]:
    """One row per measured level and metric, against the advice point of the same concurrency."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    points = {point.concurrency: point for point in advice.points}
    rows = []
    for level in measured.levels:
        point = points.get(level.concurrency)
        if point is None or not level.completed:
            continue
        predicted = getattr(point, layout)
        values = {"ttft_s": level.ttft.p50, "tpot_s": level.tpot.p50, "e2e_s": level.e2e.p50,
                  "output_tokens_per_s": level.output_tokens_per_s}
        rows += [ComparisonRow(concurrency=level.concurrency, layout=layout, metric=label, unit=unit,
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
    table = [[f"{row.concurrency} {row.layout}", row.metric, _value(row.measured, row.unit),
              _value(row.predicted, row.unit), percent(row.difference_percent)] for row in rows]
    lines = ["measured against predicted (difference = (measured - predicted) / predicted)",
             *render_columns(("CONC LAYOUT", "METRIC", "MEASURED", "PREDICTED", "DIFF"), table)]
    if assumptions:
        lines += ["", "the prediction assumes:", *(f"  {key}: {value}" for key, value in sorted(assumptions.items()))]
    return "\n".join(lines)

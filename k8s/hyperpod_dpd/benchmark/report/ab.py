"""DPD against its aggregated twin, per load level, reported the way the AWS blog reports DPD's gain.

Changes are ``(dpd - aggregated) / aggregated``: negative TPOT, TTFT and end-to-end changes and a
positive throughput change favour DPD. The blog (Llama 3.3 70B, 4,096/256, concurrency 8-32)
measured TPOT 22-66% lower, output throughput up to 35-64% higher and TTFT slightly higher (the KV
transfer) with one prefill and one decode node against one aggregated node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from hyperpod_dpd.benchmark.report.economics import Layout
from hyperpod_dpd.benchmark.report.stats import Interval, welch_interval
from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.twin_identity import IdentityDifference
from hyperpod_dpd.columns import by_unit, render_columns
from hyperpod_dpd.load_point import Load, column_header


def change(new: float | None, old: float | None) -> float | None:
    """Percent change from ``old`` to ``new``; None when either is missing or ``old`` is 0."""
    if new is None or old is None or old == 0:
        return None
    return (new - old) / old * 100


NO_INTERVAL = "no interval (one run; --repeat 2 or more)"
COPIES = "no interval (each side's runs are identical: copies of one run, not repeats)"
# The buyer metric behind each of the A/B row's changes
CHANGE_METRICS = {"tpot_p50": "tpot_p50_s", "ttft_p50": "ttft_p50_s", "e2e_p50": "e2e_p50_s",
                  "output_tokens_per_s": "output_tokens_per_s"}


@dataclass(frozen=True, kw_only=True)
class AbRow:
    load: Load
    tpot_p50: tuple[float | None, float | None]
    ttft_p50: tuple[float | None, float | None]
    e2e_p50: tuple[float | None, float | None]
    output_tokens_per_s: tuple[float, float]
    # each side's reasons the level is unverified (its trust warnings' codes), a side with none left out
    unverified: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # the buyer table's difference behind each change that has one (its interval and verdict), by change key
    differences: Mapping[str, Difference] = field(default_factory=dict)

    def intervals(self) -> dict[str, dict[str, Any]]:
        """Each change's 95% interval in percent of the aggregated side and its verdict ("no difference" when the
        interval holds 0): a point change alone is no finding."""
        found = {}
        for key in self.changes():
            d = self.differences.get(key)
            interval = None if d is None or d.interval is None or not d.aggregated else {
                "low": d.interval.low / d.aggregated * 100, "high": d.interval.high / d.aggregated * 100,
                "method": d.interval.method, "confidence": d.interval.confidence}
            found[key] = {"interval": interval, "verdict": NO_INTERVAL if d is None else d.verdict}
        return found

    def changes(self) -> dict[str, float | None]:
        return {"tpot_p50": change(*self.tpot_p50), "ttft_p50": change(*self.ttft_p50),
                "e2e_p50": change(*self.e2e_p50), "output_tokens_per_s": change(*self.output_tokens_per_s)}

    def as_dict(self) -> dict[str, Any]:
        pairs = {"tpot_p50_s": self.tpot_p50, "ttft_p50_s": self.ttft_p50, "e2e_p50_s": self.e2e_p50,
                 "output_tokens_per_s": self.output_tokens_per_s}
        return {**self.load.as_dict(),
                **{key: {"dpd": dpd, "aggregated": agg} for key, (dpd, agg) in pairs.items()},
                "change_percent": self.changes(), "change_interval_percent": self.intervals(),
                "unverified": {k: list(v) for k, v in self.unverified.items()}}


def compare_ab(dpd: BenchmarkResults, aggregated: BenchmarkResults) -> list[AbRow]:
    """One row per load level both runs measured (with at least one completed request each)."""
    rows = []
    for level in dpd.levels:
        base = aggregated.level(level.load)
        if base is None or not level.completed or not base.completed or level.summary_lost or base.summary_lost:
            continue
        rows.append(AbRow(load=level.load, tpot_p50=(level.tpot.p50, base.tpot.p50),
                          ttft_p50=(level.ttft.p50, base.ttft.p50), e2e_p50=(level.e2e.p50, base.e2e.p50),
                          output_tokens_per_s=(level.output_tokens_per_s, base.output_tokens_per_s)))
    return rows


# What a buyer compares, per level: latency from the client's requests, and the client's output throughput
# normalized by what each layout holds and costs (economics.Layout). ``better`` says which way favours DPD.
@dataclass(frozen=True, kw_only=True)
class BuyerMetric:
    label: str
    key: str
    unit: str
    better: str  # "lower" or "higher"
    value: Callable[[LevelResult, Layout], float | None]


BUYER_METRICS = (
    BuyerMetric(label="TTFT p50", key="ttft_p50_s", unit="ms", better="lower", value=lambda lv, _: lv.ttft.p50),
    BuyerMetric(label="TPOT p50", key="tpot_p50_s", unit="ms", better="lower", value=lambda lv, _: lv.tpot.p50),
    BuyerMetric(label="E2E p50", key="e2e_p50_s", unit="ms", better="lower", value=lambda lv, _: lv.e2e.p50),
    BuyerMetric(label="output", key="output_tokens_per_s", unit="tok/s", better="higher",
                value=lambda lv, _: lv.output_tokens_per_s),
    BuyerMetric(label="per GPU", key="output_tokens_per_s_per_gpu", unit="tok/s/GPU", better="higher",
                value=lambda lv, layout: layout.per_gpu(lv.output_tokens_per_s)),
    BuyerMetric(label="per node-hour", key="output_tokens_per_node_hour", unit="tok/node-h", better="higher",
                value=lambda lv, layout: layout.per_node_hour(lv.output_tokens_per_s)),
    BuyerMetric(label="per M output tok", key="usd_per_million_output_tokens", unit="USD/Mtok", better="lower",
                value=lambda lv, layout: layout.usd_per_million(lv.output_tokens_per_s)),
)


@dataclass(frozen=True, kw_only=True)
class Difference:
    """One metric at one level: the mean over each side's repeats, and the interval of DPD minus aggregated."""

    metric: BuyerMetric
    dpd: float | None
    aggregated: float | None
    interval: Interval | None
    runs: tuple[int, int]
    refused: str | None = None  # why the two sides are no A/B at all (the twin serves another model)

    @property
    def difference(self) -> float | None:
        return None if self.dpd is None or self.aggregated is None else self.dpd - self.aggregated

    @property
    def verdict(self) -> str:
        """``no difference`` when the interval holds zero, else whether DPD is better or worse; never a sign
        without an interval."""
        if self.difference is None:
            return "not measured"
        if self.refused:
            return "no verdict: the twin serves another model"
        if self.interval is None:
            dpd, aggregated = self.runs
            if max(self.runs) <= 1:
                return NO_INTERVAL
            if min(self.runs) >= 2:
                return COPIES
            return f"no interval ({dpd} DPD and {aggregated} aggregated runs; --repeat 2 or more on each)"
        if self.interval.spans_zero:
            return "no difference"
        favours = (self.interval.high < 0) == (self.metric.better == "lower")
        return "DPD better" if favours else "DPD worse"

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric.key, "unit": self.metric.unit, "better": self.metric.better,
                "dpd": self.dpd, "aggregated": self.aggregated, "difference": self.difference,
                "interval": None if self.interval is None else self.interval.as_dict(),
                "runs": {"dpd": self.runs[0], "aggregated": self.runs[1]}, "verdict": self.verdict}


def _difference(metric: BuyerMetric, dpd: Sequence[LevelResult], agg: Sequence[LevelResult],
                layouts: tuple[Layout, Layout]) -> Difference:
    """The interval is over whole runs (Welch, two or more a side), or there is none.

    One run a side gives no interval for any metric: a bootstrap over one run's requests measures how its
    requests scatter, not how a second run of the same endpoint lands. Two back-to-back runs of one stub
    (500 ms TTFT) gave TTFT p50 516.3 against 508.9 ms, a bootstrap interval of [4.3, 11.4] ms and "DPD worse"
    for identical backends; the shift between runs is what a claim has to clear, and one run cannot show it.
    """
    mine = [v for v in (metric.value(level, layouts[0]) for level in dpd) if v is not None]
    theirs = [v for v in (metric.value(level, layouts[1]) for level in agg) if v is not None]
    interval = welch_interval(mine, theirs)
    if interval is not None and interval.low == interval.high:
        # No spread on either side: the repeats are copies of one run (a folder given twice), not runs; Welch's
        # zero-width interval would turn one run's difference into a verdict.
        interval = None
    return Difference(metric=metric, dpd=fmean(mine) if mine else None, aggregated=fmean(theirs) if theirs else None,
                      interval=interval, runs=(len(mine), len(theirs)))


@dataclass(frozen=True, kw_only=True)
class BuyerRow:
    load: Load
    differences: tuple[Difference, ...]
    # each side's reasons the level is unverified (its trust warnings' codes), a side with none left out
    unverified: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**self.load.as_dict(), "metrics": [d.as_dict() for d in self.differences],
                "unverified": {side: list(codes) for side, codes in self.unverified.items()}}


def compare_buyer(dpd: Sequence[BenchmarkResults], aggregated: Sequence[BenchmarkResults],
                  layouts: tuple[Layout, Layout], *, refused: str | None = None) -> list[BuyerRow]:
    """One row per level both sides completed at least once, over every repeat of each side; ``refused`` says why
    no difference gets a verdict (:func:`~hyperpod_dpd.benchmark.run.twin_identity.refusal`)."""
    rows = []
    loads = sorted({level.load for run in dpd for level in run.levels}, key=Load.sort_key)
    for load in loads:
        mine = [lv for run in dpd if (lv := run.level(load)) is not None and lv.completed and not lv.summary_lost]
        theirs = [lv for run in aggregated
                  if (lv := run.level(load)) is not None and lv.completed and not lv.summary_lost]
        if mine and theirs:
            rows.append(BuyerRow(load=load, differences=tuple(
                dataclasses.replace(_difference(metric, mine, theirs, layouts), refused=refused)
                for metric in BUYER_METRICS)))
    return rows


def render_buyer(rows: Sequence[BuyerRow], layouts: tuple[Layout, Layout],
                 differences: Sequence[IdentityDifference] = ()) -> str:
    """The table, with how each interval was made, what each layout holds and costs, and what the twin serves
    otherwise than DPD (``differences``)."""
    stated = [f"  the twin differs from DPD: {d.render()}" + (" (another model: no verdict)" if d.changes_model else "")
              for d in differences]
    if not rows:
        return "\n".join(["DPD against aggregated: no load level completed on both endpoints", *stated])
    title = ("DPD against the aggregated twin: DPD - AGG with its 95% interval (welch-t over the repeats, two or more "
             "a side; one run a side has none and no verdict); 'no difference' when the interval holds 0")
    notes = ["  TTFT and TPOT are the client's on both sides, each bounded against its own endpoint's server clock "
             "(DPD: the router's TTFT; the twin: its router's, else its engines')"]
    notes += [f"  {row.load.describe()}: unverified on "
              + "; ".join(f"{side} ({', '.join(codes)})" for side, codes in row.unverified.items())
              + ": its differences are not the endpoints' alone" for row in rows if row.unverified]
    return "\n".join([title, *stated, *render_columns(*buyer_table(rows)),
                      *(f"  {layout.describe()}" for layout in layouts), *notes])


def buyer_table(rows: Sequence[BuyerRow]) -> tuple[tuple[str, ...], list[list[str]]]:
    """The buyer table's headers and rows, as the text report and the HTML page show them."""
    table = []
    for row in rows:
        for d in row.differences:
            interval = "-" if d.interval is None else (
                f"[{by_unit(d.interval.low, d.metric.unit)}, {by_unit(d.interval.high, d.metric.unit)}] "
                f"{d.interval.method}")
            table.append([row.load.cell(), f"{d.metric.label} {d.metric.unit}", by_unit(d.dpd, d.metric.unit),
                          by_unit(d.aggregated, d.metric.unit), by_unit(d.difference, d.metric.unit), interval,
                          d.verdict])
    headers = (column_header([row.load for row in rows]), "METRIC", "DPD", "AGG", "DPD-AGG", "95% INTERVAL",
               "VERDICT")
    return headers, table

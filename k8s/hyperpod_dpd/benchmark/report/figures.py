"""The report ``bench --report-dir`` writes: one self-contained HTML page, its PNGs and its data as JSON.

The figures are drawn from :func:`figure_series`, which the page also embeds as JSON (``<script
id="figure-data">``), so what a figure shows can be read back and checked. Latency against load for
each layout (TTFT and TPOT, p50 solid, p90 dashed), the spec's SLO as a line on the p90s, the
advisor's p50 per level with its own range shaded around it (``prediction.BAND``), and the DPD
endpoint's TTFT by stage, stacked, with the client's TTFT beside it. A level not verified against
its servers (a trust warning, or a results folder without its counters) is drawn with a hollow
marker, its reasons in the legend and under the figure. With repeats, each point is the median
over them and a bar spans their range (:mod:`~hyperpod_dpd.benchmark.report.repeats`). The page
itself (inline SVGs, deterministic files, the numbers alone without matplotlib) is
:mod:`hyperpod_dpd.report_page`'s, shared with ``advise --trace``'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyperpod_dpd.benchmark.proof.decomposition import STAGES, Decomposition
from hyperpod_dpd.benchmark.report.capacity import NO_SLO, Slo
from hyperpod_dpd.benchmark.report.economics import Layout
from hyperpod_dpd.benchmark.report.prediction import BAND, ComparisonRow
from hyperpod_dpd.benchmark.report.repeats import level_repeats, spread
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.report_page import PageBody, write_page

LATENCY_PNG = "latency.png"
STAGES_PNG = "ttft-stages.png"
THROUGHPUT_PNG = "throughput.png"
QUANTILES = ("p50", "p90")
METRICS = (("ttft", "TTFT p50/p90 ms", "TTFT p50"), ("tpot", "TPOT p50/p90 ms", "TPOT p50"))


@dataclass(frozen=True, kw_only=True)
class ReportInput:
    """What the page shows: each layout's levels, the SLO, the DPD stages, the advisor's rows, the text report."""

    title: str
    # by layout: each level the median over its repeats (benchmark/report/repeats.py)
    runs: Mapping[str, BenchmarkResults]
    slo: Slo | None
    decompositions: Sequence[Decomposition]
    predictions: Sequence[ComparisonRow]
    prediction_note: str | None
    text: str
    document: Mapping[str, Any]
    repeats: Mapping[str, Sequence[BenchmarkResults]] = field(default_factory=dict)  # by layout, when run again
    # by layout, each level not verified against its servers and why (its trust warnings' codes, ``unchecked``)
    unverified: Mapping[str, Mapping[Load, Sequence[str]]] = field(default_factory=dict)
    # by layout, what it holds and costs (the throughput figure's per-GPU and per-dollar panels), when known
    layouts: Mapping[str, Layout] = field(default_factory=dict)
    # by layout and level, the servers' own output tokens per second (the DPD decoders' counters), when read
    server_tokens_per_s: Mapping[str, Mapping[Load, float | None]] = field(default_factory=dict)
    body_html: PageBody | None = None  # the page's verdict and sections in place of the text report


def _ms(value: float | None) -> float | None:  # a number for the JSON; a saturated prediction's NaN stays NaN
    return None if value is None else round(value * 1e3, 3)


def figure_series(report: ReportInput) -> dict[str, Any]:
    """Every number the figures draw, in ms, by figure: the data the page embeds and the tests check."""
    loads = sorted({lv.load for run in report.runs.values() for lv in run.levels}, key=lambda load: load.sort_key())
    closed = all(load.closed_loop for load in loads)
    series = []
    for label, run in report.runs.items():
        repeats = report.repeats.get(label) or [run]
        for metric, _, _ in METRICS:
            for q in QUANTILES:
                values = [[getattr(getattr(level, metric), q) for level in level_repeats(repeats, lv.load)]
                          for lv in run.levels]
                ranges = [spread(each) for each in values]
                doubted = report.unverified.get(label, {})
                series.append({"layout": label, "metric": metric, "quantile": q,
                               "x": [lv.load.value for lv in run.levels],
                               "unverified": [sorted(doubted.get(lv.load, ())) for lv in run.levels],
                               "y_ms": [_ms(getattr(getattr(lv, metric), q)) for lv in run.levels],
                               "runs": [len(each) for each in values],
                               "range_ms": [None if r is None else [_ms(r[0]), _ms(r[1])] for r in ranges]})
    predicted = []
    for metric, _, label in METRICS:
        for layout in ("disaggregated", "aggregated"):
            rows = [row for row in report.predictions if row.metric == label and row.layout == layout]
            if rows:
                predicted.append({"layout": layout, "metric": metric, "x": [row.load.value for row in rows],
                                  "y_ms": [_ms(row.predicted) for row in rows],
                                  "band_ms": [None if row.predicted_band is None else
                                              [_ms(row.predicted_band[0]), _ms(row.predicted_band[1])]
                                              for row in rows],
                                  "error_percent": [row.difference_percent for row in rows]})
    slo = {"ttft_p90_ms": _ms(report.slo[0]), "tpot_p90_ms": _ms(report.slo[1])} if report.slo else None
    stages = {"x": [row.load.value for row in report.decompositions],
              "stages_ms": {name: [_ms(row.stage(name)) for row in report.decompositions] for name in STAGES},
              "client_ttft_ms": [_ms(row.client_ttft_s) for row in report.decompositions],
              "runs": [row.runs for row in report.decompositions],
              "router_ttft_ms": [_ms(row.router_ttft_s) for row in report.decompositions]}
    throughput = []
    for name, run in report.runs.items():
        priced = report.layouts.get(name)
        kept = [lv for lv in run.levels if lv.completed and not lv.summary_lost]
        served = report.server_tokens_per_s.get(name, {})
        throughput.append({
            "layout": name, "x": [lv.load.value for lv in kept],
            "output_tokens_per_s": [round(lv.output_tokens_per_s, 3) for lv in kept],
            "server_tokens_per_s": [None if (v := served.get(lv.load)) is None else round(v, 3) for lv in kept],
            "per_gpu": [None if priced is None else round(priced.per_gpu(lv.output_tokens_per_s), 3) for lv in kept],
            "usd_per_mtok": [None if priced is None or (usd := priced.usd_per_million(lv.output_tokens_per_s)) is None
                             else round(usd, 3) for lv in kept],
            "layout_text": None if priced is None else priced.describe()})
    banded = any(band is not None for p in predicted for band in p["band_ms"])
    return {"x_label": "concurrency" if closed else "requests/s", "latency": series, "slo": slo,
            "slo_note": None if report.slo else NO_SLO, "prediction": predicted,
            "prediction_band": BAND if banded else None, "prediction_note": report.prediction_note,
            "ttft_stages": stages, "throughput": throughput}


def _points(xs: Sequence[float], ys: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """The points that were measured: a missing value is left out of the line, never drawn as 0."""
    kept = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def latency_figure(data: Mapping[str, Any]) -> Any:
    """TTFT and TPOT against load, both layouts, the SLO on the p90s and the advisor's p50."""
    from matplotlib.figure import Figure  # noqa: PLC0415 - the bench extra's

    figure = Figure(figsize=(9.0, 3.6), dpi=80, layout="constrained")
    axes = figure.subplots(1, 2)
    colors = {"dpd": "tab:blue", "aggregated": "tab:orange", "disaggregated": "tab:blue"}
    for ax, (metric, ylabel, _) in zip(axes, METRICS, strict=True):
        for s in data["latency"]:
            if s["metric"] == metric:
                gid = f"{s['layout']}-{metric}-{s['quantile']}"
                xs, ys = _points(s["x"], s["y_ms"])
                doubted = [bool(codes) for codes, y in zip(s["unverified"], s["y_ms"], strict=True) if y is not None]
                ax.plot(xs, ys, marker="o", color=colors[s["layout"]],
                        linestyle="-" if s["quantile"] == "p50" else "--", label=f"{s['layout']} {s['quantile']}",
                        markevery=[i for i, d in enumerate(doubted) if not d] if any(doubted) else None, gid=gid)
                if any(doubted):  # hollow: the level's figures may not be the endpoint's alone
                    codes = sorted({code for each in s["unverified"] for code in each})
                    ax.plot([x for x, d in zip(xs, doubted, strict=True) if d],
                            [y for y, d in zip(ys, doubted, strict=True) if d], marker="o", linestyle="none",
                            markerfacecolor="white", markeredgecolor=colors[s["layout"]], markeredgewidth=1.5,
                            label=(f"{s['layout']} unverified ({', '.join(codes)})" if s["quantile"] == "p50"
                                   else "_nolegend_"), gid=f"{gid}-unverified", zorder=3)
                spans = [(x, r) for x, r, n in zip(s["x"], s["range_ms"], s["runs"], strict=True) if r and n > 1]
                if spans:  # the repeats' lowest to highest around their median
                    ax.vlines([x for x, _ in spans], [r[0] for _, r in spans], [r[1] for _, r in spans],
                              color=colors[s["layout"]], linewidth=3.0, alpha=0.35,
                              gid=f"{s['layout']}-{metric}-{s['quantile']}-range")
        for p in data["prediction"]:
            if p["metric"] == metric:
                bands = p["band_ms"]
                if any(band is not None for band in bands):  # a level without a range leaves a gap, never 0
                    ax.fill_between(p["x"], [math.nan if b is None else b[0] for b in bands],
                                    [math.nan if b is None else b[1] for b in bands], color=colors[p["layout"]],
                                    alpha=0.15, linewidth=0, label=f"advisor {p['layout']} range",
                                    gid=f"advisor-{p['layout']}-{metric}-band")
                ax.plot(*_points(p["x"], p["y_ms"]), marker="x", linestyle=":", color=colors[p["layout"]],
                        label=f"advisor {p['layout']} p50", gid=f"advisor-{p['layout']}-{metric}")
        target = (data["slo"] or {}).get(f"{metric}_p90_ms")
        if target is not None:
            ax.axhline(target, color="tab:red", linewidth=1.0, label=f"SLO p90 {target:g} ms", gid=f"slo-{metric}")
        _load_ticks(ax, data)
        ax.set_xlabel(data["x_label"])
        ax.set_ylabel(ylabel)
        ax.set_title(f"{metric.upper()} against load", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return figure


THROUGHPUT_PANELS = (("output_tokens_per_s", "output tok/s (client)"), ("per_gpu", "output tok/s per GPU"),
                     ("usd_per_mtok", "USD per M output tokens"))


def throughput_figure(data: Mapping[str, Any]) -> Any:
    """Output throughput against load for each layout (the servers' own beside the client's, dotted), and the same
    per GPU and per dollar: what a buyer compares."""
    from matplotlib.figure import Figure  # noqa: PLC0415 - the bench extra's

    figure = Figure(figsize=(11.0, 3.4), dpi=80, layout="constrained")
    axes = figure.subplots(1, len(THROUGHPUT_PANELS))
    colors = {"dpd": "tab:blue", "aggregated": "tab:orange"}
    for ax, (key, ylabel) in zip(axes, THROUGHPUT_PANELS, strict=True):
        for s in data["throughput"]:
            color = colors.get(s["layout"], "tab:gray")
            xs, ys = _points(s["x"], s[key])
            if ys:
                ax.plot(xs, ys, marker="o", color=color, label=s["layout"], gid=f"{s['layout']}-{key}")
            if key == "output_tokens_per_s":
                xs, ys = _points(s["x"], s["server_tokens_per_s"])
                if ys:
                    ax.plot(xs, ys, marker="s", linestyle=":", color=color, label=f"{s['layout']} (servers')",
                            gid=f"{s['layout']}-server-tokens")
        if not ax.get_lines():
            ax.text(0.5, 0.5, "not priced" if key == "usd_per_mtok" else "not measured", ha="center",
                    va="center", transform=ax.transAxes)
        _load_ticks(ax, data)
        ax.set_xlabel(data["x_label"])
        ax.set_ylabel(ylabel)
        ax.set_title(ylabel, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=7)
    return figure


def _load_ticks(ax: Any, data: Mapping[str, Any]) -> None:
    """Ticks at the levels run, never at 4.5 between two concurrencies."""
    levels = sorted({x for s in data["latency"] for x in s["x"]})
    if levels:
        ax.set_xticks(levels, [f"{x:g}" for x in levels])


def latency_caption(data: Mapping[str, Any]) -> str | None:
    """What the latency figure's shading and hollow markers mean, and why a level is hollow; None when it has
    neither (nor a missing SLO to name)."""
    parts = []
    if data.get("prediction_band"):
        parts.append(f"Shaded around the advisor's p50 (x markers): {data['prediction_band']}.")
        gaps = []
        for p in data["prediction"]:
            missing = [f"{x:g}" for x, band in zip(p["x"], p["band_ms"], strict=True) if band is None]
            if missing:
                gaps.append(f"{p['layout']} {p['metric'].upper()} at {', '.join(missing)}")
        if gaps:
            parts.append(f"No range (the advisor gave none: a saturated layout has none) for {'; '.join(gaps)}.")
    doubted = []
    for s in data["latency"]:
        if (s["metric"], s["quantile"]) == ("ttft", "p50") and any(s["unverified"]):
            doubted.append(f"{s['layout']} at " + ", ".join(
                f"{x:g} ({', '.join(codes)})" for x, codes in zip(s["x"], s["unverified"], strict=True) if codes))
    if doubted:
        parts.append("Hollow markers: levels not verified against their servers (a trust warning's code, or "
                     "'unchecked': a results folder without its counters), so their figures may not be the "
                     f"endpoint's alone: {'; '.join(doubted)}.")
    if data.get("slo_note"):
        parts.append(f"No SLO line: {data['slo_note']}.")
    return " ".join(parts) or None


def stages_figure(data: Mapping[str, Any]) -> Any:
    """The DPD endpoint's TTFT by stage per level, stacked; unmeasured stages named above the bar."""
    from matplotlib.figure import Figure  # noqa: PLC0415 - the bench extra's

    stages = data["ttft_stages"]
    figure = Figure(figsize=(7.5, 3.6), dpi=80, layout="constrained")
    ax = figure.subplots()
    positions = list(range(len(stages["x"])))
    bottoms = [0.0] * len(positions)
    for name in STAGES:
        values = stages["stages_ms"][name]
        # An unmeasured stage (or a negative residual: stages that overlap) gets no bar, never one of height 0.
        heights = [v if v is not None and v >= 0 else math.nan for v in values]
        if not all(math.isnan(h) for h in heights):
            ax.bar(positions, heights, bottom=bottoms, label=name, gid=f"stage-{name}")
            bottoms = [b if math.isnan(h) else b + h for b, h in zip(bottoms, heights, strict=True)]
    for i, _ in enumerate(positions):
        missing = [name for name in STAGES if stages["stages_ms"][name][i] is None]
        if missing:
            ax.annotate("\n".join(["unmeasured:", *missing]), (i, bottoms[i]), ha="center", va="bottom", fontsize=6)
    ax.plot(*_points(positions, stages["client_ttft_ms"]), marker="D", linestyle="none", color="black",
            label="client TTFT", gid="client-ttft")
    ax.plot(*_points(positions, stages["router_ttft_ms"]), marker="_", markersize=18, linestyle="none",
            color="tab:red", label="router TTFT", gid="router-ttft")
    ax.set_xticks(positions, [f"{x:g}" for x in stages["x"]])
    ax.set_xlabel(data["x_label"])
    ax.set_ylabel("TTFT ms (mean per request)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure


def write_report(folder: Path, report: ReportInput) -> list[Path]:
    """``report.html``, ``report.json`` and, with matplotlib, ``latency.png`` and ``ttft-stages.png``."""

    def draw(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
        figures = [(LATENCY_PNG, latency_figure(data))]
        if report.body_html is not None:  # the page's own sections: throughput beside the latency curves
            figures.append((THROUGHPUT_PNG, throughput_figure(data)))
        if report.decompositions:
            figures.append((STAGES_PNG, stages_figure(data)))
        return figures

    data = figure_series(report)
    return write_page(folder, title=report.title, text=report.text, data=data, document=report.document, draw=draw,
                      captions={LATENCY_PNG: latency_caption(data)},
                      notes=[data["slo_note"]] if data["slo_note"] else [], body_html=report.body_html)

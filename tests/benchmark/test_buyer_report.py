"""What a buyer reads: the A/B with intervals, per GPU and per dollar; capacity at the SLO; TTFT by stage; the
advisor beside every level; the HTML report and its figures' data. Every level here is a recorded one: its
requests' (TTFT, TPOT) as a client wrote them, and the servers' /metrics text before and after it.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from types import ModuleType
from typing import Any

import pytest
from support import FakeAdvice as Advice
from support import FakeEstimate as Estimate
from support import FakePoint as Point

from hyperpod_dpd.benchmark.proof.decomposition import STAGES, decompose, render_decompositions
from hyperpod_dpd.benchmark.proof.disaggregation import (
    DECODER_STAGE_FAMILIES,
    PREFILLER_STAGE_FAMILIES,
    DpdCounters,
    LevelDisaggregation,
)
from hyperpod_dpd.benchmark.proof.overhead import quantile
from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
from hyperpod_dpd.benchmark.report.ab import compare_buyer, render_buyer
from hyperpod_dpd.benchmark.report.capacity import capacity_at_slo
from hyperpod_dpd.benchmark.report.economics import layouts
from hyperpod_dpd.benchmark.report.figures import LATENCY_PNG, STAGES_PNG, THROUGHPUT_PNG, figure_series
from hyperpod_dpd.benchmark.report.prediction import compare
from hyperpod_dpd.benchmark.report.report import Comparison, Outcome, Report
from hyperpod_dpd.benchmark.report.stats import BOOTSTRAP, WELCH, bootstrap_median_interval, t_quantile, welch_interval
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.results import BenchmarkResults, collect
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.contracts.prices import table_price
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.observability.metrics import derived_families
from hyperpod_dpd.report_page import HTML_FILE, read_embedded
from hyperpod_dpd.spec.defaults import default_spec

LOADS = (8, 16, 32)


def recorded_level(concurrency: int, ttfts: Sequence[float], tpots: Sequence[float], *, tokens_per_s: float,
                   duration_s: float = 60.0) -> LevelResult:
    """A level as a client records it: its requests, and the percentiles computed from them."""

    def three(values: Sequence[float]) -> Percentiles:
        return Percentiles(quantile(values, 0.5), quantile(values, 0.9), quantile(values, 0.99))

    e2e = [ttft + 255 * tpot for ttft, tpot in zip(ttfts, tpots, strict=True)]
    return LevelResult(load=Load(concurrency=concurrency), scenario="D(4352,256)", ttft=three(ttfts),
                       tpot=three(tpots), e2e=three(e2e), output_tokens_per_s=tokens_per_s, completed=len(ttfts),
                       failed=0, duration_s=duration_s, mean_input_tokens=4352.0, mean_output_tokens=256.0,
                       answered=tuple(zip(ttfts, tpots, strict=True)))


def sampled(seed: int, concurrency: int, *, ttft_s: float, tpot_s: float, tokens_per_s: float,
            n: int = 80) -> LevelResult:
    """``n`` requests of one backend: TTFT and TPOT scattered around their means (a 10% spread)."""
    rng = random.Random(seed)
    ttfts = [rng.gauss(ttft_s, 0.1 * ttft_s) for _ in range(n)]
    tpots = [rng.gauss(tpot_s, 0.1 * tpot_s) for _ in range(n)]
    return recorded_level(concurrency, ttfts, tpots, tokens_per_s=tokens_per_s)


def run_of(*levels: LevelResult) -> BenchmarkResults:
    return BenchmarkResults(levels=levels)


SPEC = default_spec()
PRICED = layouts(SPEC)


# --- the intervals ----------------------------------------------------------------------------------


def test_the_t_quantiles_are_students() -> None:
    """Against the printed table (two-sided 95%): df 1, 4, 30; and the normal's 1.960 far out."""
    for df, expected in ((1, 12.706), (4, 2.776), (30, 2.042), (10_000, 1.960)):
        assert t_quantile(0.975, df) == pytest.approx(expected, abs=6e-4)  # the table rounds to 3 decimals


def test_welch_and_the_bootstrap_hold_the_difference() -> None:
    interval = welch_interval([10.0, 11.0, 12.0], [5.0, 6.0, 7.0])
    assert interval is not None and interval.method == WELCH
    # mean difference 5, standard error sqrt(2/3), df 4: 5 +- 2.776 * 0.8165
    assert (interval.low, interval.high) == pytest.approx((5 - 2.2667, 5 + 2.2667), abs=1e-3)
    assert welch_interval([1.0], [2.0, 3.0]) is None
    boot = bootstrap_median_interval([1.0] * 20, [1.0] * 20)
    assert boot is not None and boot.method == BOOTSTRAP and (boot.low, boot.high) == (0.0, 0.0) and boot.spans_zero
    assert bootstrap_median_interval([1.0], []) is None


def test_identical_backends_are_no_difference() -> None:
    """Two runs of one backend, each its own 80 requests: the medians differ by noise (the audit's
    'DPD TTFT -7.9%' was such a difference, printed as a change); one run a side makes no claim on any
    metric, and the percentage alone is no verdict."""
    dpd = run_of(*(sampled(1 + c, c, ttft_s=0.5, tpot_s=0.02, tokens_per_s=900.0) for c in LOADS))
    twin = run_of(*(sampled(100 + c, c, ttft_s=0.5, tpot_s=0.02, tokens_per_s=900.0) for c in LOADS))
    rows = compare_buyer([dpd], [twin], PRICED)
    assert [row.load.concurrency for row in rows] == list(LOADS)
    raw = []
    for row in rows:
        verdicts = {d.metric.key: d for d in row.differences}
        for key in ("ttft_p50_s", "tpot_p50_s"):
            difference = verdicts[key]
            assert difference.difference != 0  # the medians do differ: nothing may call that a change
            raw.append(abs(difference.difference or 0) / (difference.aggregated or 1))
        for d in row.differences:
            assert d.interval is None and d.verdict.startswith("no interval (one run"), (row.load, d.metric.key)
    assert max(raw) > 0.005  # the noise a bare percentage would have shown as a change
    text = render_buyer(rows, PRICED)
    assert "no interval" in text and "DPD better" not in text and "DPD worse" not in text


def shifted(results: BenchmarkResults, factor: float) -> BenchmarkResults:
    """``results`` as a second run of the same endpoint might have measured them: every request's TTFT and TPOT,
    every percentile and the throughput moved by ``factor`` (a run-to-run shift, the same for all requests)."""

    def moved(p: Percentiles) -> Percentiles:
        return Percentiles(*(None if v is None else v * factor for v in (p.p50, p.p90, p.p99)))

    return BenchmarkResults(levels=tuple(dataclasses.replace(
        level, ttft=moved(level.ttft), tpot=moved(level.tpot), e2e=moved(level.e2e),
        output_tokens_per_s=level.output_tokens_per_s / factor,
        answered=tuple((ttft * factor, None if tpot is None else tpot * factor) for ttft, tpot in level.answered))
        for level in results.levels))


def test_one_run_a_side_of_identical_backends_has_no_verdict(open_loop_run: Any) -> None:
    """The recorded stub run against itself moved 1.5% (the audit's two back-to-back aiperf runs of one stub: TTFT
    p50 516.3 against 508.9 ms). Before, the bootstrap over one run's requests gave an interval clear of zero and
    "DPD worse" for the same backend; the shift between runs is what one run cannot show, so no metric has an
    interval or a verdict. Two runs a side, each moved within that 1.5%, hold zero: "no difference"."""
    first = collect(open_loop_run.files())
    assert first.levels and all(level.measured_answered for level in first.levels)
    later = shifted(first, 1.015)
    same = layouts(SPEC)[0]
    rows = compare_buyer([later], [first], (same, same))
    assert [row.load for row in rows] == [level.load for level in first.levels]
    for row in rows:
        for d in row.differences:
            if d.dpd is None:
                continue
            assert d.interval is None and d.verdict == "no interval (one run; --repeat 2 or more)", (
                row.load, d.metric.key, d.interval)
        ttft = next(d for d in row.differences if d.metric.key == "ttft_p50_s")
        assert ttft.difference == pytest.approx(0.015 * (ttft.aggregated or 0))  # the shift is there, unclaimed
    text = render_buyer(rows, (same, same))
    assert "DPD better" not in text and "DPD worse" not in text and "no interval (one run" in text
    copies = compare_buyer([later, later], [first, first], (same, same))  # one run given twice is still one run
    assert {d.verdict for row in copies for d in row.differences} == {
        "no interval (each side's runs are identical: copies of one run, not repeats)"}
    repeated = compare_buyer([later, shifted(first, 0.998)], [shifted(first, 1.012), first], (same, same))
    for row in repeated:
        for d in row.differences:
            if d.dpd is not None:
                assert d.interval is not None and d.interval.method == WELCH and d.runs == (2, 2)
                assert d.verdict == "no difference", (row.load, d.metric.key, d.interval)


def test_repeated_levels_of_identical_backends_are_no_difference_in_throughput_too() -> None:
    rng = random.Random(7)
    runs = [[run_of(*(sampled(rng.randrange(10**6), c, ttft_s=0.5, tpot_s=0.02,
                                  tokens_per_s=rng.gauss(900.0, 20.0)) for c in LOADS)) for _ in range(3)]
            for _ in range(2)]
    same = layouts(SPEC)[0]
    rows = compare_buyer(runs[0], runs[1], (same, same))  # the same hardware on both sides
    for row in rows:
        for d in row.differences:
            assert d.interval is not None and d.interval.method == WELCH and d.runs == (3, 3)
            assert d.verdict == "no difference", (row.load, d.metric.key, d.interval)


def test_a_real_difference_has_its_sign_and_interval_and_the_gpus_and_dollars_count() -> None:
    """DPD (2 nodes, 16 GPUs) 1,200 tok/s against the twin's 900 on 1 node, 3 repeats each: more tokens, but
    fewer per GPU and dearer per token; TPOT 20 ms against 30 ms is a gain."""
    dpd = [run_of(sampled(s, 16, ttft_s=0.55, tpot_s=0.02, tokens_per_s=t)) for s, t in ((1, 1190.), (2, 1200.),
                                                                                           (3, 1210.))]
    twin = [run_of(sampled(s, 16, ttft_s=0.5, tpot_s=0.03, tokens_per_s=t)) for s, t in ((4, 890.), (5, 900.),
                                                                                          (6, 910.))]
    dpd_layout, twin_layout = PRICED
    assert (dpd_layout.nodes, dpd_layout.gpus, twin_layout.nodes, twin_layout.gpus) == (2, 16, 1, 8)
    price = table_price("ml.p5.48xlarge")
    assert price is not None and dpd_layout.price == price and price.kind == "sagemaker-ml"
    [row] = compare_buyer(dpd, twin, PRICED)
    d = {difference.metric.key: difference for difference in row.differences}
    tpot = d["tpot_p50_s"]
    assert tpot.interval is not None and tpot.interval.high < 0 and tpot.verdict == "DPD better"
    assert d["output_tokens_per_s"].difference == pytest.approx(300.0)
    assert d["output_tokens_per_s"].interval is not None and d["output_tokens_per_s"].interval.low > 0
    assert d["output_tokens_per_s"].verdict == "DPD better"
    assert (d["output_tokens_per_s_per_gpu"].dpd, d["output_tokens_per_s_per_gpu"].aggregated) == pytest.approx(
        (75.0, 112.5))
    assert d["output_tokens_per_s_per_gpu"].verdict == "DPD worse"
    assert d["output_tokens_per_node_hour"].dpd == pytest.approx(1200 * 3600 / 2)
    usd = d["usd_per_million_output_tokens"]
    assert usd.dpd == pytest.approx(2 * price.usd_per_node_hour / (1200 * 3600) * 1e6, rel=1e-4)
    assert usd.aggregated == pytest.approx(price.usd_per_node_hour / (900 * 3600) * 1e6, rel=1e-4)
    assert usd.verdict == "DPD worse" and usd.interval is not None and usd.interval.low > 0
    text = render_buyer([row], PRICED)
    assert "SageMaker ml.* on-demand rate" in text and "2 x ml.p5.48xlarge, 16 GPUs" in text
    assert "welch-t" in text and "DPD worse" in text and "DPD better" in text


def test_a_users_price_replaces_the_table_and_a_bad_one_is_refused() -> None:
    from hyperpod_dpd.errors import SpecError

    mine = layouts(SPEC, price_per_node_hour=40.0)[0]
    assert mine.price is not None and mine.price.kind == "user" and "your rate" in mine.describe()
    with pytest.raises(SpecError) as raised:
        layouts(SPEC, price_per_node_hour=-1.0)
    [problem] = raised.value.problems
    assert problem.field == "price_per_node_hour" and problem.value == -1.0 and "--price-per-node-hour" in problem.fix


# --- capacity at the SLO ------------------------------------------------------------------------------


def stepped(ttft_p90s: Sequence[float], tpot_s: float = 0.02) -> BenchmarkResults:
    """Levels whose every request has the same TTFT, so p90 is that TTFT."""
    return run_of(*(recorded_level(c, [t] * 20, [tpot_s] * 20, tokens_per_s=100.0 * c)
                    for c, t in zip(LOADS, ttft_p90s, strict=True)))


def test_capacity_is_the_highest_level_meeting_both_p90s() -> None:
    slo = (1.0, 0.025)
    dpd = capacity_at_slo("dpd", stepped((0.4, 0.9, 1.5)), slo)
    assert dpd.load == Load(concurrency=16) and [ok for _, ok in dpd.met] == [True, True, False]
    assert "concurrency 16 meets TTFT p90 <= 1,000 ms and TPOT p90 <= 25.0 ms" in dpd.render()
    assert "the next level, concurrency 32, misses it" in dpd.render()
    slow = capacity_at_slo("aggregated", stepped((0.4, 0.5, 0.6), tpot_s=0.03), slo)
    assert slow.load is None and "no measured level meets" in slow.render()
    top = capacity_at_slo("dpd", stepped((0.1, 0.2, 0.3)), (1.0, None))
    assert top.load == Load(concurrency=32) and "the highest level measured" in top.render() and top.trusted
    doubted = capacity_at_slo("dpd", stepped((0.1, 0.2, 0.3)), (1.0, None),
                              untrusted=frozenset({Load(concurrency=32)}))
    assert not doubted.trusted and doubted.as_dict()["trusted"] is False
    assert "cannot be trusted as measured" in doubted.render()


# --- TTFT by stage ------------------------------------------------------------------------------------


def histogram(family: str, total: float, count: int) -> str:
    return f"{family}_sum{{engine=\"0\"}} {total}\n{family}_count{{engine=\"0\"}} {count}\n"


def test_the_stages_are_histogram_families_of_the_contract() -> None:
    families = derived_families()
    for family in (*PREFILLER_STAGE_FAMILIES, *DECODER_STAGE_FAMILIES):
        assert families[family]["kind"] == "histogram", family


def stage_counters(*, lmcache: bool, scale: int, router_s: float = 0.5, queue_s: float = 0.05,
                   prefill_s: float = 0.30) -> DpdCounters:
    """One router, one decoder, one prefiller, with ``scale`` x 20 requests counted so far (the router
    10 more, at 500 ms, before the first)."""
    count = 10 + 20 * (scale - 1)
    router = (f"dpd_routing_disaggregated_total {count}\ndpd_e2e_ttft_seconds_sum {5 + router_s * 20 * (scale - 1)}\n"
              f"dpd_e2e_ttft_seconds_count {count}\n")
    prefiller = (histogram("vllm:request_queue_time_seconds", queue_s * 20 * scale, 20 * scale)
                 + histogram("vllm:request_prefill_time_seconds", prefill_s * 20 * scale, 20 * scale)
                 + (histogram("lmcache:store_put_time", 0.004 * 10 * 20 * scale, 10 * 20 * scale) if lmcache else ""))
    decoder = (histogram("vllm:request_queue_time_seconds", 0.01 * 20 * scale, 20 * scale)
               + histogram("vllm:request_prefill_time_seconds", 0.06 * 20 * scale, 20 * scale)
               + histogram("vllm:time_to_first_token_seconds", 0.08 * 20 * scale, 20 * scale))
    return DpdCounters.parse({"router-0": router},
                             {"decode-0": decoder}, prefiller={"prefill-0": prefiller})


def test_ttft_is_split_into_its_stages_from_the_servers_histograms() -> None:
    """20 requests in the level: the router's mean 500 ms; the prefiller queued 50 ms and took 300 ms, of
    which its KV puts (10 per request, 4 ms each) 40 ms; the decoder queued 10 ms and took 60 ms."""
    seen = LevelDisaggregation.between(stage_counters(lmcache=True, scale=1), stage_counters(lmcache=True, scale=2),
                                       load=Load(concurrency=8))
    assert seen.pod_changes == ()
    level = recorded_level(8, [0.52] * 20, [0.02] * 20, tokens_per_s=500.0)
    row = decompose(level, seen)
    stages = dict(row.stages)
    assert stages["prefill queue"] == pytest.approx(0.05) and stages["prefill"] == pytest.approx(0.26)
    assert stages["KV transfer"] == pytest.approx(0.04) and stages["decode queue"] == pytest.approx(0.01)
    assert stages["first decode step"] == pytest.approx(0.06)
    assert stages["router and network"] == pytest.approx(0.5 - 0.05 - 0.26 - 0.04 - 0.01 - 0.06)
    assert row.router_ttft_s == pytest.approx(0.5) and row.decoder_ttft_s == pytest.approx(0.08)
    assert row.client_ttft_s == pytest.approx(0.52) and row.as_dict()["client_overhead_s"] == pytest.approx(0.02)


def test_a_stage_without_its_series_is_unmeasured_never_zero() -> None:
    seen = LevelDisaggregation.between(stage_counters(lmcache=False, scale=1),
                                       stage_counters(lmcache=False, scale=2), load=Load(concurrency=8))
    row = decompose(recorded_level(8, [0.52] * 20, [0.02] * 20, tokens_per_s=500.0), seen)
    assert row.stage("KV transfer") is None and row.stage("router and network") is None
    assert row.stage("prefill") == pytest.approx(0.30)  # nothing to take the put out of: the whole step
    text = render_decompositions([row], "CONC")
    assert "unmeasured" in text and " 0.0 " not in text
    nothing = decompose(recorded_level(8, [0.52] * 20, [0.02] * 20, tokens_per_s=500.0), None)
    assert all(value is None for _, value in nothing.stages) and nothing.client_ttft_s == pytest.approx(0.52)


# --- the report ---------------------------------------------------------------------------------------




def banded(estimate: Estimate, c: int) -> Estimate:
    """``estimate`` with the advisor's range: TTFT 80-130% of its figure, TPOT 95-105%; none at 32 (saturated)."""
    if c == 32:
        return estimate
    return dataclasses.replace(estimate, ttft_band_s=(0.8 * estimate.ttft_s, 1.3 * estimate.ttft_s),
                               tpot_band_s=(0.95 * estimate.tpot_s, 1.05 * estimate.tpot_s))


def recorded_report(*, with_prediction: bool = True, bands: bool = False, dpd_job: str | None = None,
                    dpd_warnings: Sequence[TrustWarning] = (), slo: tuple[float, float] | None = (0.6, 0.02)) -> Report:
    """A stub run: DPD and the twin at 8, 16 and 32, the counters of DPD's levels, the advisor's points.

    :param bands: the advisor's points carry its range (:func:`banded`). :param dpd_job: DPD was a live run (its
        levels are checked against its counters), not a folder without them.
    """
    dpd = run_of(*(sampled(c, c, ttft_s=0.30 + 0.01 * c, tpot_s=0.012 + 0.0002 * c, tokens_per_s=70.0 * c)
                   for c in LOADS))
    twin = run_of(*(sampled(50 + c, c, ttft_s=0.25 + 0.02 * c, tpot_s=0.015 + 0.0006 * c, tokens_per_s=55.0 * c)
                    for c in LOADS))
    # the router's TTFT 5 ms under the client's mean; the prefiller's queue grows with the load
    stages = {c: {"lmcache": c != 32, "router_s": fmean(t for t, _ in dpd.levels[i].answered) - 0.005,
                  "queue_s": {8: 0.05, 16: 0.10, 32: 0.25}[c], "prefill_s": 0.2} for i, c in enumerate(LOADS)}
    routing = {Load(concurrency=c): LevelDisaggregation.between(
        stage_counters(scale=1, **stages[c]), stage_counters(scale=2, **stages[c]), load=Load(concurrency=c))
        for c in LOADS}
    outcomes = [Outcome("dpd", "dpd-test", dpd, list(dpd_warnings), job=dpd_job, source="recorded", routing=routing),
                Outcome("aggregated", "dpd-test-agg", twin, [], source="recorded")]
    comparison = None
    if with_prediction:
        points = [Point(c, Estimate(0.25 + 0.02 * c, 0.015 + 0.0005 * c, 4.0, 50.0 * c, 8),
                        Estimate(0.28 + 0.01 * c, 0.013 + 0.0002 * c, 3.5, 70.0 * c, 16)) for c in LOADS]
        if bands:
            points = [dataclasses.replace(p, aggregated=banded(p.aggregated, p.concurrency),
                                          disaggregated=banded(p.disaggregated, p.concurrency)) for p in points]
        advice = Advice(points=tuple(points), assumptions={"system": "h100_sxm"})
        rows = compare(dpd, advice, layout="disaggregated") + compare(twin, advice, layout="aggregated")
        comparison = Comparison(rows=rows, assumptions=dict(advice.assumptions))
    return Report(scenario=Scenario(isl=4352, osl=256, concurrency=LOADS), outcomes=outcomes,
                  comparison=comparison, slo=slo, identity={"model": "m"}, layouts=PRICED,
                  prediction_note=None if with_prediction else "no prediction: the advisor extra is not installed")


def test_the_report_draws_the_levels_it_measured(tmp_path: Path) -> None:
    report = recorded_report()
    written = report.write(tmp_path)
    assert {path.name for path in written} == {HTML_FILE, "report.json", LATENCY_PNG, THROUGHPUT_PNG, STAGES_PNG}
    page = (tmp_path / HTML_FILE).read_text(encoding="utf-8")
    # nothing fetched: no link, no source or reference that leaves the page (XML namespaces name, not fetch)
    assert "<svg" in page and "<link" not in page and not re.search(r"(src|href)=[\"'](https?:|//)", page)
    data = read_embedded(page)
    dpd, twin = report.outcomes[0].results, report.outcomes[1].results
    by = {(s["layout"], s["metric"], s["quantile"]): s for s in data["latency"]}
    assert by["dpd", "ttft", "p50"]["x"] == [8.0, 16.0, 32.0]
    # the figure data is in ms, rounded to the microsecond
    assert by["dpd", "ttft", "p90"]["y_ms"] == pytest.approx([lv.ttft.p90 * 1e3 for lv in dpd.levels], abs=5e-4)
    assert by["aggregated", "tpot", "p50"]["y_ms"] == pytest.approx([lv.tpot.p50 * 1e3 for lv in twin.levels],
                                                                     abs=5e-4)
    assert data["slo"] == {"ttft_p90_ms": 600.0, "tpot_p90_ms": 20.0}
    predicted = {(p["layout"], p["metric"]): p for p in data["prediction"]}
    assert predicted["disaggregated", "ttft"]["y_ms"] == pytest.approx([(0.28 + 0.01 * c) * 1e3 for c in LOADS],
                                                                        abs=5e-4)
    assert predicted["aggregated", "tpot"]["error_percent"] == pytest.approx(
        [(lv.tpot.p50 - p) / p * 100 for lv, p in zip(twin.levels, (0.015 + 0.0005 * c for c in LOADS),
                                                       strict=True)])
    stages = data["ttft_stages"]["stages_ms"]
    assert stages["KV transfer"][:2] == pytest.approx([40.0, 40.0])
    assert stages["KV transfer"][2] is None  # 32's prefiller exported no LMCache series: unmeasured, not 0
    assert stages["prefill queue"] == pytest.approx([50.0, 100.0, 250.0])
    assert stages["prefill"] == pytest.approx([160.0, 160.0, 200.0])  # less the 40 ms put where it was measured
    client = data["ttft_stages"]["client_ttft_ms"]
    assert data["ttft_stages"]["router_ttft_ms"] == pytest.approx([c - 5.0 for c in client], abs=1e-3)
    assert set(stages) == set(STAGES)
    document = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert document["figures"] == data
    assert [c["capacity"] for c in document["capacity_at_slo"]] == [
        (cap.load.as_dict() if cap.load else None) for cap in report._capacities()]
    assert document["ab_buyer"]["layouts"][0]["gpus"] == 16


def test_the_figures_are_drawn_from_the_embedded_series() -> None:
    from hyperpod_dpd.benchmark.report.figures import latency_figure, stages_figure

    data = figure_series(recorded_report().write_input())
    lines = {line.get_gid(): line for ax in latency_figure(data).axes for line in ax.get_lines()}
    series = {f"{s['layout']}-{s['metric']}-{s['quantile']}": s for s in data["latency"]}
    for gid, s in series.items():
        assert list(lines[gid].get_xdata()) == s["x"] and list(lines[gid].get_ydata()) == pytest.approx(s["y_ms"])
    assert list(lines["slo-ttft"].get_ydata()) == [600.0, 600.0]
    assert list(lines["advisor-disaggregated-tpot"].get_ydata()) == pytest.approx(
        next(p for p in data["prediction"] if p["layout"] == "disaggregated" and p["metric"] == "tpot")["y_ms"])
    [ax] = stages_figure(data).axes
    kv = next(container for container in ax.containers if container.get_label() == "KV transfer")
    heights = [bar.get_height() for bar in kv]
    assert heights[:2] == pytest.approx([40.0, 40.0]) and math.isnan(heights[2])  # no bar where unmeasured
    notes = [text.get_text() for text in ax.texts]
    assert notes == ["unmeasured:\nrouter and network\nKV transfer"]  # the 32 bar names what it lacks


def test_the_advisors_range_is_a_band_and_unverified_levels_are_hollow(tmp_path: Path) -> None:
    """The advisor's TTFT range (80-130%, none at 32) is shaded around its p50, with a gap where it gave none; the
    DPD level with a trust warning (32) and the twin's levels from a folder without counters are hollow, each with
    its reason in the legend and under the figure. Before, the prediction was points only and every level alike."""
    from hyperpod_dpd.benchmark.report.figures import latency_caption, latency_figure
    from hyperpod_dpd.benchmark.report.prediction import BAND

    overhead = TrustWarning(code=Trust.CLIENT_OVERHEAD, load=Load(concurrency=32), message="client too slow")
    report = recorded_report(bands=True, dpd_job="bench-dpd-test-r", dpd_warnings=[overhead])
    data = figure_series(report.write_input())
    assert data["prediction_band"] == BAND
    predicted = {(p["layout"], p["metric"]): p for p in data["prediction"]}
    ttft = [(0.28 + 0.01 * c) * 1e3 for c in LOADS]
    assert predicted["disaggregated", "ttft"]["band_ms"][:2] == [
        pytest.approx([0.8 * t, 1.3 * t], abs=5e-4) for t in ttft[:2]]
    assert predicted["disaggregated", "ttft"]["band_ms"][2] is None  # saturated: no range, never a zero-width one
    by = {(s["layout"], s["metric"], s["quantile"]): s for s in data["latency"]}
    assert by["dpd", "ttft", "p50"]["unverified"] == [[], [], ["client-overhead"]]
    assert by["aggregated", "tpot", "p90"]["unverified"] == [["unchecked"]] * 3
    axes = latency_figure(data).axes
    bands = {c.get_gid(): c for ax in axes for c in ax.collections}
    [shape] = bands["advisor-disaggregated-ttft-band"].get_paths()
    xs, ys = shape.vertices[:, 0], shape.vertices[:, 1]
    assert set(xs.tolist()) == {8.0, 16.0}  # the gap at 32
    assert (ys.min(), ys.max()) == pytest.approx((0.8 * ttft[0], 1.3 * ttft[1]), abs=5e-4)
    lines = {line.get_gid(): line for ax in axes for line in ax.get_lines()}
    hollow = lines["dpd-ttft-p50-unverified"]
    assert list(hollow.get_xdata()) == [32.0] and hollow.get_markerfacecolor() == "white"
    assert list(hollow.get_ydata()) == pytest.approx(by["dpd", "ttft", "p50"]["y_ms"][2:])
    assert lines["dpd-ttft-p50"].get_markevery() == [0, 1]  # filled markers on the verified levels only
    assert list(lines["aggregated-tpot-p90-unverified"].get_xdata()) == [8.0, 16.0, 32.0]
    legend = [text.get_text() for text in axes[0].get_legend().get_texts()]
    assert "dpd unverified (client-overhead)" in legend and "aggregated unverified (unchecked)" in legend
    assert "advisor disaggregated range" in legend
    caption = latency_caption(data)
    assert caption is not None and BAND in caption and "dpd at 32 (client-overhead)" in caption
    assert "aggregated at 8 (unchecked), 16 (unchecked), 32 (unchecked)" in caption
    assert "disaggregated TTFT at 32" in caption  # where the advisor gave no range
    report.write(tmp_path)
    page = (tmp_path / HTML_FILE).read_text(encoding="utf-8")
    assert f"<figcaption>{html.escape(caption)}</figcaption>" in page
    rows = json.loads(report.to_json())["comparison"]["rows"]
    first = next(r for r in rows if r["layout"] == "disaggregated" and r["metric"] == "TTFT p50")
    assert first["predicted_band"] == pytest.approx([0.8 * ttft[0] / 1e3, 1.3 * ttft[0] / 1e3])
    assert first["within_band"] is (first["predicted_band"][0] <= first["measured"] <= first["predicted_band"][1])
    assert "RANGE" in report.render() and "inside" in report.render()


def test_without_an_slo_the_capacity_says_which_field_sets_it(tmp_path: Path) -> None:
    """The default spec sets no slo: before, the capacity block, its JSON and the page's SLO line were just
    absent; now each says the capacity is not measured and names slo.ttft_ms and slo.tpot_ms."""
    from hyperpod_dpd.benchmark.report.capacity import NO_SLO

    assert default_spec().slo is None
    report = recorded_report(slo=None)
    assert NO_SLO in report.render() and "slo.ttft_ms" in NO_SLO and "slo.tpot_ms" in NO_SLO
    document = json.loads(report.to_json())
    assert document["capacity_at_slo"] == [] and document["capacity_at_slo_note"] == NO_SLO
    report.write(tmp_path)
    page = (tmp_path / HTML_FILE).read_text(encoding="utf-8")
    assert f"<p>{html.escape(NO_SLO)}</p>" in page
    data = read_embedded(page)
    assert data["slo"] is None and data["slo_note"] == NO_SLO
    with_slo = figure_series(recorded_report().write_input())
    assert with_slo["slo_note"] is None and "capacity at the spec's SLO (the client's p90" in recorded_report().render()


def repeated_report() -> Report:
    """DPD run three times at 8, 16 and 32 with the SLO's 600 ms p90 TTFT: at 16 the first repeat meets it (550 ms)
    and the two others miss it (650, 700 ms); each repeat's prefiller queued 50, 90 or 70 ms per request."""
    p90s = {8: (0.40, 0.45, 0.42), 16: (0.55, 0.65, 0.70), 32: (0.90, 0.95, 0.85)}
    queues = (0.05, 0.09, 0.07)
    runs = [run_of(*(recorded_level(c, [p90s[c][i]] * 20, [0.015] * 20, tokens_per_s=(60.0 + i) * c)
                     for c in LOADS)) for i in range(3)]
    routings = [{Load(concurrency=c): LevelDisaggregation.between(
        stage_counters(lmcache=True, scale=1, queue_s=queue), stage_counters(lmcache=True, scale=2, queue_s=queue),
        load=Load(concurrency=c)) for c in LOADS} for queue in queues]
    outcome = Outcome("dpd", "dpd-test", runs[0], [], job="bench-dpd-test-r", routing=routings[0],
                      repeats=runs[1:], repeat_routing=routings[1:])
    return Report(scenario=Scenario(isl=4352, osl=256, concurrency=LOADS), outcomes=[outcome], slo=(0.6, 0.02),
                  identity={"model": "m"})


def test_capacity_stages_and_figures_use_every_repeat_not_the_first() -> None:
    """Before, the first repeat alone gave capacity 16 and a 50 ms prefill queue; the median of the three repeats
    misses the SLO at 16 (650 ms) and queued 70 ms, and the figures draw the median with the repeats' range."""
    report = repeated_report()
    (capacity,) = report._capacities()
    assert capacity.load == Load(concurrency=8) and dict(capacity.met)[Load(concurrency=16)] is False
    stages = report.outcomes[0].decompositions()
    assert [row.runs for row in stages] == [3, 3, 3]
    assert [row.stage("prefill queue") for row in stages] == pytest.approx([0.07] * 3)
    data = figure_series(report.write_input())
    ttft = next(s for s in data["latency"] if (s["layout"], s["metric"], s["quantile"]) == ("dpd", "ttft", "p90"))
    assert ttft["y_ms"] == pytest.approx([420.0, 650.0, 900.0]) and ttft["runs"] == [3, 3, 3]
    assert [bound for pair in ttft["range_ms"] for bound in pair] == pytest.approx(
        [400.0, 450.0, 550.0, 700.0, 850.0, 950.0])
    assert data["ttft_stages"]["stages_ms"]["prefill queue"] == pytest.approx([70.0] * 3)
    assert data["ttft_stages"]["runs"] == [3, 3, 3]
    document = json.loads(report.to_json())
    assert [row["runs"] for row in document["ttft_stages"]] == [3, 3, 3]
    from hyperpod_dpd.benchmark.report.figures import latency_figure

    drawn = {c.get_gid(): c for ax in latency_figure(data).axes for c in ax.collections}
    segments = drawn["dpd-ttft-p90-range"].get_segments()
    assert [float(v) for segment in segments for point in segment for v in point] == pytest.approx(
        [8.0, 400.0, 8.0, 450.0, 16.0, 550.0, 16.0, 700.0, 32.0, 850.0, 32.0, 950.0])


def test_the_printed_report_shows_every_repeat_and_their_median_not_the_first_alone() -> None:
    """Before, the printed table showed the first of the three runs only: 550 ms at 16, which meets the SLO the
    median (650 ms, what capacity reads) misses."""
    text = repeated_report().render()
    assert "(the first of 3 runs; each run is below)" in text
    block = text[text.index("dpd: each of the 3 runs per level and their median"):].split("\n\n")[0]
    rows = [line.split() for line in block.splitlines()[2:]]
    assert len(rows) == 3 * 4
    at_16 = [row for row in rows if row[0] == "16"]
    assert [row[1] for row in at_16] == ["1", "2", "3", "median"]
    assert [row[2] for row in at_16] == ["550.0/550.0/550.0", "650.0/650.0/650.0", "700.0/700.0/700.0",
                                       "650.0/650.0/650.0"]
    assert [row[4] for row in at_16] == ["960.0", "976.0", "992.0", "976.0"]  # (60 + run) tok/s x 16
    assert [row[-1] for row in at_16] == ["100%", "100%", "100%", "-"]  # each run's own routing counts


def test_a_repeats_warning_says_which_run_it_is_of() -> None:
    """Before, a warning of the third run was printed under the first run's table with nothing to tell them apart."""
    from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
    from hyperpod_dpd.benchmark.session import _merge_repeat

    report = repeated_report()
    first = report.outcomes[0]
    again = Outcome("dpd", "dpd-test", first.repeats[0], [TrustWarning(
        code=Trust.FAILED_REQUESTS, load=Load(concurrency=16), message="2 of 20 requests failed")], job="bench-r4")
    _merge_repeat([first], [again])
    assert [w.message for w in first.warnings] == ["(run 4) 2 of 20 requests failed"]


def test_the_report_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    recorded_report().write(first)
    recorded_report().write(second)
    for name in (HTML_FILE, LATENCY_PNG, THROUGHPUT_PNG, STAGES_PNG, "report.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_without_matplotlib_the_report_keeps_the_numbers_and_names_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    written = recorded_report(with_prediction=False).write(tmp_path)
    assert {path.name for path in written} == {HTML_FILE, "report.json"}
    page = (tmp_path / HTML_FILE).read_text(encoding="utf-8")
    assert "pip install &#x27;.[bench]&#x27; in the hyperpod-dpd checkout" in page and "<svg" not in page
    data = read_embedded(page)
    assert data["prediction"] == [] and "advisor extra is not installed" in data["prediction_note"]
    assert "TTFT by stage" in page and "capacity at the spec&#x27;s SLO" in page


def test_the_prefillers_are_read_by_their_deployment_and_a_silent_one_is_left_out(fakes: ModuleType) -> None:
    from hyperpod_dpd.benchmark.proof.disaggregation import MetricsSources, read_counters
    spec = default_spec()
    prefill = histogram("vllm:request_prefill_time_seconds", 3.0, 10)
    answering, silent = "prefill-dpd-test-5b7-aaa", "prefill-dpd-test-5b7-bbb"
    other = "prefill-dpd-test-70b-5b7-ccc"  # another endpoint's prefiller, same name prefix

    def metrics(namespace: str, pod_port: str) -> str:
        pod = pod_port.split(":", maxsplit=1)[0]
        if pod == silent:
            raise fakes.api_error(504, "proxy timed out")
        return prefill if pod.startswith("prefill-") else "dpd_routing_disaggregated_total 1\n"

    pods = fakes.router_and_decoder()
    pods["default|inference.sagemaker.aws.amazon.com/dpd-role=prefill"] = [
        fakes.decoder_pod(name) for name in (answering, silent, other)]
    core = fakes.FakeCore(pods=[[]], logs={}, other_pods=pods, metrics=metrics)
    kube = fakes.benchmark_kube(fakes.FakeBatch(states=[]), core)
    counters = read_counters(kube, MetricsSources.for_spec(spec))
    assert sorted(pod for pod in counters.pods if pod.startswith("prefiller/") and pod not in counters.unread) == [
        f"prefiller/{answering}"]
    assert list(counters.unread) == [f"prefiller/{silent}"]  # kept, marked, so the stages can say they miss it
    sample = counters.pods[f"prefiller/{answering}"]
    assert sample["stage:prefill:vllm:request_prefill_time_seconds_sum"] == 3.0
    assert "stage:prefill:lmcache:store_put_time_sum" not in sample  # not exported: absent, not 0

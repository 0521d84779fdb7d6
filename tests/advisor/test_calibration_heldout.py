"""Held-out calibration: fit on some levels, predict another, and state the error.

Two checks, each with its error pinned:

- a hidden truth: an endpoint whose DPD side pays what the audit's simulation found DPD-only costs
  would be (prefill x1.3, decode step x1.1 on top of the kernels) and whose aggregated twin runs at
  AIConfigurator's own corrections. Calibrated per layout on concurrency 8 and 32, the model predicts
  16 within HIDDEN_BOUND on TPOT and throughput and HIDDEN_TTFT_BOUND on TTFT (measured: 3.5 % on the
  aggregated TTFT, at most 0.6 % elsewhere). TTFT's bound is wider because the simulated aggregated TTFT
  itself moves by up to 4 % between neighbouring prefill factors (x1.12: +3.7 %, x1.15: +2.6 % at
  concurrency 8), so two factors 2 % apart fit the same run.
- the blog's points on each GPU: the blog has no absolute figures, so its DPD run is built from the
  uncalibrated aggregated prediction times the published changes at 8 (TPOT, and TTFT +15 %: "rises
  modestly") and 32 (TPOT, and throughput at its published bound), as the audit built it for H100, and
  the aggregated run is that prediction itself. Calibrated on those, the model's change at the
  held-out 16 is compared with what the blog published there, and BLOG_MISSES pins the misses (points
  outside the published bound or range). H100: throughput +66.3 % against at most +35 % (31.3 points;
  uncalibrated 42.1, the old one-set-for-both fit 47.1 as the audit measured it), E2E -40.0 % against
  -14..-32 % (8.0 points; 11.6 and 13.2).
  The fitted levels stay off by TTFT 12 %, TPOT 9 %: no one decode factor gives both the -22 % at 8 and
  the -66 % at 32. On H200 the held-out 16 lands inside both published figures (throughput +50.6 %, E2E
  -33.8 %; uncalibrated 21.7 and 5.3 points out), but the fitted levels stay off by TTFT 25 %, TPOT 16 %:
  the blog's -48 % at 32 wants a decode step 1.4x the kernels' (fitted x1.42), its -28 % at 8 much less.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from hyperpod_dpd.advisor import Advice, Traffic, advise
from hyperpod_dpd.advisor.calibration import calibrate, parse_bench
from hyperpod_dpd.advisor.published import E2E, GPUS, POINTS, THROUGHPUT, TPOT, Published
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.spec.defaults import default_spec

Bench = Callable[..., dict[str, Any]]
FITTED = Traffic(isl=4096, osl=256, concurrency=(8, 32))
HELD_OUT = Traffic(isl=4096, osl=256, concurrency=(16,))
HIDDEN = PhaseFactors(prefill=1.3, decode=1.1, overhead_s=0.0, aggregated=PhaseFactors())
HIDDEN_BOUND = 0.03
HIDDEN_TTFT_BOUND = 0.06
# The held-out c=16 against the blog, in points outside its figure, and how far they may move.
BLOG_MISSES = {"H100": {THROUGHPUT: 0.313, E2E: 0.080}, "H200": {THROUGHPUT: 0.0, E2E: 0.0}}
BLOG_WIDTH = 0.01


def test_a_hidden_truth_is_predicted_at_a_held_out_level(bench_of: Bench) -> None:
    truth = advise(default_spec(), FITTED, baseline_nodes=1, factors=HIDDEN)
    fit = calibrate(default_spec(), FITTED, parse_bench(bench_of(truth, aggregated=truth), where="b.json"),
                    source="b.json")
    expected = advise(default_spec(), HELD_OUT, baseline_nodes=1, factors=HIDDEN).points[0]
    got = advise(default_spec(), HELD_OUT, baseline_nodes=1, factors=fit.factors).points[0]
    for side in ("disaggregated", "aggregated"):
        want, have = getattr(expected, side), getattr(got, side)
        for metric in ("ttft_s", "tpot_s", "output_tokens_per_s"):
            bound = HIDDEN_TTFT_BOUND if metric == "ttft_s" else HIDDEN_BOUND
            assert getattr(have, metric) == pytest.approx(getattr(want, metric), rel=bound), (side, metric)


def _published(gpu: str, metric: str, concurrency: int) -> Published:
    return next(p for p in POINTS if (p.gpu, p.metric, p.concurrency) == (gpu, metric, concurrency))


def _blog_dpd(uncalibrated: Advice, gpu: str) -> Advice:
    """The DPD side of ``uncalibrated`` replaced by what the blog's changes on ``gpu`` imply at 8 and 32."""
    points = []
    for point in uncalibrated.points:
        agg, osl, c = point.aggregated, uncalibrated.osl, point.concurrency
        tpot_change = _published(gpu, TPOT, c).exact
        assert tpot_change is not None
        tpot = agg.tpot_s * (1 + tpot_change)
        if c == 8:
            ttft = agg.ttft_s * 1.15
            e2e = ttft + (osl - 1) * tpot
        else:
            gain = _published(gpu, THROUGHPUT, c).at_most
            assert gain is not None
            e2e = c * osl / (agg.output_tokens_per_s * (1 + gain))
            ttft = e2e - (osl - 1) * tpot
        dpd = replace(point.disaggregated, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, output_tokens_per_s=c * osl / e2e)
        points.append(replace(point, disaggregated=dpd))
    return replace(uncalibrated, points=tuple(points))


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
@pytest.mark.parametrize("gpu", list(GPUS))
def test_the_blogs_held_out_point_after_calibrating_on_the_others(gpu: str, bench_of: Bench) -> None:
    spec = replace(default_spec(), instance_type=GPUS[gpu])
    uncalibrated = advise(spec, FITTED, baseline_nodes=1)
    document = bench_of(_blog_dpd(uncalibrated, gpu), aggregated=uncalibrated)
    for run in document["runs"].values():  # what bench records of a run on this GPU's instance type
        run["instance_type"] = GPUS[gpu].facts.name
    fit = calibrate(spec, FITTED, parse_bench(document, where="blog.json"), source="blog.json")
    point = advise(spec, HELD_OUT, baseline_nodes=1, factors=fit.factors).points[0]
    changes = {THROUGHPUT: point.disaggregated.output_tokens_per_s / point.aggregated.output_tokens_per_s - 1,
               E2E: point.disaggregated.e2e_s / point.aggregated.e2e_s - 1}
    misses = {metric: max(0.0, _published(gpu, metric, 16).miss(change)) for metric, change in changes.items()}
    for metric, pinned in BLOG_MISSES[gpu].items():
        assert misses[metric] == pytest.approx(pinned, abs=BLOG_WIDTH), (metric, misses, changes)

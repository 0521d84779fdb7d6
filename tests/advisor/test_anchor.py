"""The prediction for the blog's set-up against the blog's measured H100 and H200 results, every point.

The AWS blog (Llama 3.3 70B Instruct, TP 8, one prefill and one decode node against one aggregated
node, genai-bench 4,096/256 tokens at concurrency 8, 16 and 32) publishes relative changes only:
TPOT 22 % lower at 8 rising to 66 % lower at 32 on ml.p5.48xlarge (H100), 28 % to 48 % on
ml.p5en.48xlarge (H200); output throughput up to +35 % (H100) and +64 % (H200); median end-to-end
latency 14-32 % (H100) and 29-41 % (H200) lower. TOLERANCE is 12 percentage points on each: single
genai-bench runs on vLLM 0.19 with LMCache against kernels measured on vLLM 0.24, medians against
means. Every point is checked; the points where the model misses by more are listed in KNOWN_MISSES
with the size of the miss, so that a change of the model that moves them fails here too and the
documentation (docs/advise.md) stays true.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hyperpod_dpd.advisor import Advice, AdvicePoint, Traffic, advise
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.instances import InstanceType

TOLERANCE = 0.12
PUBLISHED_TPOT_CUT = {"H100": {8: 0.22, 32: 0.66}, "H200": {8: 0.28, 32: 0.48}}
PUBLISHED_THROUGHPUT_GAIN_MAX = {"H100": 0.35, "H200": 0.64}
PUBLISHED_E2E_CUT = {"H100": (0.14, 0.32), "H200": (0.29, 0.41)}
# (GPU, metric, concurrency): the model's figure minus the published bound, in points, +-5.
KNOWN_MISSES = {("H100", "throughput", 16): 0.42, ("H100", "throughput", 32): 0.20,
                ("H200", "throughput", 16): 0.22, ("H200", "tpot", 32): 0.21}
MISS_WIDTH = 0.05


@pytest.fixture(scope="module")
def h200_advice() -> Advice:
    spec = replace(default_spec(), instance_type=InstanceType.P5EN_48XLARGE)
    return advise(spec, Traffic(isl=4096, osl=256, concurrency=(8, 16, 32)), baseline_nodes=1)


def advice_for(gpu: str, blog_advice: Advice, h200_advice: Advice) -> Advice:
    return blog_advice if gpu == "H100" else h200_advice


def by_concurrency(advice: Advice) -> dict[int, AdvicePoint]:
    return {point.concurrency: point for point in advice.points}


def tpot_cut(point: AdvicePoint) -> float:
    return 1 - point.disaggregated.tpot_s / point.aggregated.tpot_s


def check(gpu: str, metric: str, concurrency: int, off_by: float) -> None:
    """``off_by`` is how far outside the published figure the model is (0 or less: inside)."""
    known = KNOWN_MISSES.get((gpu, metric, concurrency))
    if known is None:
        assert off_by <= TOLERANCE, (gpu, metric, concurrency, off_by)
    else:
        assert off_by == pytest.approx(known, abs=MISS_WIDTH), (gpu, metric, concurrency, off_by)


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_tpot_cut_at_both_published_ends(gpu: str, blog_advice: Advice, h200_advice: Advice) -> None:
    points = by_concurrency(advice_for(gpu, blog_advice, h200_advice))
    for concurrency, published in PUBLISHED_TPOT_CUT[gpu].items():
        check(gpu, "tpot", concurrency, abs(tpot_cut(points[concurrency]) - published))


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_tpot_cut_grows_with_concurrency_as_published(gpu: str, blog_advice: Advice, h200_advice: Advice) -> None:
    cuts = [tpot_cut(point) for point in advice_for(gpu, blog_advice, h200_advice).points]
    assert cuts == sorted(cuts)
    assert cuts[-1] - cuts[0] > 0.2


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_throughput_gain_at_every_point(gpu: str, blog_advice: Advice, h200_advice: Advice) -> None:
    for point in advice_for(gpu, blog_advice, h200_advice).points:
        gain = point.disaggregated.output_tokens_per_s / point.aggregated.output_tokens_per_s - 1
        assert gain > 0
        check(gpu, "throughput", point.concurrency, gain - PUBLISHED_THROUGHPUT_GAIN_MAX[gpu])


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_end_to_end_cut_at_every_point(gpu: str, blog_advice: Advice, h200_advice: Advice) -> None:
    low, high = PUBLISHED_E2E_CUT[gpu]
    for point in advice_for(gpu, blog_advice, h200_advice).points:
        cut = 1 - point.disaggregated.e2e_s / point.aggregated.e2e_s
        check(gpu, "e2e", point.concurrency, max(low - cut, cut - high))


def test_the_audits_simulation_as_a_second_reference(blog_advice: Advice) -> None:
    """The audit's event simulation on the same kernels, AIC scales (H100, 1P+1D): the decoder runs about
    17 requests at concurrency 32, not 32 (F3); TPOT 12.4 ms; 1,383 tok/s; the prefiller saturates near
    16-18 closed-loop clients, so the queue is small at 16 and seconds at 32."""
    points = by_concurrency(blog_advice)
    dpd32 = points[32].disaggregated
    assert dpd32.decoding == pytest.approx(17.1, abs=1.0)
    assert dpd32.tpot_s == pytest.approx(0.0124, rel=0.05)
    assert dpd32.output_tokens_per_s == pytest.approx(1383, rel=0.05)
    assert points[16].disaggregated.queue_s < 0.3
    assert dpd32.queue_s > 2.0
    assert points[8].disaggregated.ttft_s == pytest.approx(0.222, rel=0.25)


def test_blog_layout_uses_twice_the_nodes(blog_advice: Advice) -> None:
    for point in blog_advice.points:
        assert (point.aggregated.nodes, point.disaggregated.nodes) == (1, 2)
        assert "on 2 nodes against 1" in point.verdict
        assert point.disaggregated.usd_per_hour == pytest.approx(2 * point.aggregated.usd_per_hour)


def test_equal_cost_is_equal_in_nodes_and_dollars(equal_cost_advice: Advice) -> None:
    for point in equal_cost_advice.points:
        assert point.aggregated.nodes == point.disaggregated.nodes == 2
        assert point.aggregated.usd_per_hour == point.disaggregated.usd_per_hour
        assert "on the same 2 node(s)" in point.verdict

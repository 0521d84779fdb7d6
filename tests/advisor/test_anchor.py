"""The prediction for the blog's set-up against every point AWS published, in one table that docs/advise.md quotes.

The published figures are :data:`hyperpod_dpd.advisor.published.POINTS` (relative changes only, single
genai-bench runs on vLLM 0.19 with LMCache 0.4.3). TOLERANCE is 10 percentage points on every point. A
point the model misses by more is pinned in KNOWN_MISSES with the size of the miss and its cause; the
test fails when a pinned miss grows or shrinks by more than MISS_WIDTH, or disappears, so a change of
the model that moves one must update the pin and the documentation together. The table between the
``published-table`` markers of docs/advise.md is generated here: run this test with
``UPDATE_PUBLISHED_TABLE=1`` to rewrite it after a change.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from hyperpod_dpd.advisor import Advice, AdvicePoint, Traffic, advise
from hyperpod_dpd.advisor.published import (
    CONCURRENCY,
    E2E,
    GPUS,
    ISL,
    MODEL_E2E_ERROR,
    MODEL_TPOT_ERROR,
    OSL,
    POINTS,
    TARGET_MAX,
    THROUGHPUT,
    TPOT,
    Published,
    model_errors,
)
from hyperpod_dpd.spec.defaults import default_spec

TOLERANCE = TARGET_MAX  # the one place the limits live, with their reasons
MISS_WIDTH = 0.01
DOC = Path(__file__).resolve().parents[2] / "docs" / "advise.md"
BEGIN, END = "<!-- BEGIN generated: published-table -->", "<!-- END generated: published-table -->"
# (GPU, metric, concurrency): the model's miss in points (change minus the published figure, bound or range)
# and why. The model's DPD-only costs are the KV transfer at the node's EFA line rate (3.4 ms for the prompt on
# either instance, 1.8 % of the 187 ms prefill) and nothing else sourced: LMCache's copy of the received KV into
# the decoder's paged cache is about 0.1 ms (0.34 GB read and written per GPU at HBM bandwidth), the router's
# two proxied hops are not published, and the decoder's PD buffer holds every prompt in flight at these loads.
# None of these reaches the size of a miss below.
KNOWN_MISSES: dict[tuple[str, str, int], tuple[float, str]] = {
    ("H100", TPOT, 8): (0.102, "needs a DPD decode step 15 % slower than the kernels' (12.9 ms, not 11.2 ms); no "
                               "sourced DPD-only cost on the decoder is that large"),
    ("H100", THROUGHPUT, 16): (0.421, "the prefiller is below its knee at 16 clients (queue under 0.3 s), so the "
                                      "gain is the ratio of the decode steps; the audit found no DPD-only factor "
                                      "on prefill and decode that brings it under +35 % (best +38 %)"),
    ("H100", THROUGHPUT, 32): (0.201, "the single prefiller's capacity (5.4 prompts/s) sets DPD's 1,370 tok/s; "
                                      "+35 % needs a prefill 15 % slower than the kernels', 8x the KV transfer"),
    ("H100", E2E, 16): (0.116, "follows from the throughput at 16: a closed loop's E2E is C over its throughput"),
    ("H200", TPOT, 32): (0.208, "needs a DPD decode step of about 17 ms, 1.7x the kernels', where H100 at 32 "
                                "needs 1.0x: not a cost DPD pays on one GPU and not the other (single runs, "
                                "no error bars)"),
    ("H200", THROUGHPUT, 16): (0.217, "as H100 at 16: below the knee the gain is the decode steps' ratio"),
}


@pytest.fixture(scope="module")
def h200_advice() -> Advice:
    spec = replace(default_spec(), instance_type=GPUS["H200"])
    return advise(spec, Traffic(isl=ISL, osl=OSL, concurrency=CONCURRENCY), baseline_nodes=1)


def advice_for(gpu: str, blog_advice: Advice, h200_advice: Advice) -> Advice:
    return blog_advice if gpu == "H100" else h200_advice


def by_concurrency(advice: Advice) -> dict[int, AdvicePoint]:
    return {point.concurrency: point for point in advice.points}


def tpot_cut(point: AdvicePoint) -> float:
    return 1 - point.disaggregated.tpot_s / point.aggregated.tpot_s


def change(point: AdvicePoint, metric: str) -> float:
    """DPD's predicted change of ``metric`` against the baseline (mean E2E: the blog's is the median)."""
    dpd, agg = point.disaggregated, point.aggregated
    return {TPOT: dpd.tpot_s / agg.tpot_s, THROUGHPUT: dpd.output_tokens_per_s / agg.output_tokens_per_s,
            E2E: dpd.e2e_s / agg.e2e_s}[metric] - 1


@pytest.fixture(scope="module")
def predicted(blog_advice: Advice, h200_advice: Advice) -> dict[tuple[str, str, int], float]:
    return {(gpu, metric, c): change(point, metric) for gpu in GPUS
            for c, point in by_concurrency(advice_for(gpu, blog_advice, h200_advice)).items()
            for metric in (TPOT, THROUGHPUT, E2E)}


def key(point: Published) -> tuple[str, str, int]:
    return point.gpu, point.metric, point.concurrency


@pytest.mark.parametrize("point", POINTS, ids=lambda p: f"{p.gpu}-{p.metric}-{p.concurrency}")
def test_every_published_point_is_within_tolerance_or_pinned(point: Published,
                                                             predicted: dict[tuple[str, str, int], float]) -> None:
    off_by = point.miss(predicted[key(point)])
    pinned = KNOWN_MISSES.get(key(point))
    if pinned is None:
        assert off_by <= TOLERANCE, f"{key(point)} misses by {off_by:.3f}: fix the model or pin it with its cause"
    else:
        assert off_by > TOLERANCE, f"{key(point)} no longer misses ({off_by:.3f}): unpin it and update the docs"
        assert off_by == pytest.approx(pinned[0], abs=MISS_WIDTH), f"{key(point)} moved: {off_by:.3f}"


def test_every_pin_names_a_published_point() -> None:
    assert set(KNOWN_MISSES) <= {key(point) for point in POINTS}


def _percent(value: float) -> str:
    return f"{value * 100:+.1f} %"


def published_table(predicted: dict[tuple[str, str, int], float]) -> str:
    """The markdown docs/advise.md carries: every published point, predicted beside it, and the pinned misses."""
    rows = ["| GPU | Metric | C | Published | Predicted | Miss, points | |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    published = {key(point): point for point in POINTS}
    for gpu in GPUS:
        for metric in (TPOT, THROUGHPUT, E2E):
            for c in CONCURRENCY:
                point = published.get((gpu, metric, c))
                value = predicted[(gpu, metric, c)]
                if point is None:
                    rows.append(f"| {gpu} | {metric} | {c} | not published | {_percent(value)} | | |")
                    continue
                off_by = max(0.0, point.miss(value))
                status = "pinned miss" if (gpu, metric, c) in KNOWN_MISSES else "within 10"
                shown = f"**{off_by * 100:.1f}**" if status == "pinned miss" else f"{off_by * 100:.1f}"
                rows.append(f"| {gpu} | {metric} | {c} | {point.describe()} | {_percent(value)} | {shown} | {status} |")
    misses = [f"- {gpu} {metric} at {c} ({size * 100:.1f} points): {cause}."
              for (gpu, metric, c), (size, cause) in KNOWN_MISSES.items()]
    scored = [max(0.0, point.miss(predicted[key(point)])) for point in POINTS]
    summary = (f"Mean miss over the {len(POINTS)} published points: {sum(scored) / len(scored) * 100:.1f} points; "
               f"{sum(1 for s in scored if s > TOLERANCE)} beyond the tolerance of {TOLERANCE * 100:.0f}, each pinned:")
    return "\n".join([*rows, "", summary, "", *misses])


def test_the_published_table_in_the_docs_is_generated_from_this_test(
        predicted: dict[tuple[str, str, int], float]) -> None:
    text = DOC.read_text(encoding="utf-8")
    pattern = re.compile(rf"({re.escape(BEGIN)}\n).*?(\n{re.escape(END)})", re.DOTALL)
    assert pattern.search(text), f"docs/advise.md has no {BEGIN} ... {END} part"
    table = published_table(predicted)
    updated = pattern.sub(lambda m: m.group(1) + table + m.group(2), text)
    if os.environ.get("UPDATE_PUBLISHED_TABLE") == "1":
        DOC.write_text(updated, encoding="utf-8")
    assert updated == text, "docs/advise.md's published table is stale: rerun with UPDATE_PUBLISHED_TABLE=1"


@pytest.mark.parametrize("gpu", list(GPUS))
def test_tpot_cut_grows_with_concurrency_as_published(gpu: str, blog_advice: Advice, h200_advice: Advice) -> None:
    cuts = [tpot_cut(point) for point in advice_for(gpu, blog_advice, h200_advice).points]
    assert cuts == sorted(cuts)
    assert cuts[-1] - cuts[0] > 0.2


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


def test_the_ranges_model_error_is_the_models_miss_on_the_published_points(
        predicted: dict[tuple[str, str, int], float]) -> None:
    """The uncalibrated ranges are widened by MODEL_TPOT_ERROR and MODEL_E2E_ERROR: they must be what this table
    says the model misses by (a model change that moves the misses must move them too)."""
    tpot, e2e = model_errors(predicted)
    assert (tpot, e2e) == pytest.approx((MODEL_TPOT_ERROR, MODEL_E2E_ERROR), abs=MISS_WIDTH)

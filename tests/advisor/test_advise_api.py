"""``advise(spec, traffic)`` from Python: typed, frozen, deterministic results."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from support import default_mapping

from hyperpod_dpd.advisor import Advice, AdvicePoint, Estimate, Layout, Traffic, advise, verdict
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.spec import RoutingSpec
from hyperpod_dpd.spec.defaults import default_spec

SIDE_KEYS = {"ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
             "output_tokens_per_s_per_user", "gpus"}


def test_results_are_typed_and_frozen(blog_advice: Advice) -> None:
    assert isinstance(blog_advice.points[0], AdvicePoint)
    assert isinstance(blog_advice.points[0].aggregated, Estimate)
    with pytest.raises(dataclasses.FrozenInstanceError):
        blog_advice.points[0].aggregated.ttft_s = 0.0  # type: ignore[misc]
    assert [p.concurrency for p in blog_advice.points] == [8, 16, 32]


def test_figures_are_consistent(blog_advice: Advice) -> None:
    for point in blog_advice.points:
        for side in (point.aggregated, point.disaggregated):
            assert side.output_tokens_per_s == pytest.approx(side.requests_per_s * 256)
            assert side.output_tokens_per_s_per_gpu == pytest.approx(side.output_tokens_per_s / side.gpus)
            assert side.output_tokens_per_s_per_user == pytest.approx(1 / side.tpot_s)
            # Little's law for a closed loop: requests in flight = throughput x end-to-end latency.
            assert side.requests_per_s * side.e2e_s == pytest.approx(point.concurrency, rel=0.02)
            assert side.e2e_s >= side.ttft_s + 255 * side.tpot_s - 1e-9


def test_default_baseline_is_equal_cost(equal_cost_advice: Advice) -> None:
    assert equal_cost_advice.baseline_nodes == 2
    assert all(p.aggregated.gpus == p.disaggregated.gpus == 16 for p in equal_cost_advice.points)


def test_kv_transfer_time_is_in_dpd_ttft(blog_advice: Advice) -> None:
    assert "3.4 ms" in blog_advice.assumptions["transport"]


def test_assumptions_name_what_the_estimate_rests_on(blog_advice: Advice) -> None:
    assumptions = blog_advice.assumptions
    assert assumptions["aiconfigurator"] == "0.12.0"
    assert assumptions["system"] == "h100_sxm"
    assert assumptions["backend"].startswith("vllm ")
    assert assumptions["database_mode"].startswith("SILICON")
    assert "EFA" in assumptions["transport"]
    assert "confirm it on the cluster" in assumptions["estimate"]


def test_json_shape(blog_advice: Advice) -> None:
    data = blog_advice.to_json()
    assert set(data) >= {"points", "assumptions"}
    point = data["points"][0]  # type: ignore[index]
    assert point["concurrency"] == 8
    for side in ("aggregated", "disaggregated"):
        assert set(point[side]) >= SIDE_KEYS


def test_same_input_same_output() -> None:
    traffic = Traffic(isl=4096, osl=256, concurrency=(16,))
    assert advise(default_spec(), traffic).to_json() == advise(default_spec(), traffic).to_json()


def test_request_rate_queues_before_capacity_and_saturates_beyond() -> None:
    """F6: an open loop queues below capacity, more as the load nears it, and is "saturated" beyond."""
    spec = default_spec()
    (low,) = advise(spec, Traffic(isl=4096, osl=256, request_rate=2.0)).points
    capacity = low.disaggregated.capacity_requests_per_s
    (near,) = advise(spec, Traffic(isl=4096, osl=256, request_rate=round(0.93 * capacity, 2))).points
    for point in (low, near):
        assert point.disaggregated.sustains_load
        assert point.disaggregated.output_tokens_per_s == pytest.approx(point.request_rate * 256)
    assert 0 < low.disaggregated.queue_s < near.disaggregated.queue_s
    assert near.disaggregated.queue_s > 0.3  # the audit's M/D/1 figure at 93 % of the raw capacity
    assert "throughput" not in low.verdict and "at 2 requests/s on the same 2 node(s)" in low.verdict


def test_rate_beyond_capacity_is_reported_not_hidden() -> None:
    advice = advise(default_spec(), Traffic(isl=4096, osl=256, request_rate=500.0, ttft_ms=2000))
    (point,) = advice.points
    assert not point.disaggregated.sustains_load
    assert math.isnan(point.disaggregated.ttft_s)
    assert point.disaggregated.to_json()["ttft_s"] is None
    assert "disaggregated is saturated at 500 requests/s (capacity " in point.verdict
    assert point.misses["disaggregated"] == ("ttft",)
    assert not advice.meets_sla


def test_sla_misses_are_listed_per_side(blog_advice: Advice) -> None:
    advice = advise(default_spec(), Traffic(isl=4096, osl=256, concurrency=(32,), ttft_ms=1000, tpot_ms=20))
    (point,) = advice.points
    assert point.misses == {"aggregated": ("tpot",), "disaggregated": ("ttft",)}
    assert not advice.meets_sla


def test_prompts_below_the_threshold_skip_the_prefiller() -> None:
    advice = advise(default_spec(), Traffic(isl=2048, osl=256, concurrency=(16,)))
    (point,) = advice.points
    assert "decoder only" in point.disaggregated.description
    assert point.disaggregated.gpus == 16
    assert any("[below-threshold]" in w for w in advice.warnings)
    lowered = replace(default_spec(), routing=RoutingSpec(threshold=1024))
    (routed,) = advise(lowered, Traffic(isl=2048, osl=256, concurrency=(16,))).points
    assert "prefill" in routed.disaggregated.description


def test_verdict_wording() -> None:
    def side(tpot: float, tokens: float, gpus: int) -> Estimate:
        return Estimate(layout=Layout.AGGREGATED, description="x", concurrency=8, ttft_s=0.3, ttft_p90_s=0.4,
                        tpot_s=tpot, e2e_s=1.0, queue_s=0.0, requests_per_s=1.0, output_tokens_per_s=tokens,
                        output_tokens_per_s_per_gpu=tokens / gpus, output_tokens_per_s_per_user=1 / tpot, gpus=gpus,
                        gpus_used=gpus, nodes=gpus // 8, tensor_parallel_size=8, decoding=8.0,
                        capacity_requests_per_s=2.0)

    text = verdict(side(0.020, 1000, 16), side(0.0128, 880, 16), load="concurrency 32")
    assert text == ("DPD cuts TPOT by 36% but gives 12% less throughput at concurrency 32 on the same 2 node(s); "
                    "TTFT about the same")
    text = verdict(side(0.010, 500, 8), side(0.012, 400, 16), load="concurrency 8")
    assert text.startswith("DPD raises TPOT by 20% and gives 20% less throughput at concurrency 8 on 2 nodes "
                           "against 1")


def test_verdict_never_says_zero_percent() -> None:
    """C2: a change that rounds to 0% is "about the same", not "raises TPOT by 0% but gives 0% more"."""
    same = Estimate(layout=Layout.AGGREGATED, description="x", concurrency=1, ttft_s=0.013, ttft_p90_s=0.013,
                    tpot_s=0.010, e2e_s=0.2, queue_s=0.0, requests_per_s=5.0, output_tokens_per_s=80.0,
                    output_tokens_per_s_per_gpu=5.0, output_tokens_per_s_per_user=100.0, gpus=16, gpus_used=8,
                    nodes=2, tensor_parallel_size=8, decoding=1.0, capacity_requests_per_s=9.0)
    text = verdict(same, replace(same, tpot_s=0.01001, output_tokens_per_s=80.1), load="concurrency 1")
    assert "0%" not in text
    assert text == ("DPD leaves TPOT about the same and gives about the same throughput at concurrency 1 on the "
                    "same 2 node(s); TTFT about the same")


def test_one_output_token_has_no_tpot_and_no_tpot_verdict() -> None:
    """W4: with osl 1 there is no second token; TPOT is n/a, not 0 ms and "DPD cuts TPOT by 100%"."""
    from hyperpod_dpd.advisor.render import render_advice

    advice = advise(default_spec(), Traffic(isl=4096, osl=1, concurrency=(1,)))
    (point,) = advice.points
    for side in (point.aggregated, point.disaggregated):
        assert math.isnan(side.tpot_s) and side.to_json()["tpot_s"] is None and side.sustains_load
    assert "100%" not in point.verdict and "has no TPOT to change (fewer than 2 output tokens)" in point.verdict
    rows = [row for row in map(str.split, render_advice(advice).splitlines())
            if row[:1] in (["aggregated"], ["DPD"]) and row[1].isdigit()]
    assert len(rows) == 2 and all(row[5] == "n/a" for row in rows)


def test_closed_loop_capacity_is_the_saturation_rate_not_the_throughput(blog_advice: Advice) -> None:
    """C1: at concurrency 8 the DPD layout completes ~2.6 requests/s but can sustain ~5.35."""
    point = blog_advice.points[0]
    dpd = point.disaggregated.to_json()
    assert dpd["capacity_requests_per_s"] == pytest.approx(5.35, rel=0.05)
    assert dpd["requests_per_s"] < 0.6 * dpd["capacity_requests_per_s"]
    (at_rate,) = advise(default_spec(), Traffic(isl=4096, osl=256, request_rate=2.0), baseline_nodes=1).points
    assert point.disaggregated.capacity_per_s == pytest.approx(at_rate.disaggregated.capacity_per_s, rel=0.01)


@pytest.mark.parametrize(("traffic", "field"), [
    (Traffic(isl=0, osl=256, concurrency=(8,)), "traffic.isl"),
    (Traffic(isl=16000, osl=1000, concurrency=(8,)), "traffic.isl"),
    (Traffic(isl=4096, osl=256), "traffic.concurrency"),
    (Traffic(isl=4096, osl=256, concurrency=(8,), request_rate=1.0), "traffic.concurrency"),
    (Traffic(isl=4096, osl=256, concurrency=(0,)), "traffic.concurrency"),
    (Traffic(isl=4096, osl=256, concurrency=(8, 8)), "traffic.concurrency"),
    (Traffic(isl=4096, osl=256, request_rate=float("nan")), "traffic.request_rate"),
    (Traffic(isl=4096, osl=256, concurrency=(8,), tpot_ms=-1), "traffic.tpot_ms"),
])
def test_bad_traffic_names_the_field(traffic: Traffic, field: str) -> None:
    with pytest.raises(SpecError) as caught:
        advise(default_spec(), traffic)
    assert field in [problem.field for problem in caught.value.problems]
    assert "Fix:" in str(caught.value)


def test_missing_extra_raises_advisor_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from hyperpod_dpd.advisor import AdvisorUnavailable
    from hyperpod_dpd.errors import UsageError

    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)
    with pytest.raises(AdvisorUnavailable, match=r"pip install '\.\[advisor\]' in the hyperpod-dpd checkout") as caught:
        advise(default_spec(), Traffic(isl=4096, osl=256, concurrency=(8,)))
    assert isinstance(caught.value, UsageError)


def test_bad_baseline_nodes() -> None:
    with pytest.raises(SpecError, match="baseline_nodes"):
        advise(default_spec(), Traffic(isl=4096, osl=256, concurrency=(8,)), baseline_nodes=0)


def test_a_baseline_the_advisor_cannot_simulate_in_time_is_refused_not_run() -> None:
    """A fuzzed --baseline-nodes 2000 ran for minutes: past the cap it is refused at once, with the fix."""
    from hyperpod_dpd.advisor.comparison import MAX_SIMULATED_NODES

    with pytest.raises(SpecError) as refused:
        advise(default_spec(), Traffic(isl=4096, osl=256, concurrency=(8,)), baseline_nodes=MAX_SIMULATED_NODES + 1)
    (problem,) = refused.value.problems
    assert problem.field == "baseline_nodes" and problem.value == MAX_SIMULATED_NODES + 1
    assert f"--baseline-nodes {MAX_SIMULATED_NODES} or fewer" in (problem.fix or "")


def test_the_cli_refuses_a_baseline_past_the_simulated_nodes_with_exit_2(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hyperpod_dpd.advisor.comparison import MAX_SIMULATED_NODES
    from hyperpod_dpd.cli import main

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(default_mapping()), encoding="utf-8")
    code = main(["advise", str(spec), "--isl", "1024", "--osl", "128", "--request-rate", "50",
                 "--baseline-nodes", str(MAX_SIMULATED_NODES * 3)])
    err = capsys.readouterr().err
    assert code == 2 and "baseline_nodes" in err and "Traceback" not in err


def test_a_search_beyond_the_simulated_nodes_is_refused() -> None:
    from hyperpod_dpd.advisor.comparison import MAX_SIMULATED_NODES
    from hyperpod_dpd.advisor.search import search

    with pytest.raises(SpecError) as refused:
        search(default_spec(), Traffic(isl=4096, osl=256, concurrency=(8,), ttft_ms=2000),
               max_nodes=MAX_SIMULATED_NODES + 1)
    assert [p.field for p in refused.value.problems] == ["max_nodes"]


def test_ttft_and_tpot_are_bands_around_the_point(blog_advice: Advice) -> None:
    """From the least to the most variable service times, not one number (the point lies inside)."""
    for point in blog_advice.points:
        for side in (point.aggregated, point.disaggregated):
            assert side.ttft_band_s is not None and side.tpot_band_s is not None
            low, high = side.ttft_band_s
            assert low <= side.ttft_s <= high and high > 1.05 * low
            assert side.tpot_band_s[0] <= side.tpot_s <= side.tpot_band_s[1]
            data = side.to_json()
            assert data["ttft_band_s"] == [round(low, 4), round(high, 4)]
            assert data["by_analogy_to"] is None


def test_a_saturated_load_has_no_band() -> None:
    advice = advise(default_spec(), Traffic(isl=4096, osl=256, request_rate=50.0))
    dpd = advice.points[0].disaggregated
    assert not dpd.sustains_load and dpd.ttft_band_s is None and dpd.to_json()["ttft_band_s"] is None


def test_an_open_loop_above_90_percent_of_capacity_is_warned_with_its_horizon() -> None:
    near = advise(default_spec(), Traffic(isl=4096, osl=256, request_rate=5.0))  # DPD's capacity is about 5.3/s
    (warning,) = [w for w in near.warnings if w.startswith("[near-capacity]")]
    assert warning.startswith("[near-capacity] disaggregated: 5 requests/s is 9")
    assert "4,000 arrivals (800 s)" in warning and "lower bound" in warning
    calm = advise(default_spec(), Traffic(isl=4096, osl=256, request_rate=2.0))
    assert not [w for w in calm.warnings if w.startswith("[near-capacity]")]


def test_the_verdict_names_a_tuned_aggregated_engine_that_beats_dpd(equal_cost_advice: Advice) -> None:
    """At concurrency 32 a 512-token step budget lets two aggregated nodes outrun DPD's single prefiller."""
    by_load = {p.concurrency: p for p in equal_cost_advice.points}
    for point in equal_cost_advice.points:
        tuned = point.tuned_aggregated
        assert tuned is not None and tuned.nodes == point.aggregated.nodes
        # The spec's own engine is in the grid, so tuning never loses throughput.
        assert tuned.output_tokens_per_s >= 0.99 * point.aggregated.output_tokens_per_s
        assert point.to_json()["tuned_aggregated"] == tuned.to_json()
    wins = by_load[32]
    assert wins.tuned_aggregated is not None
    assert wins.tuned_aggregated.output_tokens_per_s > wins.disaggregated.output_tokens_per_s
    assert "but a tuned aggregated engine wins: 2 x TP8 vLLM replica(s) with --max-num-batched-tokens 512" in (
        wins.verdict)
    assert "more throughput than DPD" in wins.verdict
    assert "tuned aggregated" not in by_load[8].verdict  # DPD's 21 % lead holds against every tuned engine

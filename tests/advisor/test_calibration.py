"""``advise --calibrate``: per-phase factors fitted to a bench result, the model's error before and after."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import slo_autoscaled, with_slo_options

from hyperpod_dpd.advisor import Advice, Traffic, advise
from hyperpod_dpd.advisor.calibration import calibrate, calibrate_at_its_traffic, parse_bench
from hyperpod_dpd.advisor.capacity import role_capacity
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.cli import main
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.loading import dump_spec_yaml
from hyperpod_dpd.traces import Lengths, generate, write_mooncake

Bench = Callable[..., dict[str, Any]]
TRAFFIC = Traffic(isl=4096, osl=256, concurrency=(8, 16, 32))
TRUE = PhaseFactors(prefill=1.4, decode=1.2, overhead_s=0.0)


@pytest.fixture(scope="module")
def measured() -> Advice:
    """What an endpoint 40 % slower to prefill and 20 % slower per step than the kernels would measure."""
    return advise(default_spec(), TRAFFIC, baseline_nodes=1, factors=TRUE)


def test_calibration_recovers_the_factors_and_reports_the_uncalibrated_error(measured: Advice, bench_of: Bench) -> None:
    fit = calibrate(default_spec(), TRAFFIC, parse_bench(bench_of(measured), where="bench.json"),
                    source="bench.json")
    assert fit.factors.decode == pytest.approx(TRUE.decode, rel=0.02)
    assert fit.factors.prefill == pytest.approx(TRUE.prefill, rel=0.06)
    assert fit.factors.overhead_s == pytest.approx(0.0, abs=0.01)
    assert fit.error_before["TPOT"] > 0.08 and fit.error_before["TTFT"] > 0.15
    assert all(error < 0.05 for error in fit.error_after.values())
    assert "uncalibrated model off by TTFT" in fit.render()


def test_a_calibrated_range_holds_the_fits_residual_on_each_side(measured: Advice, bench_of: Bench) -> None:
    """The ranges were the service-time variability alone; a calibration's residual error is added to them."""
    fit = calibrate(default_spec(), TRAFFIC, parse_bench(bench_of(measured), where="b.json"), source="b.json")
    ttft, tpot = fit.factors.ttft_residual, fit.factors.tpot_residual
    assert (ttft, tpot) == (fit.error_after["TTFT"], fit.error_after["TPOT"]) and ttft > 0 and tpot > 0
    banded = advise(default_spec(), TRAFFIC, baseline_nodes=1, factors=fit.factors)
    bare = advise(default_spec(), TRAFFIC, baseline_nodes=1,
                  factors=replace(fit.factors, ttft_residual=0.0, tpot_residual=0.0))
    for wide, narrow in zip(banded.points, bare.points, strict=True):
        w, n = wide.disaggregated, narrow.disaggregated
        assert w.ttft_band_s is not None and n.ttft_band_s is not None
        assert w.tpot_band_s is not None and n.tpot_band_s is not None
        assert w.ttft_band_s == pytest.approx((n.ttft_band_s[0] * (1 - ttft), n.ttft_band_s[1] * (1 + ttft)))
        assert w.tpot_band_s == pytest.approx((n.tpot_band_s[0] * (1 - tpot), n.tpot_band_s[1] * (1 + tpot)))
        assert w.ttft_s == n.ttft_s  # the point figure is the model's, unchanged


@pytest.mark.parametrize(("change", "field"), [
    ({"endpoint": "other-endpoint"}, "calibrate.endpoint"),
    ({"model": "Qwen2.5-72B-Instruct"}, "calibrate.model"),
    ({"instance_type": "ml.p5en.48xlarge"}, "calibrate.instance_type"),
    ({"architecture": "qwen2.5-72b"}, "calibrate.architecture"),
])
def test_data_from_another_endpoint_model_or_instance_is_refused(measured: Advice, bench_of: Bench,
                                                                 change: dict[str, str], field: str) -> None:
    document = bench_of(measured)
    document["runs"]["dpd"].update(change)
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    assert field in [p.field for p in caught.value.problems]


def test_a_file_naming_this_model_and_instance_type_is_checked_without_a_warning(measured: Advice,
                                                                                 bench_of: Bench) -> None:
    bench = parse_bench(bench_of(measured), where="b.json")
    assert (bench.model, bench.architecture, bench.instance_type) == ("Llama-3.3-70B-Instruct", "llama-3.3-70b",
                                                                      "ml.p5.48xlarge")
    assert calibrate(default_spec(), TRAFFIC, bench, source="b.json").warnings == ()


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_a_file_from_an_older_bench_is_used_with_a_warning(tmp_path: Path, measured: Advice, bench_of: Bench,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bench = parse_bench(bench_of(measured, identity=None), where="old.json")
    assert bench.unchecked() == ["model", "architecture", "instance_type", "layout"]
    fit = calibrate(default_spec(), TRAFFIC, bench, source="old.json")
    assert fit.warnings == ("old.json does not name the model, architecture, instance_type, layout it measured: "
                            "calibration could not check it is the spec's Llama-3.3-70B-Instruct on ml.p5.48xlarge "
                            "at TP 8, 1P+1D with the spec's engine flags",)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(bench_of(measured, identity=None)))
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32", "--baseline-nodes", "1",
                 "--calibrate", str(path), "--json"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {path} does not name the model, architecture, instance_type, layout it "
                          "measured")


def test_cli_refuses_a_file_of_another_instance_type_with_exit_2(tmp_path: Path, measured: Advice, bench_of: Bench,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    document = bench_of(measured)
    document["runs"]["dpd"]["instance_type"] = "ml.p5en.48xlarge"
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(document))
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32", "--calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "calibrate.instance_type" in err and "ml.p5en.48xlarge" in err and "Traceback" not in err


def test_a_run_bench_marked_untrusted_is_refused_with_its_reasons(measured: Advice, bench_of: Bench) -> None:
    document = bench_of(measured)
    document["runs"]["dpd"].update(trusted=False, warnings=[{"code": "NotDisaggregated", "concurrency": 8,
                                                             "message": "prefill served 0 requests"}])
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    refused = {p.field: p for p in caught.value.problems}
    assert "prefill served 0 requests" in refused["calibrate.trusted"].message


def test_a_run_bench_reported_as_failed_is_refused(measured: Advice, bench_of: Bench) -> None:
    document = bench_of(measured)
    document["runs"]["dpd"]["problem"] = "Job hyperpod-dpd-bench failed: BackoffLimitExceeded"
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    assert [p.field for p in caught.value.problems] == ["calibrate.problem"]


@pytest.mark.parametrize(("key", "value"), [("tensor_parallel_size", 4), ("prefill_replicas", 2),
                                            ("args", ["--quantization", "fp8"])])
def test_a_run_of_another_layout_under_the_same_endpoint_name_is_refused(measured: Advice, bench_of: Bench,
                                                                         key: str, value: object) -> None:
    document = bench_of(measured)
    document["runs"]["dpd"]["layout"] = {**document["runs"]["dpd"]["layout"], key: value}
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    problem = caught.value.problems[0]
    assert problem.field == f"calibrate.layout.{key}" and "another layout or engine setting" in problem.message


def _refused(spec: Any, document: dict[str, Any]) -> set[str]:
    with pytest.raises(SpecError) as caught:
        calibrate(spec, TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    return {p.field for p in caught.value.problems}


def test_bench_names_each_runs_layout_and_a_spec_of_another_is_refused_by_name(measured: Advice,
                                                                               bench_of: Bench) -> None:
    """bench's own writer records the layout (before: nothing did, so the check never ran on a real file)."""
    document = bench_of(measured, aggregated=measured)
    spec = default_spec()
    assert document["runs"]["dpd"]["layout"]["decode_replicas"] == spec.decode.replicas
    assert document["runs"]["aggregated"]["layout"] == {"tensor_parallel_size": 8, "replicas": 1,
                                                        "args": list(spec.args)}
    # more decoders change the DPD endpoint only; the twin (one replica, the shared flags) is the same
    assert _refused(replace(spec, decode=replace(spec.decode, replicas=2)), document) == {
        "calibrate.layout.decode_replicas"}
    # a shared flag changes both
    assert _refused(replace(spec, args=(*spec.args, "--enforce-eager")), document) == {
        "calibrate.layout.args", "calibrate.aggregated.layout.args"}
    # the twin is compared with the twin's identity: a twin of two replicas is another layout
    document["runs"]["aggregated"]["layout"]["replicas"] = 2
    assert _refused(spec, document) == {"calibrate.aggregated.layout.replicas"}


def test_a_level_with_no_throughput_is_refused_not_a_traceback(tmp_path: Path, measured: Advice, bench_of: Bench,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    document = bench_of(measured)
    document["runs"]["dpd"]["levels"][1]["output_tokens_per_s"] = 0
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(document))
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32", "--calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "calibrate.levels[concurrency 16]" in err and "output_tokens_per_s 0" in err and "Traceback" not in err


def test_another_request_shape_is_refused(measured: Advice, bench_of: Bench) -> None:
    bench = parse_bench(bench_of(measured), where="b.json")
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), Traffic(isl=2048, osl=256, concurrency=(8,)), bench, source="b.json")
    assert "calibrate.scenario" in [p.field for p in caught.value.problems]


def _scale(document: dict[str, Any], key: str, by: float, run: str = "dpd") -> None:
    for level in document["runs"][run]["levels"]:
        level[key] *= by


def _closed_loop(document: dict[str, Any], run: str = "dpd") -> None:
    """Throughput from the closed loop's own identity, C / (TTFT + (osl - 1) x TPOT), after a change of latencies."""
    osl = document["runs"][run]["scenario"]["osl"]
    for level in document["runs"][run]["levels"]:
        cycle = level["client_ttft_mean_s"] + (osl - 1) * level["client_tpot_mean_s"]
        level["output_tokens_per_s"] = level["concurrency"] * osl / cycle


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_a_fit_faster_than_physics_is_refused(measured: Advice, bench_of: Bench) -> None:
    """A TPOT ten times below the kernels' would put Llama 70B's decode step under its HBM floor (5.6 ms)."""
    document = bench_of(measured)
    _scale(document, "client_tpot_mean_s", 0.1)
    _closed_loop(document)
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    problem = caught.value.problems[0]
    assert problem.field == "calibrate" and problem.value.startswith("decode step x0.1")
    assert "faster than physics allows (at least x0.5" in problem.message


def test_a_fit_far_above_the_kernels_is_refused(measured: Advice, bench_of: Bench) -> None:
    document = bench_of(measured)
    _scale(document, "client_tpot_mean_s", 6)
    _closed_loop(document)
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    assert "is above x4" in caught.value.problems[0].message


def test_a_ttft_prefill_cannot_explain_is_a_boundary_fit_and_refused(measured: Advice, bench_of: Bench) -> None:
    """The audit's 10x TTFT: the old fit took the grid's top (x3.97) and dumped the rest into +1.7 s overhead."""
    document = bench_of(measured)
    _scale(document, "client_ttft_mean_s", 10)
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    problem = caught.value.problems[0]
    assert problem.value == "prefill x4" and "is at the end of the DPD prefill's range (x0.434-x4)" in problem.message


def test_an_overhead_beyond_a_closed_loop_is_refused(measured: Advice, bench_of: Bench) -> None:
    """Half the throughput at the same latencies: half of each client's cycle is outside any request."""
    document = bench_of(measured)
    _scale(document, "output_tokens_per_s", 0.5)
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    problem = caught.value.problems[0]
    assert problem.field == "calibrate" and "outside TTFT and decoding, above 10%" in problem.message


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_the_fit_reads_means_not_medians(measured: Advice, bench_of: Bench) -> None:
    """A right-skewed TTFT (p50 at 70 % of the mean) leaves a mean-based fit unmoved (the audit's W2)."""
    document = bench_of(measured)
    for level in document["runs"]["dpd"]["levels"]:
        level["ttft_s"]["p50"] *= 0.7
    bench = parse_bench(document, where="b.json")
    assert bench.statistic == "mean"
    fit = calibrate(default_spec(), TRAFFIC, bench, source="b.json")
    assert fit.factors.prefill == pytest.approx(TRUE.prefill, rel=0.06)
    assert fit.warnings == ()


def test_a_file_without_means_falls_back_to_p50_with_a_warning(measured: Advice, bench_of: Bench) -> None:
    bench = parse_bench(bench_of(measured, means=False), where="old.json")
    assert bench.statistic == "p50"
    fit = calibrate(default_spec(), TRAFFIC, bench, source="old.json")
    assert fit.warnings == ("old.json: the DPD run has no client means (client_ttft_mean_s, client_tpot_mean_s; a "
                            "bench older than them): the fit used p50 figures, which Little's law does not hold for, "
                            "so a skewed TTFT shows as overhead",)


def test_failed_levels_are_not_used(measured: Advice, bench_of: Bench) -> None:
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(bench_of(measured, failed=3), where="b.json"),
                  source="b.json")
    assert "calibrate.levels" in [p.field for p in caught.value.problems]


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_cli_round_trip(tmp_path: Path, measured: Advice, bench_of: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench_of(measured)))
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32", "--baseline-nodes", "1",
                 "--calibrate", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["assumptions"]["factors"].startswith("DPD prefill x1.")
    assert f"calibrated on {path}; aggregated prefill x1.1, decode step x1.08" in data["assumptions"]["factors"]
    assert re.search(r"calibrated on concurrency 8, 16, 32: prefill x1\.(3|4)\d*, decode step x1\.(19|2)", captured.err)
    for point, truth in zip(data["points"], measured.points, strict=True):
        assert point["disaggregated"]["tpot_s"] == pytest.approx(truth.disaggregated.tpot_s, rel=0.03)


def test_cli_refuses_a_file_that_is_not_bench_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bench.json"
    path.write_text('{"levels": []}')
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8", "--calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "has no runs.dpd" in err and "Traceback" not in err


AGG_TRUE = PhaseFactors(prefill=1.0, decode=1.3, overhead_s=0.0)


@pytest.fixture(scope="module")
def measured_both() -> Advice:
    """An endpoint whose DPD side is TRUE and whose aggregated twin prefills at the kernels' speed but decodes 30 %
    slower: one set of factors cannot describe both."""
    return advise(default_spec(), TRAFFIC, baseline_nodes=1, factors=replace(TRUE, aggregated=AGG_TRUE))


def test_each_layout_is_fitted_on_its_own_run(measured_both: Advice, bench_of: Bench) -> None:
    document = bench_of(measured_both, aggregated=measured_both)
    fit = calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    assert fit.warnings == ()  # both runs name their layout, and each matches its own
    baseline = fit.factors.for_aggregated()
    assert (fit.factors.prefill, fit.factors.decode) == (pytest.approx(TRUE.prefill, rel=0.06),
                                                         pytest.approx(TRUE.decode, rel=0.02))
    # An aggregated engine's TPOT holds its prefill chunks, so its two factors trade against each other: measured
    # x0.99 and x1.273 against the true x1.0 and x1.3 (2.1 %); the predicted TPOT below is what must hold.
    assert (baseline.prefill, baseline.decode) == (pytest.approx(AGG_TRUE.prefill, rel=0.06),
                                                   pytest.approx(AGG_TRUE.decode, rel=0.03))
    assert fit.baseline_error_after is not None and all(e < 0.05 for e in fit.baseline_error_after.values())
    assert "aggregated baseline, on its own run: prefill x0.9" in fit.render()
    calibrated = advise(default_spec(), TRAFFIC, baseline_nodes=1, factors=fit.factors)
    for point, truth in zip(calibrated.points, measured_both.points, strict=True):
        assert point.aggregated.tpot_s == pytest.approx(truth.aggregated.tpot_s, rel=0.03)


def test_without_an_aggregated_run_the_baseline_keeps_the_uncalibrated_factors(measured: Advice,
                                                                               bench_of: Bench) -> None:
    """The old fit applied the DPD run's factors, router hop included, to the baseline too (the audit's W1)."""
    fit = calibrate(default_spec(), TRAFFIC, parse_bench(bench_of(measured), where="b.json"), source="b.json")
    baseline = fit.factors.for_aggregated()
    assert (baseline.prefill, baseline.decode, baseline.overhead_s) == (PhaseFactors().prefill,
                                                                        PhaseFactors().decode, 0.0)
    assert "has no runs.aggregated" in fit.render() and fit.baseline_error_after is None


@pytest.mark.parametrize(("change", "field"), [
    ({"endpoint": "dpd-test"}, "calibrate.aggregated.endpoint"),
    ({"trusted": False}, "calibrate.aggregated.trusted"),
    ({"instance_type": "ml.p5en.48xlarge"}, "calibrate.aggregated.instance_type"),
    ({"problem": "Job failed"}, "calibrate.aggregated.problem"),
])
def test_a_bad_aggregated_run_is_refused_by_name(measured_both: Advice, bench_of: Bench, change: dict[str, Any],
                                                 field: str) -> None:
    document = bench_of(measured_both, aggregated=measured_both)
    document["runs"]["aggregated"].update(change)
    with pytest.raises(SpecError) as caught:
        calibrate(default_spec(), TRAFFIC, parse_bench(document, where="b.json"), source="b.json")
    assert [p.field for p in caught.value.problems] == [field]


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_advise_trace_sizes_on_the_factors_fitted_to_a_bench_run(tmp_path: Path, measured: Advice, bench_of: Bench,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # The bench run is of an endpoint 20 % slower per decode step: with --calibrate the decode capacity at the SLO
    # (the batch law on the fitted step time) is the calibrated one, and the trace is sized on it. Prefill's
    # capacity is pinned, so only decode's is computed (the bisection for prefill is the slow part).
    spec = with_slo_options(slo_autoscaled(), "prefill", capacity_tokens_per_s=11_609.0)
    spec_file, trace_file, bench_file = tmp_path / "spec.yaml", tmp_path / "t.jsonl", tmp_path / "bench.json"
    spec_file.write_text(dump_spec_yaml(spec))
    write_mooncake(generate("poisson", rate_per_s=1.0, duration_s=600, seed=2, input_tokens=Lengths(mean=4096),
                            output_tokens=Lengths(mean=256)), trace_file)
    bench_file.write_text(json.dumps(bench_of(measured)))
    assert main(["advise", str(spec_file), "--trace", str(trace_file), "--calibrate", str(bench_file),
                 "--json"]) in (0, 1)
    out, err = capsys.readouterr()
    fit = calibrate_at_its_traffic(spec, parse_bench(bench_of(measured), where="bench.json"), source="bench.json")
    calibrated = role_capacity(spec, "decode", factors=fit.factors).tokens_per_s
    uncalibrated = role_capacity(spec, "decode").tokens_per_s
    assert "calibrated on concurrency 8, 16, 32" in err
    assert json.loads(out)["roles"]["decode"]["target_tokens_per_s"] == math.floor(calibrated * 0.9)
    # the batch is held by max_num_seqs in both, so the capacity scales as the step time: 1.08 / the fitted decode
    assert calibrated / uncalibrated == pytest.approx(1.08 / fit.factors.decode, rel=1e-6)
    assert fit.factors.decode == pytest.approx(TRUE.decode, rel=0.02)

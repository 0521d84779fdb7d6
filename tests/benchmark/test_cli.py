"""``hyperpod-dpd bench``: render, report a results folder, run on a (recorded) cluster, compare, bad input."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from support import FakeClock

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.job import JobOptions, render_benchmark_job
from hyperpod_dpd.cli import bench, main
from hyperpod_dpd.defaults import default_spec

RUN = "20261201-0300"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["bench", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_render_writes_the_manifests_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run_cli(capsys, "--render", str(tmp_path), "--run-id", RUN, "--aggregated")
    assert code == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [f"default-bench-dpd-test-{RUN}.k8s.yaml", f"default-bench-dpd-test-agg-{RUN}.k8s.yaml"]
    assert out.split() == [str(tmp_path / name) for name in written]
    expected = render_benchmark_job(BenchmarkTarget.for_spec(default_spec()), Scenario(), JobOptions(run_id=RUN))
    assert list(yaml.safe_load_all((tmp_path / written[0]).read_text())) == expected
    twin_job = list(yaml.safe_load_all((tmp_path / written[1]).read_text()))[1]
    assert "http://dpd-test-agg-default-routing-service." in " ".join(
        twin_job["spec"]["template"]["spec"]["initContainers"][1]["args"])


def test_a_results_folder_is_reported_as_a_table(capsys: pytest.CaptureFixture[str], healthy_run: Any) -> None:
    code, out, _ = run_cli(capsys, "--results-dir", str(healthy_run.folder))
    assert code == 0
    assert "D(64,16) (64 in / 16 out)" in out and "cannot be trusted" not in out
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [row[0] for row in rows] == ["2", "4"] and all(row[-2:] == ["0", "0.0%"] for row in rows)


def test_json_and_trust_warnings_set_the_exit_status(capsys: pytest.CaptureFixture[str], erroring_run: Any) -> None:
    code, out, _ = run_cli(capsys, "--results-dir", str(erroring_run.folder), "--json")
    assert code == 1
    document = json.loads(out)["runs"]["dpd"]
    assert document["trusted"] is False and {w["code"] for w in document["warnings"]} == {"failed-requests"}
    for level in document["levels"]:
        assert level["error_rate"] == pytest.approx(level["failed"] / level["requests"]) and level["failed"] > 0


def test_ab_reports_the_change_from_aggregated(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                               short_run: Any) -> None:
    code, out, _ = run_cli(capsys, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                           str(short_run.folder), "--json")
    assert code == 1  # the twin's answers were shorter than --osl
    document = json.loads(out)
    dpd, agg = document["runs"]["dpd"]["levels"], document["runs"]["aggregated"]["levels"]
    for row, mine, theirs in zip(document["ab"], dpd, agg, strict=True):
        expected = (mine["output_tokens_per_s"] - theirs["output_tokens_per_s"]) / theirs["output_tokens_per_s"] * 100
        assert row["change_percent"]["output_tokens_per_s"] == pytest.approx(expected)
        assert row["tpot_p50_s"] == {"dpd": mine["tpot_s"]["p50"], "aggregated": theirs["tpot_s"]["p50"]}
    _, text, _ = run_cli(capsys, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                         str(short_run.folder))
    ab = text[text.index("DPD against the aggregated twin"):].splitlines()
    assert ab[1].split()[:3] == ["CONC", "TPOT", "p50"] and [line.split()[0] for line in ab[2:4]] == ["2", "4"]
    assert "aggregated: dpd-test-agg" in text


@dataclass(frozen=True)
class FakeEstimate:
    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tokens_per_s: float
    gpus: int


@dataclass(frozen=True)
class FakePoint:
    concurrency: int
    aggregated: FakeEstimate
    disaggregated: FakeEstimate


@dataclass(frozen=True)
class FakeAdvice:
    points: tuple[FakePoint, ...]
    assumptions: dict[str, str]


def test_compare_prints_measured_beside_predicted(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    estimate = FakeEstimate(ttft_s=0.02, tpot_s=0.005, e2e_s=0.1, output_tokens_per_s=100.0, gpus=16)

    def predictor(spec: Any, scenario: Scenario) -> FakeAdvice:
        asked.append(scenario)
        return FakeAdvice(points=tuple(FakePoint(c, estimate, estimate) for c in scenario.concurrency),
                          assumptions={"system": "h100_sxm"})

    monkeypatch.setattr(bench, "predictor", predictor)
    code, out, _ = run_cli(capsys, "--results-dir", str(healthy_run.folder), "--compare", "--json")
    assert code == 0 and asked[0].isl == 64 and asked[0].osl == 16 and asked[0].concurrency == (2, 4)
    comparison = json.loads(out)["comparison"]
    assert comparison["assumptions"] == {"system": "h100_sxm"}
    tpot = [r for r in comparison["rows"] if r["metric"] == "TPOT p50"]
    assert [r["concurrency"] for r in tpot] == [2, 4]
    for row in tpot:
        assert row["difference_percent"] == pytest.approx((row["measured"] - 0.005) / 0.005 * 100)
    code, text, _ = run_cli(capsys, "--results-dir", str(healthy_run.folder), "--compare")
    assert "measured against predicted" in text and "2 disaggregated" in text and "system: h100_sxm" in text


def test_compare_without_the_advisor_names_the_extra(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hyperpod_dpd.advisor", None)  # as if not installed
    code, _, err = run_cli(capsys, "--results-dir", str(healthy_run.folder), "--compare")
    assert code == 2 and "pip install 'hyperpod-dpd[advisor]'" in err and "Traceback" not in err


def test_a_run_on_the_cluster(capsys: pytest.CaptureFixture[str], fakes: ModuleType, healthy_run: Any,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"bench-dpd-test-{RUN}"
    log = "".join(f"### hyperpod-dpd-bench file={n}\n{text}\n### hyperpod-dpd-bench end\n"
                  for n, text in healthy_run.files().items()) + "### hyperpod-dpd-bench exit=0\n"
    batch = fakes.FakeBatch(states=[fakes.job(name), fakes.job(name, condition="Complete")])
    core = fakes.FakeCore(pods=[[fakes.pod(f"{name}-x", init=[fakes.container("benchmark", "running")], main=[])],
                                [fakes.pod(f"{name}-x", init=[], main=[fakes.container("publish", "terminated")])]],
                          logs={"publish": log})
    clock = FakeClock()
    monkeypatch.setattr(bench, "benchmark_kube", lambda context, config: fakes.benchmark_kube(batch, core))
    monkeypatch.setattr(bench, "clock", clock)
    monkeypatch.setattr(bench, "sleep", clock.sleep)
    code, out, err = run_cli(capsys, "--run-id", RUN, "--concurrency", "2,4", "--isl", "64", "--osl", "16",
                             "--requests", "8", "--max-seconds", "60")
    assert code == 0, out + err
    assert f"job {name}" in err and "genai-bench running" in err
    assert batch.deleted == [("default", name, "Background")] and clock.slept == [15]
    assert [line.split()[0] for line in out.splitlines() if line[:1].isdigit()] == ["2", "4"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--concurrency", "8,x"], "concurrency: is not a whole number (got 'x')"),
    (["--max-seconds", "90"], "max_seconds: must be a whole number of minutes"),
    (["--requests", "4"], "requests: is fewer than the highest concurrency 32"),
    (["--aggregated-results-dir", "x"], "--aggregated-results-dir needs --results-dir"),
    (["--results-dir", "/nonexistent-folder"], "not a folder"),
    (["--run-id", "Bad_Id", "--render", "out"], "run_id: makes the Job name"),
    (["--tokenizer-s3", "bucket/prefix", "--render", "out"], "--tokenizer-s3: is not an S3 URI"),
])
def test_bad_input_is_exit_2_with_the_fix(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_an_unusable_kubeconfig_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "--kubeconfig", str(tmp_path / "missing"), "--run-id", RUN)
    assert code == 2 and "kubeconfig" in err and "Traceback" not in err


def test_compare_with_the_real_advisor(capsys: pytest.CaptureFixture[str], healthy_run: Any) -> None:
    import importlib.util

    if importlib.util.find_spec("aiconfigurator") is None:
        pytest.skip("the advisor extra is not installed: pip install '.[advisor]'")
    code, out, err = run_cli(capsys, "--results-dir", str(healthy_run.folder), "--compare", "--json")
    assert code == 0, err
    rows = json.loads(out)["comparison"]["rows"]
    assert {(r["concurrency"], r["metric"]) for r in rows} == {
        (c, m) for c in (2, 4) for m in ("TTFT p50", "TPOT p50", "E2E p50", "output tok/s")}
    assert all(r["predicted"] > 0 and r["layout"] == "disaggregated" for r in rows)


def test_a_failed_job_is_exit_1_with_the_reason(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"bench-dpd-test-{RUN}"
    failed = fakes.pod(f"{name}-x", phase="Failed", init=[
        fakes.container("fetch-tokenizer", "terminated", exit_code=1, reason="Error")], main=[])
    batch = fakes.FakeBatch(states=[fakes.job(name, condition="Failed", reason="BackoffLimitExceeded")])
    core = fakes.FakeCore(pods=[[failed]], logs={"fetch-tokenizer": "An error occurred (AccessDenied)"})
    monkeypatch.setattr(bench, "benchmark_kube", lambda context, config: fakes.benchmark_kube(batch, core))
    code, out, _ = run_cli(capsys, "--run-id", RUN, "--json")
    assert code == 1
    run = json.loads(out)["runs"]["dpd"]
    assert run["levels"] == [] and run["not_run"] == [8, 16, 32] and run["trusted"] is False
    assert "BackoffLimitExceeded" in run["problem"] and "AccessDenied" in run["problem"]
    assert batch.deleted == [("default", name, "Background")]

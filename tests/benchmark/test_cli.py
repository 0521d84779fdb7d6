"""``hyperpod-dpd bench``: render, report a results folder, run on a (recorded) cluster, compare, bad input."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from types import ModuleType
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from support import FakeAdvice, FakeClock, FakeEstimate, FakePoint, run_bench, write_spec

from hyperpod_dpd.benchmark import BenchmarkTarget, S3Location, Scenario
from hyperpod_dpd.benchmark.proof.proof import PROOF_FILE, folder_proof
from hyperpod_dpd.benchmark.report.figures import LATENCY_PNG, STAGES_PNG, THROUGHPUT_PNG
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.cluster import parse_job_log
from hyperpod_dpd.benchmark.run.job import UPLOAD_MANIFEST, JobOptions, render_benchmark_job
from hyperpod_dpd.benchmark.run.levels import ResultsError
from hyperpod_dpd.benchmark.run.results import collect
from hyperpod_dpd.benchmark.run.route import largest_direct_isl
from hyperpod_dpd.charts.aggregated import aggregated_spec, layout_identity
from hyperpod_dpd.cli import main
from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.report_page import HTML_FILE, read_embedded
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.loading import load_spec

RUN = "20261201-0300"


run_cli = run_bench


def test_render_writes_the_manifests_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run_cli(capsys, "--render", str(tmp_path), "--run-id", RUN, "--aggregated")
    assert code == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [f"default-bench-dpd-test-{RUN}.k8s.yaml", f"default-bench-dpd-test-agg-{RUN}.k8s.yaml"]
    assert out.split() == [str(tmp_path / name) for name in written]
    # by default the results also go to the model bucket's benchmarks/ prefix, which the stack's role may write
    upload = S3Location(bucket="dpd-models-example", prefix="benchmarks", region="us-west-2")
    expected = render_benchmark_job(BenchmarkTarget.for_spec(default_spec()), Scenario(),
                                    JobOptions(run_id=RUN, results=upload))
    assert list(yaml.safe_load_all((tmp_path / written[0]).read_text())) == expected
    publish = expected[1]["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert 'aws s3 cp "$dir/" "s3://dpd-models-example/benchmarks/dpd-test/$RUN_ID/"' in publish
    twin_job = list(yaml.safe_load_all((tmp_path / written[1]).read_text()))[1]
    assert "http://dpd-test-agg-default-routing-service." in " ".join(
        twin_job["spec"]["template"]["spec"]["initContainers"][1]["args"])


def test_no_upload_keeps_the_results_in_the_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, _ = run_cli(capsys, "--render", str(tmp_path), "--run-id", RUN, "--no-upload")
    assert code == 0
    (job,) = [d for d in yaml.safe_load_all(next(tmp_path.iterdir()).read_text()) if d["kind"] == "Job"]
    assert "aws s3 cp" not in job["spec"]["template"]["spec"]["containers"][0]["command"][2]


def test_a_results_folder_is_reported_as_a_table(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                stub_spec: str) -> None:
    code, out, _ = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder))
    # the folder carries no counters: every level is unverified, and the run exits 1 (before: 0, trusted)
    assert code == 1
    assert "D(64,16) (64 in / 16 out)" in out
    assert "not checked: a results folder holds no router or decoder counters" in out
    assert "[unchecked] concurrency 2: not checked against the servers" in out
    _, text, _ = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--json")
    assert json.loads(text)["runs"]["dpd"]["unchecked"].startswith("not checked: a results folder")
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [row[0] for row in rows] == ["2", "4"] and all(row[-2:] == ["0", "0.0%"] for row in rows)


def test_json_and_trust_warnings_set_the_exit_status(capsys: pytest.CaptureFixture[str], erroring_run: Any,
                                                     stub_spec: str) -> None:
    code, out, _ = run_cli(capsys, stub_spec, "--results-dir", str(erroring_run.folder), "--json")
    assert code == 1
    document = json.loads(out)["runs"]["dpd"]
    # the failures, and every level unverified: the folder holds no counters
    assert document["trusted"] is False and {w["code"] for w in document["warnings"]} == {"failed-requests",
                                                                                         "unchecked"}
    # what was measured, for advise --calibrate to check
    assert {k: document[k] for k in ("model", "architecture", "instance_type")} == {
        "model": "Llama-3.3-70B-Instruct", "architecture": "llama-3.3-70b", "instance_type": "ml.p5.48xlarge"}
    for level in document["levels"]:
        assert level["error_rate"] == pytest.approx(level["failed"] / level["requests"]) and level["failed"] > 0


def test_ab_reports_the_change_from_aggregated(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                               short_run: Any, stub_spec: str) -> None:
    code, out, _ = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                           str(short_run.folder), "--json")
    assert code == 1  # the twin's answers were shorter than --osl
    document = json.loads(out)
    dpd, agg = document["runs"]["dpd"]["levels"], document["runs"]["aggregated"]["levels"]
    assert document["runs"]["aggregated"]["instance_type"] == document["runs"]["dpd"]["instance_type"]
    # each run names the layout it measured, for advise --calibrate: the DPD endpoint's, and the twin's one replica
    spec = load_spec(Path(stub_spec))
    assert document["runs"]["dpd"]["layout"] == layout_identity(spec)
    assert document["runs"]["aggregated"]["layout"] == {"tensor_parallel_size": spec.tensor_parallel_size,
                                                        "replicas": 1, "args": list(spec.args)}
    for row, mine, theirs in zip(document["ab"], dpd, agg, strict=True):
        expected = (mine["output_tokens_per_s"] - theirs["output_tokens_per_s"]) / theirs["output_tokens_per_s"] * 100
        assert row["change_percent"]["output_tokens_per_s"] == pytest.approx(expected)
        assert row["tpot_p50_s"] == {"dpd": mine["tpot_s"]["p50"], "aggregated": theirs["tpot_s"]["p50"]}
    _, text, _ = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                         str(short_run.folder))
    ab = text[text.index("DPD against the aggregated twin"):].splitlines()
    assert ab[1].split()[:5] == ["CONC", "METRIC", "DPD", "AGG", "DPD-AGG"]
    assert [line.split()[0] for line in ab[2:16]] == ["2"] * 7 + ["4"] * 7
    buyer = document["ab_buyer"]
    assert [layout["gpus"] for layout in buyer["layouts"]] == [16, 8]
    for row, level in zip(document["ab"], buyer["levels"], strict=True):  # each change beside its interval
        tpot = {m["metric"]: m for m in level["metrics"]}["tpot_p50_s"]
        assert row["change_interval_percent"]["tpot_p50"] == {"verdict": tpot["verdict"], "interval": None}
        for change in ("tpot_p50", "ttft_p50", "e2e_p50", "output_tokens_per_s"):  # one run a side: no claim
            assert row["change_interval_percent"][change] == {
                "verdict": "no interval (one run; --repeat 2 or more)", "interval": None}
    for level in buyer["levels"]:
        metrics = {m["metric"]: m for m in level["metrics"]}
        # one run a side: no interval and no verdict on any metric (its requests' scatter is not a second run's)
        assert all(m["interval"] is None and m["verdict"] == "no interval (one run; --repeat 2 or more)"
                   for m in metrics.values())
    assert "aggregated: dpd-test-agg" in text




def test_compare_prints_measured_beside_predicted(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                  stub_spec: str) -> None:
    asked: list[Any] = []
    estimate = FakeEstimate(ttft_s=0.02, tpot_s=0.005, e2e_s=0.1, output_tokens_per_s=100.0, gpus=16)

    def predictor(spec: Any, scenario: Scenario) -> FakeAdvice:
        asked.append(scenario)
        return FakeAdvice(points=tuple(FakePoint(c, estimate, estimate) for c in scenario.concurrency),
                          assumptions={"system": "h100_sxm"})

    seams = Seams(predictor=predictor)
    code, out, _ = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--compare", "--json",
                           seams=seams)
    # exit 1: the folder holds no counters, so its levels are unchecked
    assert code == 1 and asked[0].isl == 64 and asked[0].osl == 16 and asked[0].concurrency == (2, 4)
    comparison = json.loads(out)["comparison"]
    assert comparison["assumptions"] == {"system": "h100_sxm"}
    tpot = [r for r in comparison["rows"] if r["metric"] == "TPOT p50"]
    assert [r["concurrency"] for r in tpot] == [2, 4]
    for row in tpot:
        assert row["difference_percent"] == pytest.approx((row["measured"] - 0.005) / 0.005 * 100)
    code, text, _ = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--compare", seams=seams)
    assert "measured against predicted" in text and "2 disaggregated" in text and "system: h100_sxm" in text


def test_compare_without_the_advisor_names_the_extra(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                     monkeypatch: pytest.MonkeyPatch, stub_spec: str) -> None:
    monkeypatch.setitem(sys.modules, "hyperpod_dpd.advisor", None)  # as if not installed
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--compare")
    assert code == 2 and "pip install '.[advisor]' in the hyperpod-dpd checkout" in err and "Traceback" not in err


def _cluster(fakes: ModuleType, run: Any, *, present: tuple[str, ...] = ("dpd-test", "dpd-test-agg"),
             printed: Mapping[str, str] | None = None, exit_code: int = 0) -> Any:
    """The recorded cluster of ``fakes.recorded_cluster`` running this file's Job."""
    return fakes.recorded_cluster(run, name=f"bench-dpd-test-{RUN}", present=present, printed=printed,
                                  exit_code=exit_code)


BUCKET = "dpd-models-example"  # the default spec's model bucket: results go under its benchmarks/
UPLOADED = f"benchmarks/dpd-test/{RUN}/"


@dataclass
class S3Seam:
    """bench's AWS seam: hands out ``client`` for S3 and records the regions asked for; without a client,
    any use of S3 fails the test."""

    client: Any = None
    asked: list[str | None] = field(default_factory=list)
    profiles: list[str | None] = field(default_factory=list)

    def __call__(self, region: str | None, profile: str | None) -> AwsClients:
        self.asked.append(region)
        self.profiles.append(profile)
        if self.client is None:
            raise AssertionError(f"bench read S3 ({region}) where it should not")
        return AwsClients(region=region or "us-west-2", factory=lambda service, region_name: self.client)


def _upload(s3: Any, files: Mapping[str, str | bytes], key_prefix: str = UPLOADED) -> S3Seam:
    """What the publish container uploads by default, in moto's S3: ``files`` under the run's folder."""
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for name, body in files.items():
        s3.put_object(Bucket=BUCKET, Key=key_prefix + name, Body=body.encode() if isinstance(body, str) else body)
    s3.put_object(Bucket=BUCKET, Key=key_prefix + UPLOAD_MANIFEST, Body="\n".join(files).encode())
    return S3Seam(s3)


def _on_cluster(kube: Any, aws: S3Seam | None = None, *, clock: FakeClock | None = None) -> Seams:
    """bench's seams for a recorded cluster: ``kube``, ``aws`` (default: no S3) and a clock that only sleeps."""
    clock = clock or FakeClock()
    return Seams(benchmark_kube=lambda context, config: kube, aws_clients=aws or S3Seam(), clock=clock,
                 sleep=clock.sleep)


STUB_TRAFFIC = ("--run-id", RUN, "--concurrency", "2,4", "--isl", "64", "--osl", "16", "--requests", "8",
                "--max-seconds", "60", "--client", "genai-bench")


def test_a_run_on_the_cluster_proves_disaggregation(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                    healthy_run: Any,
                                                    stub_spec: str, *, s3: Any) -> None:
    """Every level 100% disaggregated with KV received. The client's overhead is measured, not controlled
    here: on a loaded machine it may pass its bound, which is then the only warning (and exit 1)."""
    kube = _cluster(fakes, healthy_run)
    aws = _upload(s3, healthy_run.files())
    clock = FakeClock()
    seams = _on_cluster(kube, aws, clock=clock)
    code, out, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, seams=seams)
    assert f"job bench-dpd-test-{RUN}" in err and kube.batch.deleted == [("default", f"bench-dpd-test-{RUN}",
                                                                           "Background")]
    assert clock.slept == [15] * 5
    header = next(line for line in out.splitlines() if line.startswith("CONC"))
    assert header.split()[-8:] == ["DISAGG", "KV", "IN", "tok", "SRV", "tok/s", "CLIENT", "+ms"]
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [row[0] for row in rows] == ["2", "4"]
    for row in rows:  # DISAGG is "n/n 100%", the external KV tokens, the server's tok/s, the client's overhead
        done, routed = row[-5].split("/")
        assert done == routed and row[-4] == "100%" and int(row[-3].replace(",", "")) > 0
        assert float(row[-2].replace(",", "")) > 0 and int(row[-1].lstrip("+")) > 0
    seams = _on_cluster(_cluster(fakes, healthy_run), aws)
    json_code, text, _ = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--json", seams=seams)
    run = json.loads(text)["runs"]["dpd"]
    assert (run["model"], run["architecture"], run["instance_type"]) == ("Llama-3.3-70B-Instruct", "llama-3.3-70b",
                                                                         "ml.p5.48xlarge")
    assert [r["fraction"] for r in run["routing"]] == [1.0, 1.0]
    assert all(r["external_kv_tokens"] > 0 and r["client_overhead_s"] > 0 for r in run["routing"])
    assert {w["code"] for w in run["warnings"]} <= {"client-overhead"}
    assert json_code == (1 if run["warnings"] else 0) and code in (0, 1)


def test_a_silently_direct_run_is_untrustworthy_and_exit_1(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                           direct_run: Any,
                                                           stub_spec: str, *, s3: Any) -> None:
    seams = _on_cluster(_cluster(fakes, direct_run), _upload(s3, direct_run.files()))
    code, out, _ = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--json", seams=seams)
    assert code == 1
    run = json.loads(out)["runs"]["dpd"]
    assert [r["fraction"] for r in run["routing"]] == [0.0, 0.0]
    routing = [(w["code"], w["concurrency"]) for w in run["warnings"] if w["code"] != "client-overhead"]
    assert routing == [("not-disaggregated", 2), ("not-disaggregated", 4)]


def test_a_missing_twin_is_refused_before_any_job(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                  healthy_run: Any,
                                                  stub_spec: str) -> None:
    kube = _cluster(fakes, healthy_run, present=("dpd-test",))
    seams = _on_cluster(kube)
    code, _, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--aggregated", seams=seams)
    assert code == 2 and "default/dpd-test-agg" in err and "aggregated_baseline=true" in err
    assert kube.batch.created == [] and kube.core.accounts == []


def test_missing_rbac_is_refused_before_any_job(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                healthy_run: Any,
                                                stub_spec: str) -> None:
    kube = _cluster(fakes, healthy_run)
    kube.access = fakes.FakeAccess(denied=("get pods/proxy hyperpod-inference-system", "create jobs default"))
    seams = _on_cluster(kube)
    code, _, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, seams=seams)
    assert code == 2 and "RBAC: is denied" in err
    assert "get pods/proxy in hyperpod-inference-system" in err and "create jobs.batch in default" in err
    assert "get pods/log default" in kube.access.asked and kube.batch.created == []
    assert "get pods/log hyperpod-inference-system" in kube.access.asked  # the router's routing line


def test_the_served_model_name_comes_from_the_spec(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = write_spec(tmp_path, ("max_model_len: 16384",
                                 "max_model_len: 16384\nargs: [--served-model-name, llama-70b]"))
    for client, flag in (("aiperf", "--model"), ("genai-bench", "--api-model-name")):
        out = tmp_path / client
        code, _, err = run_cli(capsys, spec, "--render", str(out), "--run-id", RUN, "--client", client)
        assert code == 0, err
        (job,) = [d for d in yaml.safe_load_all(next(out.iterdir()).read_text()) if d["kind"] == "Job"]
        args = job["spec"]["template"]["spec"]["initContainers"][1]["args"]
        assert args[args.index(flag) + 1] == "llama-70b"


def test_a_results_folder_below_the_threshold_is_untrustworthy(capsys: pytest.CaptureFixture[str],
                                                               healthy_run: Any) -> None:
    code, out, _ = run_cli(capsys, "--results-dir", str(healthy_run.folder))
    assert code == 1 and "[not-disaggregated] concurrency 2" in out and "routing threshold 4096" in out


def test_a_folder_of_another_endpoint_is_refused(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                tmp_path: Path, stub_spec: str) -> None:
    """genai-bench records its --api-base in experiment_metadata.json; another endpoint's router is refused."""
    other = tmp_path / "other"
    other.mkdir()
    router = "http://other-ep-default-routing-service.hyperpod-inference-system.svc.cluster.local:443"
    for name, text in healthy_run.files().items():
        moved = re.sub(r"--api-base \S+", f"--api-base {router}", text) if name == "experiment_metadata.json" else text
        (other / name).write_text(moved)
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", str(other))
    assert code == 2 and router in err and "not endpoint dpd-test" in err


def test_ab_of_different_scenarios_is_refused(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                              tmp_path: Path, stub_spec: str) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for name, text in healthy_run.files().items():
        (other / name.replace("D64_16", "D64_32")).write_text(text.replace("D(64,16)", "D(64,32)"))
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                           str(other))
    assert code == 2 and "D(64,16)" in err and "D(64,32)" in err and "same input and output lengths" in err
    fewer = tmp_path / "fewer"
    fewer.mkdir()
    for name, text in healthy_run.files().items():
        if "num_concurrency_4_" not in name:
            (fewer / name).write_text(text)
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                           str(fewer))
    assert code == 2 and "at concurrency 2,4" in err and "at concurrency 2:" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--concurrency", "8,x"], "concurrency: is not a whole number (got 'x')"),
    (["--max-seconds", "90"], "max_seconds: must be a whole number of minutes"),
    (["--requests", "4"], "requests: is fewer than the highest concurrency 32"),
    (["--requests", "10"], "Fix: use at least 32, or leave it out for 320"),
    (["--isl", "2000"], "--isl: is too close to or below the routing threshold 4096"),
    (["--isl", "4096"], "Fix: use --isl 4352 or more, or pass --path direct"),
    (["--isl", "4096", "--path", "direct"], "Fix: use --isl 3"),
    (["--isl", "16200", "--osl", "256", "--path", "direct"], "above the spec's max_model_len 16384"),
    (["--aggregated-results-dir", "x"], "--aggregated-results-dir needs --results-dir"),
    (["--results-dir", "/nonexistent-folder"], "not a folder"),
    (["--run-id", "Bad_Id", "--render", "out"], "run_id: makes the Job name"),
    (["--tokenizer-s3", "bucket/prefix", "--render", "out"], "--tokenizer-s3: is not an S3 URI"),
    (["--client", "genai-bench", "--request-rate", "1", "--render", "out"], "client: has no open-loop mode"),
    (["--client", "genai-bench", "--prefix-share", "0.5", "--render", "out"], "prefix_share: needs aiperf"),
    (["--prefix-share", "1.5", "--render", "out"], "prefix_share: must be a fraction from 0 up to"),
])
def test_bad_input_is_exit_2_with_the_fix(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--prefix-share", "half"], "argument --prefix-share: 'half' is not a number"),
    (["--client", "locust"], "argument --client: invalid choice: 'locust'"),
])
def test_bad_client_options_are_argparse_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                message: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        run_cli(capsys, *argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--timeout", "-5"], "--timeout: must be a finite number of seconds, more than 0 (got -5)"),
    (["--poll-interval", "0"], "--poll-interval: must be a finite number of seconds, more than 0 (got 0)"),
])
def test_bad_waits_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", *argv])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_an_unusable_kubeconfig_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "--kubeconfig", str(tmp_path / "missing"), "--run-id", RUN)
    assert code == 2 and "kubeconfig" in err and "Traceback" not in err


def test_compare_with_the_real_advisor(capsys: pytest.CaptureFixture[str], healthy_run: Any, stub_spec: str) -> None:
    import importlib.util

    if importlib.util.find_spec("aiconfigurator") is None:
        pytest.skip("the advisor extra is not installed: pip install '.[advisor]'")
    code, out, err = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--compare", "--json")
    assert code == 1, err  # the folder holds no counters: its levels are unchecked
    assert {w["code"] for w in json.loads(out)["runs"]["dpd"]["warnings"]} == {"unchecked"}
    rows = json.loads(out)["comparison"]["rows"]
    assert {(r["concurrency"], r["metric"]) for r in rows} == {
        (c, m) for c in (2, 4) for m in ("TTFT p50", "TPOT p50", "E2E p50", "output tok/s")}
    assert all(r["predicted"] > 0 and r["layout"] == "disaggregated" for r in rows)


def test_a_failed_job_is_exit_1_with_the_reason(capsys: pytest.CaptureFixture[str], fakes: ModuleType) -> None:
    name = f"bench-dpd-test-{RUN}"
    failed = fakes.pod(f"{name}-x", phase="Failed", init=[
        fakes.container("fetch-tokenizer", "terminated", exit_code=1, reason="Error")], main=[])
    batch = fakes.FakeBatch(states=[fakes.job(name, condition="Failed", reason="BackoffLimitExceeded")])
    core = fakes.FakeCore(pods=[[failed]], logs={"fetch-tokenizer": "An error occurred (AccessDenied)"})
    seams = Seams(benchmark_kube=lambda context, config: fakes.benchmark_kube(batch, core))
    code, out, _ = run_cli(capsys, "--run-id", RUN, "--json", seams=seams)
    assert code == 1
    run = json.loads(out)["runs"]["dpd"]
    assert run["levels"] == [] and run["not_run"] == [8, 16, 32] and run["trusted"] is False
    assert "BackoffLimitExceeded" in run["problem"] and "AccessDenied" in run["problem"]
    assert batch.deleted == [("default", name, "Background")]


# --- where the result files come from: the Job's S3 upload when there is one, else its log ---------------


def _levels(out: str) -> list[int]:
    return [level["concurrency"] for level in json.loads(out)["runs"]["dpd"]["levels"]]


def test_uploaded_results_are_read_from_s3(capsys: pytest.CaptureFixture[str], fakes: ModuleType, healthy_run: Any,
                                           stub_spec: str, *, s3: Any) -> None:
    """The log kept none of the files (rotated away): every level comes from the run's S3 folder."""
    aws = _upload(s3, healthy_run.files())
    seams = _on_cluster(_cluster(fakes, healthy_run, printed={}), aws)
    _, out, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--profile", "team", "--json", seams=seams)
    assert _levels(out) == [2, 4] and json.loads(out)["runs"]["dpd"]["not_run"] == []
    assert (aws.asked, aws.profiles) == (["us-west-2"], ["team"]) and "log" not in err


def test_the_s3_copy_wins_over_a_log_copy_cut_mid_json(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                       healthy_run: Any,
                                                       stub_spec: str, *, s3: Any) -> None:
    """M6: a level's file cut in the log (log rotation) is whole in S3, and S3's copy is the one read."""
    files = healthy_run.files()
    level = next(name for name in files if "_num_concurrency_2_" in name)
    kube = _cluster(fakes, healthy_run, printed={**files, level: files[level][:len(files[level]) // 2]})
    log = parse_job_log(kube.core.logs["publish"])  # the cut copy splits on its markers without complaint
    assert len(log.files[level]) < len(files[level]) and log.exit_code == 0
    with pytest.raises(ResultsError, match="not JSON"):  # and read alone, it would fail the run
        collect(log.files)
    seams = _on_cluster(kube, _upload(s3, files))
    _, out, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--json", seams=seams)
    assert "cannot be read" not in err and _levels(out) == [2, 4]
    whole = collect(files).level(Load(concurrency=2))
    assert whole is not None and json.loads(out)["runs"]["dpd"]["levels"][0]["requests"] == whole.requests


def _missing_bucket(s3: Any) -> Any:
    return s3  # moto's S3 without the bucket: NoSuchBucket


def _list_denied(s3: Any) -> Any:
    client = boto3.client("s3", region_name="us-west-2")
    stub = Stubber(client)
    stub.add_client_error("list_objects_v2", "AccessDenied", "Access Denied", 403)
    stub.activate()
    return client


def _get_denied(s3: Any) -> Any:
    client = boto3.client("s3", region_name="us-west-2")
    stub = Stubber(client)
    stub.add_response("list_objects_v2", {"Contents": [{"Key": f"{UPLOADED}experiment_metadata.json"}],
                                          "IsTruncated": False, "KeyCount": 1})
    stub.add_client_error("get_object", "AccessDenied", "Access Denied", 403)
    stub.activate()
    return client


@pytest.mark.parametrize(("client", "reason"), [
    (_missing_bucket, "NoSuchBucket on ListObjectsV2: The specified bucket does not exist"),
    (_list_denied, f"access denied on ListObjectsV2; the caller needs s3:ListBucket on bucket {BUCKET} for the "
                   f"prefix {UPLOADED}"),
    (_get_denied, f"access denied on GetObject; the caller needs s3:GetObject on s3://{BUCKET}/{UPLOADED}*"),
])
def test_unreadable_s3_falls_back_to_the_log_with_a_note(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                         healthy_run: Any,
                                                         stub_spec: str, *, s3: Any, client: Any, reason: str) -> None:
    aws = S3Seam(client(s3))
    seams = _on_cluster(_cluster(fakes, healthy_run), aws)
    _, out, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--json", seams=seams)
    assert _levels(out) == [2, 4] and aws.asked == ["us-west-2"]  # one client: the read, the counters written
    (note,) = [line for line in err.splitlines() if "uploaded results" in line]
    assert note == (f"cannot read the uploaded results in s3://{BUCKET}/{UPLOADED} ({reason}); using the copy in "
                    "the Job's log, which kubelet's log rotation may have cut")


@pytest.mark.parametrize(("argv", "exit_code"), [(("--no-upload",), 0), ((), 96)])
def test_without_an_upload_s3_is_never_touched(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                               healthy_run: Any, stub_spec: str, *,
                                               argv: tuple[str, ...], exit_code: int) -> None:
    """--no-upload, or an upload that failed (the publish container's 96): the log is the only copy."""
    aws = S3Seam()  # fails the test if asked for a client
    seams = _on_cluster(_cluster(fakes, healthy_run, exit_code=exit_code), aws)
    code, out, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, *argv, "--json", seams=seams)
    assert aws.asked == [] and _levels(out) == [2, 4] and "uploaded results" not in err
    problem = json.loads(out)["runs"]["dpd"]["problem"] or ""
    assert ("the upload to S3 failed" in problem) == (exit_code == 96) and (code == 1 or exit_code == 0)


DOC = Path(__file__).resolve().parents[2] / "docs" / "bench.md"
DOC_BLOCK = "<!-- stub run: checked by tests/benchmark/test_cli.py -->"


OPEN_LOOP_TRAFFIC = ("--run-id", RUN, "--request-rate", "8,16", "--isl", "64", "--osl", "16", "--requests", "24",
                     "--max-seconds", "60")


def test_an_open_loop_sweep_on_the_cluster_proves_disaggregation_per_rate(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, open_loop_run: Any,
        stub_spec: str, *, s3: Any) -> None:
    """--request-rate runs aiperf; the table's first column is the rate, and each rate's routing is proven."""
    aws = _upload(s3, open_loop_run.files())  # the summaries and the per-request records, read back from S3
    seams = _on_cluster(_cluster(fakes, open_loop_run), aws)
    code, out, err = run_cli(capsys, stub_spec, *OPEN_LOOP_TRAFFIC, seams=seams)
    assert "request rate 8,16/s, aiperf" in err
    header = next(line for line in out.splitlines() if line.startswith("RATE"))
    assert header.split()[-8:] == ["DISAGG", "KV", "IN", "tok", "SRV", "tok/s", "CLIENT", "+ms"]
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [row[0] for row in rows] == ["8/s", "16/s"]
    assert all(row[-4] == "100%" and int(row[-3].replace(",", "")) > 0 for row in rows)
    assert "24 requests per level, aiperf" in out and "using the copy in" not in err
    seams = _on_cluster(_cluster(fakes, open_loop_run), aws)
    json_code, text, _ = run_cli(capsys, stub_spec, *OPEN_LOOP_TRAFFIC, "--json", seams=seams)
    run = json.loads(text)["runs"]["dpd"]
    assert run["scenario"]["request_rate"] == [8.0, 16.0] and "concurrency" not in run["scenario"]
    assert [level["request_rate"] for level in run["levels"]] == [8.0, 16.0]
    assert [r["fraction"] for r in run["routing"]] == [1.0, 1.0]
    assert {w["code"] for w in run["warnings"]} <= {"client-overhead"}
    assert json_code == (1 if run["warnings"] else 0) and code in (0, 1)


def test_a_silently_direct_open_loop_run_is_untrustworthy_and_exit_1(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, open_loop_direct_run: Any, stub_spec: str, *,
        s3: Any) -> None:
    seams = _on_cluster(_cluster(fakes, open_loop_direct_run), _upload(s3, open_loop_direct_run.files()))
    code, out, _ = run_cli(capsys, stub_spec, "--run-id", RUN, "--request-rate", "8", "--isl", "64", "--osl", "16",
                           "--requests", "24", "--max-seconds", "60", "--json", seams=seams)
    run = json.loads(out)["runs"]["dpd"]
    assert code == 1 and [r["fraction"] for r in run["routing"]] == [0.0]
    assert [(w["code"], w["request_rate"]) for w in run["warnings"] if w["code"] != "client-overhead"] == [
        ("not-disaggregated", 8.0)]


@pytest.mark.parametrize(("argv", "expected"), [
    (("--request-rate", "1,2", "--concurrency", "8"), "not allowed with argument"),
    (("--request-rate", "0"), "request_rates"),
    (("--request-rate", "2,2"), "repeats a rate"),
    (("--request-rate", "fast"), "request_rate"),
    (("--request-rate", "2", "--path", "direct", "--isl", "3584"),
     f"--isl {largest_direct_isl(4096, Client.AIPERF)} or less"),
])
def test_bad_request_rates_are_refused_by_name(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                               expected: str) -> None:
    """aiperf's prompts are longer in characters than genai-bench's, so the direct bound is its own."""
    with pytest.raises(SystemExit) if "--concurrency" in argv else contextlib.nullcontext():
        code, _, err = run_cli(capsys, "--output-dir", "-", *argv)
        assert code == 2 and expected in err
    if "--concurrency" in argv:
        assert expected in capsys.readouterr().err


def test_an_open_loop_results_folder_is_reported_and_compared_per_rate(
        capsys: pytest.CaptureFixture[str], open_loop_run: Any, healthy_run: Any,
        stub_spec: str) -> None:
    """--results-dir reads the Job's aiperf files; --compare asks the advisor once per rate (its open-loop
    model), and an A/B of a rate sweep against a concurrency sweep is refused."""
    asked: list[Any] = []
    estimate = FakeEstimate(ttft_s=0.5, tpot_s=0.005, e2e_s=0.6, output_tokens_per_s=100.0, gpus=16)

    def predictor(spec: Any, scenario: Scenario) -> FakeAdvice:
        asked.append(scenario)
        return FakeAdvice(points=tuple(FakePoint(0, estimate, estimate, rate) for rate in scenario.request_rates),
                          assumptions={"system": "h100_sxm"})

    seams = Seams(predictor=predictor)
    code, out, _ = run_cli(capsys, stub_spec, "--results-dir", str(open_loop_run.folder), "--compare", "--json",
                           seams=seams)
    assert asked[0].request_rates == (8.0, 16.0) and asked[0].concurrency == ()
    document = json.loads(out)
    assert [level["request_rate"] for level in document["runs"]["dpd"]["levels"]] == [8.0, 16.0]
    ttft = [r for r in document["comparison"]["rows"] if r["metric"] == "TTFT p50"]
    assert [r["request_rate"] for r in ttft] == [8.0, 16.0] and all(abs(r["difference_percent"]) < 15 for r in ttft)
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", str(open_loop_run.folder), "--aggregated-results-dir",
                           str(healthy_run.folder), seams=seams)
    assert code == 2 and "request rate 8,16/s" in err and "concurrency 2,4" in err


def test_a_results_folder_whose_prompts_the_models_tokenizer_counts_short_is_flagged(
        capsys: pytest.CaptureFixture[str], healthy_run: Any, tmp_path: Path) -> None:
    """No counters in a folder: the server's own prompt-token count (the model's tokenizer) is the evidence."""
    def counted(tokens: float) -> Path:
        folder = tmp_path / f"counted-{tokens:g}"
        folder.mkdir()
        for name, text in healthy_run.files().items():
            data = json.loads(text)
            if "aggregated_metrics" in data:
                data["aggregated_metrics"]["stats"]["num_input_tokens"]["mean"] = tokens
            (folder / name).write_text(json.dumps(data))
        return folder

    spec = write_spec(tmp_path, ("threshold: 4096", "threshold: 60"))  # 64 Llama 3 tokens clear 60 by the margin
    code, out, _ = run_cli(capsys, spec, "--results-dir", str(counted(40.0)), "--json")
    warnings = [w for w in json.loads(out)["runs"]["dpd"]["warnings"] if w["code"] == "not-disaggregated"]
    assert code == 1 and [w["concurrency"] for w in warnings] == [2, 4]
    assert "counted 40 prompt tokens per request, not clear of the routing threshold 60 (use --isl 256" in \
        warnings[0]["message"]
    code, out, _ = run_cli(capsys, spec, "--results-dir", str(counted(70.0)), "--json")
    assert "not-disaggregated" not in {w["code"] for w in json.loads(out)["runs"]["dpd"]["warnings"]}


OPEN_LOOP_DOC_BLOCK = "<!-- open-loop stub run: checked by tests/benchmark/test_cli.py -->"
DOC_RUNS = {  # docs/bench.md's quoted runs on the stub: marker, the run, its traffic, the spec's slo
    "closed-loop": (DOC_BLOCK, "healthy_run", STUB_TRAFFIC, "slo:\n  ttft_ms: 50\n  tpot_ms: 10"),
    "open-loop": (OPEN_LOOP_DOC_BLOCK, "open_loop_run", OPEN_LOOP_TRAFFIC, "slo:\n  ttft_ms: 550\n  tpot_ms: 10"),
}


@pytest.mark.slow  # reads a stub run by name (support.SLOW_FIXTURES marks those it sees)
@pytest.mark.parametrize("kind", sorted(DOC_RUNS))
def test_the_documented_stub_runs_are_what_bench_prints(kind: str, *, capsys: pytest.CaptureFixture[str],
                                                        fakes: ModuleType,
                                                        tmp_path: Path, request: pytest.FixtureRequest,
                                                        s3: Any) -> None:
    """docs/bench.md quotes a run on the stub per kind of load: its title, columns and row shapes are today's
    output (the latencies differ from run to run)."""
    marker, fixture, traffic, slo = DOC_RUNS[kind]
    run = request.getfixturevalue(fixture)
    spec = write_spec(tmp_path, ("threshold: 4096", "threshold: 32"),
                      ("max_model_len: 16384", f"max_model_len: 16384\n{slo}"))
    seams = _on_cluster(_cluster(fakes, run), _upload(s3, run.files()))
    code, out, err = run_cli(capsys, spec, *traffic, seams=seams)
    quoted = DOC.read_text(encoding="utf-8").split(marker, 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    # the table (the first block; TTFT by stage and capacity at the SLO follow it); on a loaded machine the
    # client's overhead may also pass its bound, flagged after it
    blocks = out.rstrip().split("\n\n")
    table = blocks[0]
    flagged = next((block.partition("\n")[2] for block in blocks[1:]
                    if block.startswith("cannot be trusted as measured:")), "")
    assert all("[client-overhead]" in line for line in flagged.splitlines()), out + err
    assert code == (1 if flagged else 0), out + err
    printed, expected = table.splitlines(), quoted.rstrip().splitlines()
    shape = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?")
    assert len(expected) == len(printed), out
    for doc_line, line in zip(expected, printed, strict=True):
        assert shape.sub("9", doc_line).split() == shape.sub("9", line).split(), out


def test_the_documented_bounds_are_the_codes() -> None:
    from hyperpod_dpd.benchmark.proof.disaggregation import MIN_FRACTION
    from hyperpod_dpd.benchmark.proof.overhead import BOUND_RATIO, BOUND_S
    from hyperpod_dpd.benchmark.run.route import default_isl

    text = DOC.read_text(encoding="utf-8")
    assert f"{BOUND_S * 1e3:.0f} ms" in text and f"{BOUND_RATIO:.0%}" in text and f"{MIN_FRACTION:.0%}" in text
    assert f"--isl {default_isl(4096)}" in text
    assert f"({largest_direct_isl(4096, Client.AIPERF)} tokens, not {largest_direct_isl(4096)})" in text
    # The front page leaves the bounds to docs/bench.md (it stays under 100 lines); any it does state are these.
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    assert "docs/bench.md" in readme
    assert set(re.findall(r"under (\d+%) disaggregated", readme)) <= {f"{MIN_FRACTION:.0%}"}
    assert set(re.findall(r"client's own share above (\d+ ms)", readme)) <= {f"{BOUND_S * 1e3:.0f} ms"}


def test_an_open_loop_folder_of_another_endpoint_is_refused(capsys: pytest.CaptureFixture[str], open_loop_run: Any,
                                                            tmp_path: Path, stub_spec: str) -> None:
    """aiperf records the router it measured in each summary's input_config, as genai-bench does in its metadata."""
    other = "http://other-default-routing-service.hyperpod-inference-system.svc.cluster.local:443"
    for name, text in open_loop_run.files().items():
        data = json.loads(text) if name.endswith(".json") and name.startswith("aiperf_rate_") else None
        if data is not None:
            data["input_config"]["endpoint"]["urls"] = [other]
        (tmp_path / name).write_text(text if data is None else json.dumps(data))
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", str(tmp_path))
    assert code == 2 and f"the run measured {other}, not endpoint dpd-test" in err



def test_the_default_bench_on_a_healthy_stub_exits_0_with_the_overhead_bounded_at_p50_and_p99(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, closed_loop_run: Any, stub_spec: str, *,
        s3: Any) -> None:
    """No --client and no --concurrency: aiperf at 8, 16 and 32, every level disaggregated, and the client's
    TTFT within the bound of the router's at p50 and p99 (the router's histogram has finite buckets, so both
    quantile checks run): exit 0, no warning."""
    traffic = ("--run-id", RUN, "--isl", "64", "--osl", "16", "--requests", "96", "--max-seconds", "60")
    aws = _upload(s3, closed_loop_run.files())
    code, out, err = run_cli(capsys, stub_spec, *traffic, seams=_on_cluster(_cluster(fakes, closed_loop_run), aws))
    assert "concurrency 8,16,32, aiperf" in err
    assert code == 0, out
    json_code, text, _ = run_cli(capsys, stub_spec, *traffic, "--json",
                                 seams=_on_cluster(_cluster(fakes, closed_loop_run), aws))
    run = json.loads(text)["runs"]["dpd"]
    assert json_code == 0 and run["warnings"] == []
    assert [level["concurrency"] for level in run["levels"]] == [8, 16, 32]
    assert [r["fraction"] for r in run["routing"]] == [1.0, 1.0, 1.0]
    assert all(0 < r["client_overhead_s"] < 0.05 for r in run["routing"])
    for row in run["routing"]:  # both quantiles placed in a finite bucket, and the proven least within the bound
        quantiles = row["client_overhead_quantiles"]
        assert set(quantiles) == {"p50", "p99"}
        for name, figure in quantiles.items():
            assert figure["server_between_s"][1] is not None, (row["concurrency"], name)
            assert figure["overhead_at_least_s"] <= figure["bound_s"], (row["concurrency"], name, figure)
            assert figure["verdict"] in {"within", "unresolved"}, (row["concurrency"], name, figure)


def test_report_dir_writes_the_report_and_names_a_missing_advisor(
        capsys: pytest.CaptureFixture[str], *, healthy_run: Any, short_run: Any, stub_spec: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """From a recorded run's folders; the advisor's absence is said in the output, and nothing crashes."""
    monkeypatch.setitem(sys.modules, "hyperpod_dpd.advisor", None)  # as if not installed
    folder = tmp_path / "report"
    code, out, err = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                             str(short_run.folder), "--report-dir", str(folder))
    assert code == 1 and "Traceback" not in err  # the twin's answers were shorter than --osl, as before
    assert "no prediction:" in out and "pip install '.[advisor]' in the hyperpod-dpd checkout" in out
    page = (folder / "report.html").read_text(encoding="utf-8")
    data = json.loads(page[page.index('id="figure-data">') + len('id="figure-data">'):page.rindex("</script>")])
    levels = collect({p.name: p.read_text(encoding="utf-8") for p in healthy_run.folder.iterdir()
                      if p.suffix in (".json", ".jsonl")}).levels
    [ttft] = [s for s in data["latency"] if (s["layout"], s["metric"], s["quantile"]) == ("dpd", "ttft", "p50")]
    assert ttft["x"] == [2.0, 4.0]
    assert ttft["y_ms"] == pytest.approx([lv.ttft.p50 * 1e3 for lv in levels], abs=5e-4)  # ms to the microsecond
    assert (folder / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "advisor" in data["prediction_note"]


def test_a_results_folder_given_twice_is_two_repeats(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                     stub_spec: str) -> None:
    folder = str(healthy_run.folder)
    code, out, _ = run_cli(capsys, stub_spec, "--results-dir", folder, "--results-dir", folder,
                           "--aggregated-results-dir", folder, "--aggregated-results-dir", folder, "--json")
    buyer = json.loads(out)["ab_buyer"]
    for level in buyer["levels"]:
        for metric in level["metrics"]:
            assert metric["runs"] == {"dpd": 2, "aggregated": 2}
    # one folder given twice is one run twice, not two runs: no spread, so no interval and no verdict (before,
    # Welch's zero-width interval; with the twin's own folder twice that read as a verdict from one run)
    verdicts = {m["verdict"] for lv in buyer["levels"] for m in lv["metrics"]}
    assert verdicts == {"no interval (each side's runs are identical: copies of one run, not repeats)"}
    for row in json.loads(out)["ab"]:  # every change of the A/B row, E2E too (before: "one run" with two a side)
        assert {found["verdict"] for found in row["change_interval_percent"].values()} == verdicts
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", folder, "--results-dir", folder,
                           "--aggregated-results-dir", folder)
    assert code == 2 and "a repeat needs both endpoints' folders" in err


@pytest.mark.parametrize(("argv", "message"), [
    (("--repeat", "2"), "with --results-dir give each repeat's folder as another --results-dir"),
    (("--price-per-node-hour", "-3"), "price_per_node_hour"),
])
def test_bad_report_options_are_exit_2(capsys: pytest.CaptureFixture[str], healthy_run: Any, stub_spec: str,
                                       argv: tuple[str, ...], message: str) -> None:
    code, _, err = run_cli(capsys, stub_spec, "--results-dir", str(healthy_run.folder), *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_repeat_runs_the_job_again_under_its_own_run_id(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                        healthy_run: Any, stub_spec: str, *, s3: Any) -> None:
    clusters = [_cluster(fakes, healthy_run), _cluster(fakes, healthy_run)]
    handed = iter(clusters)
    clock = FakeClock()
    seams = Seams(benchmark_kube=lambda context, config: next(handed), aws_clients=_upload(s3, healthy_run.files()),
                  clock=clock, sleep=clock.sleep)
    _, text, _ = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--repeat", "2", "--json", seams=seams)
    run = json.loads(text)["runs"]["dpd"]
    assert [level["concurrency"] for level in run["levels"]] == [2, 4]
    assert [[level["concurrency"] for level in again["levels"]] for again in run["repeats"]] == [[2, 4]]
    names = [body["metadata"]["name"] for cluster in clusters for _, body in cluster.batch.created]
    assert names == [f"bench-dpd-test-{RUN}", f"bench-dpd-test-{RUN}-r2"]


CLOSED_LOOP_TRAFFIC = ("--run-id", RUN, "--isl", "64", "--osl", "16", "--requests", "96", "--max-seconds", "60")


def _halved_router_ttft(run: Any) -> Any:
    """``run`` with a router whose dpd_e2e_ttft_seconds sum and buckets say half the stub's TTFT: the client's
    mean then stands about 250 ms above the router's, a client-overhead fault only the server's figures show."""
    def halved(router: str) -> str:
        def sum_line(match: re.Match[str]) -> str:
            return f"dpd_e2e_ttft_seconds_sum {float(match[1]) / 2!r}"
        return re.sub(r"^dpd_e2e_ttft_seconds_sum (\S+)$", sum_line, router, flags=re.M)
    return dataclasses.replace(run, metrics={window: (halved(router), decoder)
                                             for window, (router, decoder) in run.metrics.items()})


def _downloaded(s3: Any, folder: Path, prefix: str = UPLOADED) -> Path:
    """The run's S3 folder copied to ``folder``, as ``aws s3 cp --recursive`` would."""
    folder.mkdir()
    for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]:
        name = item["Key"].removeprefix(prefix)
        (folder / name).write_bytes(s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
    return folder


SERVER_FAULTS = {  # a live run whose verdict only the servers' counters give: its fixture, traffic and doctoring
    "client-overhead": ("closed_loop_run", CLOSED_LOOP_TRAFFIC, _halved_router_ttft),
    "not-disaggregated": ("direct_run", STUB_TRAFFIC, lambda run: run),
}


@pytest.mark.slow  # reads a stub run by name (support.SLOW_FIXTURES marks those it sees)
@pytest.mark.parametrize("fault", sorted(SERVER_FAULTS))
def test_a_results_folder_keeps_the_live_runs_counters_and_verdicts(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, stub_spec: str, tmp_path: Path,
        request: pytest.FixtureRequest, *, s3: Any, fault: str) -> None:
    """The live run exits 1 on a fault the router's and decoders' counters show. Its S3 folder (downloaded) and
    its copy under --report-dir then report the same verdicts and exit 1, not 'unchecked' and 0 as before."""
    fixture, traffic, doctor = SERVER_FAULTS[fault]
    run = doctor(request.getfixturevalue(fixture))
    aws = _upload(s3, run.files())
    code, out, _ = run_cli(capsys, stub_spec, *traffic, "--json", "--report-dir", str(tmp_path / "report"),
                           seams=_on_cluster(_cluster(fakes, run), aws))
    live = json.loads(out)["runs"]["dpd"]
    assert code == 1 and fault in {w["code"] for w in live["warnings"]}
    proof = json.loads(s3.get_object(Bucket=BUCKET, Key=UPLOADED + PROOF_FILE)["Body"].read())
    assert (proof["run_id"], proof["endpoint"], sorted(proof["windows"])) == (
        RUN, "dpd-test", [str(window) for window in sorted(run.metrics)])
    for folder in (_downloaded(s3, tmp_path / "downloaded"), tmp_path / "report" / "runs" / "dpd"):
        again_code, again, err = run_cli(capsys, stub_spec, "--results-dir", str(folder), "--json")
        reread = json.loads(again)["runs"]["dpd"]
        assert again_code == 1, err
        assert reread["warnings"] == live["warnings"] and reread["routing"] == live["routing"]
        assert "unchecked" not in reread
        _, text, _ = run_cli(capsys, stub_spec, "--results-dir", str(folder))
        assert "not checked" not in text and "DISAGG" in text


def test_a_stale_or_foreign_counters_file_is_refused_by_run_and_time(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, direct_run: Any, stub_spec: str, tmp_path: Path, *,
        s3: Any) -> None:
    """An earlier run's counters under the same run id (its result files differ), another endpoint's, or a file cut
    mid-JSON: each is named with why, and the folder is reported unchecked, never with those counters."""
    aws = _upload(s3, direct_run.files())
    run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--json", seams=_on_cluster(_cluster(fakes, direct_run), aws))
    folder = _downloaded(s3, tmp_path / "folder")
    proof = (folder / PROOF_FILE).read_text()
    level = next(name for name in sorted(p.name for p in folder.iterdir()) if "_num_concurrency_2_" in name)
    (folder / level).write_text((folder / level).read_text() + "\n")  # this run's files, not the proof's
    written = json.loads(proof)["written_at"]
    cases = {
        "stale": (proof, f"was written by run {RUN} at {written} for result files that differ from this folder's "
                         f"({level})"),
        "foreign": (proof.replace('"endpoint": "dpd-test"', '"endpoint": "other"'),
                    f"holds endpoint other's counters (run {RUN}), not dpd-test's"),
        "cut": (proof[:40], f"{PROOF_FILE}: not JSON"),
    }
    for proof_text, why in cases.values():
        (folder / PROOF_FILE).write_text(proof_text)
        code, out, err = run_cli(capsys, stub_spec, "--results-dir", str(folder), "--json")
        document = json.loads(out)["runs"]["dpd"]
        assert why in document["unchecked"] and "routing" not in document
        # the doctored folder shows nothing the router counted: every level unchecked, with why (before: exit 0)
        assert code == 1 and "Traceback" not in err
        assert {w["code"] for w in document["warnings"]} == {"unchecked"}
        assert all(why in w["message"] for w in document["warnings"])
        _, printed, err = run_cli(capsys, stub_spec, "--results-dir", str(folder))
        assert why in err and why in printed and "DISAGG" not in printed


def test_counters_s3_refuses_are_a_note_naming_the_permission(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                              healthy_run: Any, stub_spec: str) -> None:
    client = boto3.client("s3", region_name="us-west-2")
    stub = Stubber(client)
    stub.add_client_error("list_objects_v2", "AccessDenied", "Access Denied", 403)
    stub.add_client_error("put_object", "AccessDenied", "Access Denied", 403)
    stub.activate()
    _, out, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--json",
                          seams=_on_cluster(_cluster(fakes, healthy_run), S3Seam(client)))
    assert _levels(out) == [2, 4]
    assert (f"cannot write the router and decoder counters to s3://{BUCKET}/{UPLOADED}{PROOF_FILE} (access denied "
            f"on PutObject; the caller needs s3:PutObject on s3://{BUCKET}/{UPLOADED}{PROOF_FILE})") in err


# --- docs/bench.md's figures: a stub run's report ---------------------------------------------------------

DOC_RUN = Path(__file__).resolve().parent / "data" / "doc-run"  # the run's folders: dpd/ (with counters), aggregated/
DOC_IMAGES = DOC.parent / "images"
DOC_FIGURES = ((LATENCY_PNG, "bench-latency.png"), (THROUGHPUT_PNG, "bench-throughput.png"),
               (STAGES_PNG, "bench-ttft-stages.png"))
WRITE_DOC_RUN = "HYPERPOD_DPD_WRITE_DOC_FIGURES"  # 1: run the stub again, record its folders, redraw the figures
DOC_SLO = ("max_model_len: 16384", "max_model_len: 16384\nslo:\n  ttft_ms: 550\n  tpot_ms: 10")


def _no_advisor(spec: Any, scenario: Scenario) -> Any:
    """The stub is no model the advisor sizes: the report says so instead of drawing a prediction."""
    raise SpecError([Problem(field="model", value="the test suite's stub", message="the stub is not a model",
                             fix="compare a real endpoint")])


def _doc_spec(tmp_path: Path) -> str:
    return write_spec(tmp_path, ("threshold: 4096", "threshold: 32"), DOC_SLO)


def _figures(report: Path) -> dict[str, Any]:
    return read_embedded((report / HTML_FILE).read_text(encoding="utf-8"))


def _assert_plotted_is_measured(data: Mapping[str, Any], document: Mapping[str, Any]) -> None:
    """Every point of the figures is a number of the run's own report: each layout's client percentiles per level,
    the SLO, and the DPD endpoint's stages from the servers' counters, the router's and the client's TTFT."""
    for label, run in document["runs"].items():
        for metric in ("ttft", "tpot"):
            for q in ("p50", "p90"):
                (series,) = [s for s in data["latency"] if (s["layout"], s["metric"], s["quantile"]) == (
                    label, metric, q)]
                assert series["x"] == [float(level["concurrency"]) for level in run["levels"]]
                assert series["y_ms"] == pytest.approx([level[f"{metric}_s"][q] * 1e3 for level in run["levels"]],
                                                       abs=5e-4)  # the figure data is in ms, to the microsecond
    assert data["slo"] == {"ttft_p90_ms": 550.0, "tpot_p90_ms": 10.0}
    stages = document["ttft_stages"]
    assert data["ttft_stages"]["x"] == [float(row["concurrency"]) for row in stages]
    for name, plotted in data["ttft_stages"]["stages_ms"].items():
        assert plotted == pytest.approx([row["stages_s"][name] * 1e3 for row in stages], abs=5e-4)
    assert data["ttft_stages"]["router_ttft_ms"] == pytest.approx([row["router_ttft_s"] * 1e3 for row in stages],
                                                                  abs=5e-4)
    assert data["ttft_stages"]["client_ttft_ms"] == pytest.approx([row["client_ttft_s"] * 1e3 for row in stages],
                                                                  abs=5e-4)


def test_a_live_runs_figures_plot_its_results_and_its_folder_redraws_them(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, closed_loop_run: Any, tmp_path: Path, *,
        s3: Any) -> None:
    """The real bench against the stub (its Job's aiperf, the simulated cluster): the figures hold the run's numbers,
    the stages are the stub's own split of its TTFT, and --results-dir on the run folder draws the same PNGs."""
    spec = _doc_spec(tmp_path)
    seams = dataclasses.replace(_on_cluster(_cluster(fakes, closed_loop_run), _upload(s3, closed_loop_run.files())),
                                predictor=_no_advisor)
    code, out, _ = run_cli(capsys, spec, *CLOSED_LOOP_TRAFFIC, "--json", "--report-dir", str(tmp_path / "live"),
                           seams=seams)
    document = json.loads(out)
    # the client's overhead is measured, not controlled: on a loaded machine it may pass its bound, then the only
    # warning (exit 1), which --results-dir must report again
    flagged = {w["code"] for w in document["runs"]["dpd"]["warnings"]}
    assert flagged <= {"client-overhead"} and code == (1 if flagged else 0), out
    data = _figures(tmp_path / "live")
    _assert_plotted_is_measured(data, document)
    truth = closed_loop_run.server_ttfts_by_level()  # the stub's clock: its split of each level's TTFT
    split = closed_loop_run.behaviour.stage_split
    for i, row in enumerate(document["ttft_stages"]):
        mean = fmean(truth[i])  # a tolerance of 1 us: the stub's sums are floats added request by request
        assert row["stages_s"]["prefill queue"] == pytest.approx(split[0] * mean, abs=1e-6)
        assert row["stages_s"]["KV transfer"] == pytest.approx(split[2] * mean, abs=1e-6)
        assert row["stages_s"]["router and network"] == pytest.approx(
            (1 - split[0] - split[1] - sum(split[3:])) * mean, abs=1e-6)
    code, _, _ = run_cli(capsys, spec, "--results-dir", str(tmp_path / "live" / "runs" / "dpd"), "--report-dir",
                         str(tmp_path / "again"), seams=Seams(predictor=_no_advisor))
    assert code == (1 if flagged else 0)
    for made, _ in DOC_FIGURES:
        assert (tmp_path / "again" / made).read_bytes() == (tmp_path / "live" / made).read_bytes(), made


def _as_in_the_pod(run: Any, tokenizer: Path, router: str) -> dict[str, str]:
    """``run``'s result files with this machine's folders and the stub's address as the pod has them (``/results``,
    ``/tokenizer``, ``/tmp`` and the router's URL; conftest's run_client maps them the other way)."""
    base = run.folder.parent.parent
    local = {str(base / "results"): "/results", str(tokenizer): "/tokenizer", str(base / "tmp"): "/tmp"}

    def mapped(text: str) -> str:
        for path, pod in local.items():
            text = text.replace(path, pod)
        return re.sub(r"http://127\.0\.0\.1:\d+", router, text)

    return {name: mapped(text) for name, text in run.files().items()}


def _record_doc_run(capsys: pytest.CaptureFixture[str], fakes: ModuleType, request: pytest.FixtureRequest,
                    spec: str, *, tmp_path: Path, s3: Any) -> None:
    """The doc's run, again: bench live against the stub (DPD), the twin's client against a slower stub, both
    folders recorded under DOC_RUN with the paths the pod would have written."""
    run, twin = request.getfixturevalue("closed_loop_run"), request.getfixturevalue("closed_loop_twin_run")
    tokenizer = request.getfixturevalue("tokenizer_dir")
    files = _as_in_the_pod(run, tokenizer, BenchmarkTarget.for_spec(default_spec()).api_base)
    seams = dataclasses.replace(_on_cluster(_cluster(fakes, run, printed=files), _upload(s3, files)),
                                predictor=_no_advisor)
    code, out, _ = run_cli(capsys, spec, *CLOSED_LOOP_TRAFFIC, "--report-dir", str(tmp_path / "recorded"),
                           seams=seams)
    assert code == 0, out  # a run whose client overhead passed its bound on a loaded machine is not the doc's
    shutil.rmtree(DOC_RUN, ignore_errors=True)
    shutil.copytree(tmp_path / "recorded" / "runs" / "dpd", DOC_RUN / "dpd")
    (DOC_RUN / "aggregated").mkdir()
    twin_router = BenchmarkTarget.for_spec(aggregated_spec(default_spec())).api_base
    for name, text in _as_in_the_pod(twin, tokenizer, twin_router).items():
        (DOC_RUN / "aggregated" / name).write_text(text, encoding="utf-8")


def test_the_docs_figures_are_a_stub_runs_report(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                 tmp_path: Path, request: pytest.FixtureRequest, *, s3: Any) -> None:
    """docs/bench.md shows the PNGs bench --report-dir draws from the recorded stub run (DOC_RUN): the same bytes
    (matplotlib is pinned), and the run folder is bench's own, its counters checked against its result files."""
    spec = _doc_spec(tmp_path)
    if os.environ.get(WRITE_DOC_RUN) == "1":
        _record_doc_run(capsys, fakes, request, spec, tmp_path=tmp_path, s3=s3)
    files = {path.name: path.read_text(encoding="utf-8") for path in sorted((DOC_RUN / "dpd").iterdir())}
    proof, why = folder_proof(files, endpoint="dpd-test")
    assert proof is not None and why is None and proof.windows  # bench wrote it, for exactly these result files
    assert not any("/tmp/pytest" in text or "127.0.0.1" in text for text in files.values())  # the pod's paths
    report = tmp_path / "report"
    code, out, err = run_cli(capsys, spec, "--results-dir", str(DOC_RUN / "dpd"), "--aggregated-results-dir",
                             str(DOC_RUN / "aggregated"), "--report-dir", str(report), "--json",
                             seams=Seams(predictor=_no_advisor))
    # the DPD folder's counters verify its levels; the twin's folder was recorded without its counters, so its
    # levels are unchecked, which alone makes the exit status 1
    runs = json.loads(out)["runs"]
    assert code == 1 and runs["dpd"]["warnings"] == [], out + err
    assert {w["code"] for w in runs["aggregated"]["warnings"]} == {"unchecked"}
    _assert_plotted_is_measured(_figures(report), json.loads(out))
    if os.environ.get(WRITE_DOC_RUN) == "1":
        for made, committed in DOC_FIGURES:
            (DOC_IMAGES / committed).write_bytes((report / made).read_bytes())
    for made, committed in DOC_FIGURES:
        assert (DOC_IMAGES / committed).read_bytes() == (report / made).read_bytes(), (
            f"docs/images/{committed} is not the report of {DOC_RUN.name}: rerun with {WRITE_DOC_RUN}=1")
    docs = DOC.read_text(encoding="utf-8")
    assert all(f"images/{committed}" in docs for _, committed in DOC_FIGURES)


# --- a results folder: one run's files, checked against its counters or marked unverified -----------------------


def _level_file(files: Mapping[str, str], concurrency: int) -> str:
    return next(name for name in files if name.endswith(".json") and f"_num_concurrency_{concurrency}_" in name)


def test_a_results_dir_without_counters_is_unverified_per_level(capsys: pytest.CaptureFixture[str],
                                                                 healthy_run: Any, tmp_path: Path) -> None:
    """Finding 4: a folder without hyperpod-dpd-counters.json is the client's word alone: one [unchecked] per level
    with why and the fix, trusted false, exit 1 (before: exit 0, trusted); capacity does not call its levels trusted
    and advise --calibrate refuses the run."""
    from hyperpod_dpd.advisor import Traffic
    from hyperpod_dpd.advisor.calibration import calibrate, parse_bench

    spec = write_spec(tmp_path, ("threshold: 4096", "threshold: 32"),
                      ("max_model_len: 16384", "max_model_len: 16384\nslo:\n  ttft_ms: 5000\n  tpot_ms: 1000"))
    code, out, _ = run_cli(capsys, spec, "--results-dir", str(healthy_run.folder), "--json")
    document = json.loads(out)
    run = document["runs"]["dpd"]
    assert code == 1 and run["trusted"] is False
    unchecked = [w for w in run["warnings"] if w["code"] == "unchecked"]
    assert [w["concurrency"] for w in unchecked] == [2, 4] and {w["code"] for w in run["warnings"]} == {"unchecked"}
    assert "the folder holds no hyperpod-dpd-counters.json" in unchecked[0]["message"]
    assert "Fix: re-run it live (hyperpod-dpd bench), or keep the hyperpod-dpd-counters.json" in \
        unchecked[0]["message"]
    (capacity,) = document["capacity_at_slo"]
    assert capacity["capacity"] == {"concurrency": 4} and capacity["trusted"] is False  # met, but unverified
    with pytest.raises(SpecError) as caught:
        calibrate(load_spec(Path(spec)), Traffic(isl=64, osl=16, concurrency=(2, 4)),
                  parse_bench(document, where="bench.json"), source="bench.json")
    refused = {p.field: p for p in caught.value.problems}
    assert "not checked against the servers" in refused["calibrate.trusted"].message


def test_a_results_dir_with_two_files_for_one_level_is_refused(capsys: pytest.CaptureFixture[str],
                                                                healthy_run: Any, tmp_path: Path,
                                                                stub_spec: str) -> None:
    """Finding 2 (B6 class): an earlier run's file for concurrency 2 beside this run's, TTFT p50 9.999 s. Before:
    exit 0, trusted, TTFT p50 9,999 ms, nothing on stderr."""
    folder = tmp_path / "run"
    shutil.copytree(healthy_run.folder, folder)
    mine = _level_file(healthy_run.files(), 2)
    stale = json.loads((folder / mine).read_text())
    stale["aggregated_metrics"]["stats"]["ttft"]["p50"] = 9.999
    other = mine.rsplit("_time_", 1)[0] + "_time_99s.json"
    (folder / other).write_text(json.dumps(stale))
    code, out, err = run_cli(capsys, stub_spec, "--results-dir", str(folder), "--json")
    assert code == 2 and json.loads(out)["exit_status"] == 2, out  # --json: the refusal as JSON, nothing else
    assert f"two result files for concurrency 2: {mine} and {other}" in json.loads(out)["error"]
    assert f"two result files for concurrency 2: {mine} and {other}" in err and "Fix: move the file" in err


def test_a_results_folder_copied_from_s3_reads_only_the_files_its_manifest_names(
        capsys: pytest.CaptureFixture[str], healthy_run: Any, tmp_path: Path, stub_spec: str) -> None:
    """The run's S3 folder copied down holds its upload manifest: an earlier run's object under the same run id is
    ignored, by name, and this run's level is the one reported."""
    folder = tmp_path / "s3-copy"
    shutil.copytree(healthy_run.folder, folder)
    files = healthy_run.files()
    (folder / UPLOAD_MANIFEST).write_text("\n".join(sorted(files)) + "\n")
    mine = _level_file(files, 2)
    stale = json.loads(files[mine])
    stale["aggregated_metrics"]["stats"]["ttft"]["p50"] = 9.999
    other = mine.rsplit("_time_", 1)[0] + "_time_99s.json"
    (folder / other).write_text(json.dumps(stale))
    code, out, err = run_cli(capsys, stub_spec, "--results-dir", str(folder), "--json")
    level = json.loads(out)["runs"]["dpd"]["levels"][0]
    assert code == 1 and level["concurrency"] == 2  # 1: no counters in the folder (unchecked)
    assert level["ttft_s"]["p50"] == json.loads(files[mine])["aggregated_metrics"]["stats"]["ttft"]["p50"] != 9.999
    _, _, err = run_cli(capsys, stub_spec, "--results-dir", str(folder))  # notes go to stderr without --json
    assert f"ignored 1 file(s) that its {UPLOAD_MANIFEST} does not name as the run's ({other})" in err


def test_a_results_dir_with_a_cut_file_reports_the_other_levels(capsys: pytest.CaptureFixture[str],
                                                                 healthy_run: Any, tmp_path: Path,
                                                                 stub_spec: str) -> None:
    """Finding 5: as a live run does, a folder whose level file is cut mid-JSON reports the other levels and the
    cut one as not run, naming the file (before: exit 2, no report)."""
    folder = tmp_path / "cut"
    shutil.copytree(healthy_run.folder, folder)
    cut = _level_file(healthy_run.files(), 2)
    (folder / cut).write_text(healthy_run.files()[cut][:500])
    code, out, _ = run_cli(capsys, stub_spec, "--results-dir", str(folder), "--json")
    run = json.loads(out)["runs"]["dpd"]
    assert code == 1 and _levels(out) == [4] and run["not_run"] == [2]
    (missing,) = [w for w in run["warnings"] if w["code"] == "level-not-run"]
    assert missing["concurrency"] == 2 and f"{cut}: not JSON" in missing["message"]


def test_a_live_run_whose_client_json_is_cut_reports_the_other_levels(capsys: pytest.CaptureFixture[str],
                                                                      fakes: ModuleType, healthy_run: Any,
                                                                      stub_spec: str) -> None:
    """Finding 5 (M7's live wiring): the Job's log cut a level's file and nothing was uploaded; the other level is
    reported with its proof, the cut one as not run with why (collect(..., tolerant=True) in the live run)."""
    files = healthy_run.files()
    cut = _level_file(files, 2)
    seams = _on_cluster(_cluster(fakes, healthy_run, printed={**files, cut: files[cut][:500]}), S3Seam())
    code, out, err = run_cli(capsys, stub_spec, *STUB_TRAFFIC, "--no-upload", "--json", seams=seams)
    run = json.loads(out)["runs"]["dpd"]
    assert code == 1 and _levels(out) == [4] and run["not_run"] == [2], err
    (missing,) = [w for w in run["warnings"] if w["code"] == "level-not-run"]
    assert missing["concurrency"] == 2 and f"{cut}: not JSON" in missing["message"]
    assert [row["concurrency"] for row in run["routing"]] == [4]  # the other level still checked on its counters

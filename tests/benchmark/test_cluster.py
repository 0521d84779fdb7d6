"""Apply, wait, collect and clean up, against recorded Kubernetes answers and a fake clock.

The publish and benchmark scripts of the Job are run for real with ``sh`` on genai-bench's real
output, so the log the cluster would return is the log these scripts print.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import FakeClock

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.cluster import job_check, parse_job_log, run_job
from hyperpod_dpd.benchmark.run.job import JobOptions, render_benchmark_job
from hyperpod_dpd.benchmark.run.results import collect, read_directory
from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.clients.kube import KubeError
from hyperpod_dpd.clients.wait import Waiter
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec import DpdSpec

RUN = "20261201-0300"
NAME = f"bench-dpd-test-{RUN}"
LEVELS = (2, 4)
LOADS = tuple(Load(concurrency=level) for level in LEVELS)


def manifests(spec: DpdSpec) -> list[dict[str, Any]]:
    return render_benchmark_job(BenchmarkTarget.for_spec(spec), Scenario(
        concurrency=LEVELS, requests=8, max_seconds=60, client=Client.GENAI_BENCH), JobOptions(run_id=RUN))


def container_script(spec: DpdSpec, name: str) -> str:
    pod = next(m for m in manifests(spec) if m["kind"] == "Job")["spec"]["template"]["spec"]
    (found,) = [c for c in [*pod["initContainers"], *pod["containers"]] if c["name"] == name]
    script: str = found["command"][2]
    return script


def publish_log(spec: DpdSpec, results: Path, tmp_path: Path, exit_code: int) -> str:
    """Run the publish container's script on a results folder laid out as in the pod."""
    root = tmp_path / "results"
    (root / RUN).mkdir(parents=True)
    for path in results.glob("*.json"):
        (root / RUN / path.name).write_bytes(path.read_bytes())
    (root / "logs").mkdir()
    (root / "logs" / "genai_bench.log").write_text("line 1\nERROR: all requests failed\n")
    (root / "exit-code").write_text(f"{exit_code}\n")
    script = container_script(spec, "publish").replace("/results", str(root))
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False,
                          env={"RUN_ID": RUN, "PATH": "/bin:/usr/bin"})
    assert done.returncode == exit_code, done.stderr
    return done.stdout


def test_the_publish_log_carries_every_result_file(spec: DpdSpec, healthy_run: Any, tmp_path: Path) -> None:
    log = parse_job_log(publish_log(spec, healthy_run.folder, tmp_path, 0))
    assert log.exit_code == 0 and log.log_tail == ""
    assert collect(log.files, expected=LOADS) == read_directory(healthy_run.folder, expected=LOADS)


def test_a_failed_genai_bench_run_prints_its_log_tail(spec: DpdSpec, failing_run: Any, tmp_path: Path) -> None:
    log = parse_job_log(publish_log(spec, failing_run.folder, tmp_path, 1))
    assert log.exit_code == 1 and "all requests failed" in log.log_tail
    assert collect(log.files, expected=LOADS).missing == (Load(concurrency=4),)


@pytest.mark.parametrize("code", [0, 3])
def test_the_benchmark_script_records_genai_bench_exit_code(spec: DpdSpec, tmp_path: Path, code: int) -> None:
    """It always exits 0 (so publish runs), runs genai-bench once per level with a quiet window before
    the first and after each, stops after a failed level, and leaves genai-bench's code for publish."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "genai-bench").write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/args"\nexit {code}\n')
    (bin_dir / "genai-bench").chmod(0o755)
    (tmp_path / "results").mkdir()
    pod = next(m for m in manifests(spec) if m["kind"] == "Job")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["initContainers"][1]["env"]}
    script = container_script(spec, "benchmark").replace("/results", str(tmp_path / "results"))
    done = subprocess.run(["sh", "-c", script, "genai-bench", "benchmark", "--traffic-scenario", "D(4352,256)"],
                          capture_output=True, text=True, check=False,
                          env={**env, "QUIET_SECONDS": "0",
                               "PATH": f"{bin_dir}:{os.environ.get('PATH', '/bin:/usr/bin')}"})
    assert done.returncode == 0
    assert (tmp_path / "results" / "exit-code").read_text().strip() == str(code)
    runs = (tmp_path / "args").read_text().splitlines()
    expected = ["benchmark --traffic-scenario D(4352,256) --num-concurrency 2 --spawn-rate 1",
                "benchmark --traffic-scenario D(4352,256) --num-concurrency 4 --spawn-rate 1"]
    assert runs == (expected if code == 0 else expected[:1])
    marks = [line for line in done.stdout.splitlines() if line.startswith("### hyperpod-dpd-bench")]
    assert marks == (["### hyperpod-dpd-bench quiet=0", "### hyperpod-dpd-bench level=2",
                      "### hyperpod-dpd-bench quiet=1", "### hyperpod-dpd-bench level=4",
                      "### hyperpod-dpd-bench quiet=2"] if code == 0 else
                     ["### hyperpod-dpd-bench quiet=0", "### hyperpod-dpd-bench level=2",
                      "### hyperpod-dpd-bench quiet=1"])


def _waiter(fakes: ModuleType, clock: Any, timeout: float = 600) -> Waiter:
    return Waiter(timeout=timeout, poll_interval=15, clock=clock, sleep=clock.sleep)


def test_run_waits_collects_and_deletes(spec: DpdSpec, fakes: ModuleType, healthy_run: Any, tmp_path: Path) -> None:
    text = publish_log(spec, healthy_run.folder, tmp_path, 0)
    fetching = fakes.pod(f"{NAME}-x", init=[fakes.container("fetch-tokenizer", "running")], main=[])
    running = fakes.pod(f"{NAME}-x", init=[fakes.container("fetch-tokenizer", "terminated"),
                                           fakes.container("benchmark", "running")], main=[])
    finished = fakes.pod(f"{NAME}-x", phase="Succeeded", init=[], main=[fakes.container("publish", "terminated")])
    batch = fakes.FakeBatch(states=[fakes.job(NAME), fakes.job(NAME), fakes.job(NAME, condition="Complete")])
    core = fakes.FakeCore(pods=[[fetching], [running], [finished]], logs={"publish": text})
    clock = FakeClock()
    outcome = run_job(fakes.benchmark_kube(batch, core), manifests(spec), waiter=_waiter(fakes, clock))
    assert outcome.succeeded and outcome.check.status is Status.PASS
    assert clock.slept == [15, 15]
    assert [kind["kind"] for _, kind in batch.created] == ["Job"] and core.accounts[0][0] == "default"
    assert batch.deleted == [("default", NAME, "Background")]
    assert collect(outcome.log.files, expected=LOADS).levels == read_directory(healthy_run.folder).levels


def test_progress_names_the_step(spec: DpdSpec, fakes: ModuleType) -> None:
    running = fakes.pod(f"{NAME}-x", init=[fakes.container("fetch-tokenizer", "terminated"),
                                           fakes.container("benchmark", "running")], main=[])
    kube = fakes.benchmark_kube(fakes.FakeBatch(states=[fakes.job(NAME)]), fakes.FakeCore(pods=[[running]]))
    check = job_check(kube, "default", NAME)
    assert not check.settled and "benchmark running" in check.detail


@pytest.mark.parametrize(("reason", "message", "expected"), [
    ("ImagePullBackOff", 'Back-off pulling image "mirror.local/python:3.11"', "check --image"),
    ("ErrImagePull", "failed to resolve reference", "cannot be pulled"),
    ("CrashLoopBackOff", "back-off 5m0s restarting failed container", "keeps crashing"),
])
def test_a_pod_that_can_never_run_ends_the_run_at_once(spec: DpdSpec, fakes: ModuleType, reason: str, message: str,
                                                       expected: str) -> None:
    """No waiting for the deadline (1 h 53 min by default): the first poll settles it, with the pod's reason."""
    stuck = fakes.pod(f"{NAME}-x", init=[fakes.container("benchmark", "waiting", reason=reason, message=message)],
                      main=[])
    batch = fakes.FakeBatch(states=[fakes.job(NAME)])
    clock = FakeClock()
    outcome = run_job(fakes.benchmark_kube(batch, fakes.FakeCore(pods=[[stuck]])), manifests(spec),
                      waiter=_waiter(fakes, clock))
    assert outcome.check.status is Status.FAIL and outcome.check.settled and clock.slept == []
    assert reason in outcome.check.detail and message in outcome.check.detail and expected in outcome.check.detail
    assert batch.deleted == [("default", NAME, "Background")]


def test_an_unschedulable_pod_ends_the_run_after_a_short_bound(spec: DpdSpec, fakes: ModuleType) -> None:
    message = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    pending = fakes.pod(f"{NAME}-x", init=[], main=[], unschedulable=message)
    batch = fakes.FakeBatch(states=[fakes.job(NAME)])
    clock = FakeClock()
    outcome = run_job(fakes.benchmark_kube(batch, fakes.FakeCore(pods=[[pending]])), manifests(spec),
                      waiter=_waiter(fakes, clock, timeout=7000))
    assert outcome.check.status is Status.FAIL and "still not ready" not in outcome.check.detail
    assert 300 <= sum(clock.slept) <= 315 and message in outcome.check.detail
    assert "--node-selector" in outcome.check.detail


def test_a_briefly_pending_pod_is_waited_for(spec: DpdSpec, fakes: ModuleType) -> None:
    pending = fakes.pod(f"{NAME}-x", init=[], main=[], unschedulable="0/3 nodes: Insufficient cpu")
    batch = fakes.FakeBatch(states=[fakes.job(NAME), fakes.job(NAME), fakes.job(NAME, condition="Complete")])
    core = fakes.FakeCore(pods=[[pending], [pending], [pending], [pending],
                                [fakes.pod(f"{NAME}-x", init=[], main=[fakes.container("publish", "terminated")])]],
                          logs={"publish": "### hyperpod-dpd-bench exit=0\n"})
    outcome = run_job(fakes.benchmark_kube(batch, core), manifests(spec), waiter=_waiter(fakes, FakeClock()))
    assert outcome.succeeded


def test_a_failed_tokenizer_copy_reports_its_log(spec: DpdSpec, fakes: ModuleType) -> None:
    failed_pod = fakes.pod(f"{NAME}-x", phase="Failed", init=[
        fakes.container("fetch-tokenizer", "terminated", exit_code=1, reason="Error")], main=[])
    batch = fakes.FakeBatch(states=[fakes.job(NAME, condition="Failed", reason="BackoffLimitExceeded",
                                              message="Job has reached the specified backoff limit")])
    core = fakes.FakeCore(pods=[[failed_pod]], logs={
        "fetch-tokenizer": "fatal error: An error occurred (AccessDenied) when calling the ListObjectsV2 operation"})
    outcome = run_job(fakes.benchmark_kube(batch, core), manifests(spec), waiter=_waiter(fakes, FakeClock()))
    assert not outcome.succeeded and outcome.check.status is Status.FAIL
    assert "BackoffLimitExceeded" in outcome.check.detail
    assert "fetch-tokenizer exited 1" in outcome.diagnostics and "AccessDenied" in outcome.diagnostics
    assert core.log_reads == ["fetch-tokenizer"] and batch.deleted


def test_a_timeout_deletes_the_job_so_the_load_stops(spec: DpdSpec, fakes: ModuleType) -> None:
    running = fakes.pod(f"{NAME}-x", init=[fakes.container("benchmark", "running")], main=[])
    batch = fakes.FakeBatch(states=[fakes.job(NAME)])
    clock = FakeClock()
    outcome = run_job(fakes.benchmark_kube(batch, fakes.FakeCore(pods=[[running]])), manifests(spec),
                      waiter=_waiter(fakes, clock, timeout=60))
    assert outcome.check.status is Status.FAIL and "still not ready after 60s" in outcome.check.detail
    assert sum(clock.slept) == 60 and batch.deleted == [("default", NAME, "Background")]
    assert "stops loading the endpoint" in outcome.diagnostics


def test_keep_leaves_the_job(spec: DpdSpec, fakes: ModuleType) -> None:
    batch = fakes.FakeBatch(states=[fakes.job(NAME, condition="Complete")])
    core = fakes.FakeCore(pods=[[fakes.pod(f"{NAME}-x", init=[], main=[fakes.container("publish", "terminated")])]],
                          logs={"publish": "### hyperpod-dpd-bench exit=0\n"})
    run_job(fakes.benchmark_kube(batch, core), manifests(spec), waiter=_waiter(fakes, FakeClock()), keep=True)
    assert batch.deleted == []


def test_an_existing_service_account_is_kept_and_an_existing_job_refused(spec: DpdSpec, fakes: ModuleType) -> None:
    core = fakes.FakeCore(pods=[[]], account_error=fakes.api_error(409, "exists"))
    batch = fakes.FakeBatch(states=[fakes.job(NAME)], create_error=fakes.api_error(409, "exists"))
    with pytest.raises(KubeError, match="another --run-id"):
        run_job(fakes.benchmark_kube(batch, core), manifests(spec), waiter=_waiter(fakes, FakeClock()))
    assert batch.deleted == []  # nothing of ours to delete


def test_the_stacks_service_account_is_used_without_creating_one(spec: DpdSpec, fakes: ModuleType) -> None:
    """A user who may create Jobs but not ServiceAccounts runs with the stack's (audit C6)."""
    existing = {"metadata": {"name": "hyperpod-dpd-bench", "namespace": "default"}}
    core = fakes.FakeCore(pods=[[]], accounts=[("default", existing)],
                          account_error=fakes.api_error(403, "serviceaccounts is forbidden"))
    batch = fakes.FakeBatch(states=[fakes.job(NAME, condition="Complete")])
    run_job(fakes.benchmark_kube(batch, core), manifests(spec), waiter=_waiter(fakes, FakeClock()))
    assert core.accounts == [("default", existing)] and [ns for ns, _ in batch.created] == ["default"]


def test_forbidden_is_one_line_naming_rbac(spec: DpdSpec, fakes: ModuleType) -> None:
    core = fakes.FakeCore(pods=[[]], account_error=fakes.api_error(403, 'serviceaccounts is forbidden'))
    with pytest.raises(KubeError, match=r"forbidden .*RBAC"):
        run_job(fakes.benchmark_kube(fakes.FakeBatch(states=[]), core), manifests(spec),
                waiter=_waiter(fakes, FakeClock()))

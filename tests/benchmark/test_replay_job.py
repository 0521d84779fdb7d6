"""The replay Job: valid Kubernetes, bench's own pod with the trace mounted and aiperf's fixed schedule, snapshotted."""

from __future__ import annotations

import base64
import gzip
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from syrupy.assertion import SnapshotAssertion

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.replay.replay import Replay, plan_replay
from hyperpod_dpd.benchmark.replay.replay_job import SLEEP_OUT, render_replay_job, replay_deadline_seconds
from hyperpod_dpd.benchmark.run.job import JobOptions, render_benchmark_job
from hyperpod_dpd.benchmark.run.scenario import arrival_seed
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.traces import Trace, TraceRequest

RUN = "20261201-0300"
KubeErrors = Callable[[str, Any], list[str]]


def replay() -> Replay:
    """Three windows of a minute: two requests (one with prefix hashes), none, one."""
    requests = (TraceRequest(at_s=0.0, input_tokens=5000, output_tokens=200, prefix_blocks=tuple(range(10))),
                TraceRequest(at_s=30.5, input_tokens=1000, output_tokens=50),
                TraceRequest(at_s=150.0, input_tokens=6000, output_tokens=300))
    return plan_replay(Trace(requests=requests, source="day.jsonl (mooncake)", block_tokens=512), window_s=60.0)


def rendered(spec: DpdSpec) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in render_replay_job(BenchmarkTarget.for_spec(spec), replay(), JobOptions(run_id=RUN))}


def benchmark(job: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in job["spec"]["template"]["spec"]["initContainers"]
                                 if c["name"] == "benchmark")
    return found


def test_the_config_map_service_account_and_job_are_valid_kubernetes(spec: DpdSpec,
                                                                      kubernetes_errors: KubeErrors) -> None:
    objects = rendered(spec)
    assert list(objects) == ["ConfigMap", "ServiceAccount", "Job"]
    assert kubernetes_errors("io.k8s.api.core.v1.ConfigMap", objects["ConfigMap"]) == []
    assert kubernetes_errors("io.k8s.api.batch.v1.Job", objects["Job"]) == []


def test_the_pod_is_bench_s_own_with_the_trace_mounted_read_only(spec: DpdSpec) -> None:
    objects = rendered(spec)
    trace = objects["ConfigMap"]
    assert trace["metadata"]["name"] == f"bench-dpd-test-{RUN}-trace"
    assert sorted(trace["binaryData"]) == ["window-0.jsonl.gz", "window-2.jsonl.gz"]  # the empty window has none
    job, level_job = objects["Job"], next(o for o in render_benchmark_job(
        BenchmarkTarget.for_spec(spec), Scenario(request_rates=(1.0,)), JobOptions(run_id=RUN)) if o["kind"] == "Job")
    pod, level_pod = job["spec"]["template"]["spec"], level_job["spec"]["template"]["spec"]
    assert {"name": "trace", "configMap": {"name": trace["metadata"]["name"]}} in pod["volumes"]
    assert {"mountPath": "/trace", "name": "trace", "readOnly": True} in benchmark(job)["volumeMounts"]
    # everything else is the level Job's: the other containers, the security context, the node placement
    assert pod["containers"] == level_pod["containers"] and pod["initContainers"][0] == level_pod["initContainers"][0]
    assert pod["securityContext"] == level_pod["securityContext"] and pod["affinity"] == level_pod["affinity"]
    assert job["spec"]["activeDeadlineSeconds"] == replay_deadline_seconds(replay()) == 900 + 3 * (60 + 60) + 4 * 40


def test_each_window_runs_aiperf_s_fixed_schedule_on_its_own_file(spec: DpdSpec) -> None:
    container = benchmark(rendered(spec)["Job"])
    args, script = container["args"], container["command"][2]
    flags = ["--custom-dataset-type", "mooncake_trace", "--fixed-schedule", "--fixed-schedule-start-offset", "0",
             "--isl-block-size", "512", "--extra-inputs", "ignore_eos:true"]
    start = args.index("--custom-dataset-type")
    assert args[start:start + len(flags)] == flags
    # a level's shape is gone: no fixed lengths, no rate, no bound (the trace ends the run)
    assert not {"--isl", "--osl", "--arrival-pattern", "--benchmark-duration", "--request-rate"} & set(args)
    assert args[:2] == ["profile", "--model"] and "--use-legacy-max-tokens" in args and "records" in args
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["LEVELS"] == " ".join(f"{i}:{n}:60:{arrival_seed(RUN, i)}" for i, n in ((0, 2), (1, 0), (2, 1)))
    assert "LEVELS_JSON" not in env
    assert '--input-file "$file" --random-seed "${rest##*:}"' in script
    assert '"/trace/window-$window.jsonl.gz"' in script and 'sleep "$seconds"' in script
    assert 'aiperf_window_$window.jsonl' in script


def test_rendering_is_deterministic_and_snapshotted(spec: DpdSpec, snapshot: SnapshotAssertion) -> None:
    """The snapshot shows each window file as the Mooncake rows it holds (the gzip bytes are zlib's to choose)."""
    first = yaml.safe_dump_all(list(rendered(spec).values()), sort_keys=False)
    assert first == yaml.safe_dump_all(list(rendered(spec).values()), sort_keys=False)
    objects = rendered(spec)
    objects["ConfigMap"]["binaryData"] = {name: gzip.decompress(base64.b64decode(data)).decode()
                                          for name, data in objects["ConfigMap"]["binaryData"].items()}
    assert yaml.safe_dump_all(list(objects.values()), sort_keys=False, width=1000) == snapshot


def test_a_window_that_ends_early_sleeps_out_its_length_from_aiperfs_start(tmp_path: Path) -> None:
    """The pod's step after a window's aiperf run (in the script as rendered): from the summary's start_time, the
    schedule's zero, it sleeps until the window's length has passed; without a summary it does not sleep."""
    script = benchmark(rendered(default_spec())["Job"])["command"][2]
    assert f"python3 -c {shlex.quote(SLEEP_OUT)} \"$out/profile_export_aiperf.json\" \"$seconds\"" in script
    summary = tmp_path / "profile_export_aiperf.json"
    summary.write_text(json.dumps({"start_time": (datetime.now() - timedelta(seconds=1.0)).isoformat()}))
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", SLEEP_OUT, str(summary), "1.6"], check=True, timeout=10)
    # the window began 1 s ago, so 0.6 s are left; 0.4 s for the interpreter's start on a loaded machine
    assert 0.55 <= time.monotonic() - began < 1.0
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", SLEEP_OUT, str(tmp_path / "missing.json"), "30"], check=True, timeout=10)
    assert time.monotonic() - began < 5  # no summary: aiperf failed, nothing to sleep out

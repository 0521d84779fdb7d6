"""``bench --trace`` end to end: the rendered replay Job's benchmark container, real aiperf, against the stub.

A tiny trace (40 s of trace time at ten times its speed, cut into windows of 3 s of the replay): a first request
too long for the model (left out, so the first window is empty: the pod pauses its length and the next window is
read between the pauses after it), then a dense window of 30 requests, long and short prompts mixed (20 long:
enough for a proof), four of them sharing one prefix hash, the first a second after the window's start. The window
files travel as the ConfigMap's bytes (mounted here as a folder), the stub's router and decoder counters are read
in each quiet pause as ``bench`` reads them, and every per-window number is held against what the stub itself
recorded. It is one aiperf run (40-65 s of fixture on a loaded two-core machine, most of it aiperf's start-up),
once per session, and every test of the replay reads it; a sparse window's proof is read from recorded files
(test_replay.py).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from support import FakeClock, run_bench

from hyperpod_dpd.benchmark import BenchmarkTarget
from hyperpod_dpd.benchmark.proof.disaggregation import DpdCounters
from hyperpod_dpd.benchmark.proof.overhead import BOUND_S, quantile
from hyperpod_dpd.benchmark.replay import replay as replay_module
from hyperpod_dpd.benchmark.replay.replay import Replay, plan_replay
from hyperpod_dpd.benchmark.replay.replay_job import TRACE_MOUNT, render_replay_job
from hyperpod_dpd.benchmark.replay.replay_proof import ReplayReport, WindowResult, window_results
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.job import BENCHMARK_CONTAINER, JobOptions
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.traces import Trace, TraceRequest, write_mooncake

HERE = Path(__file__).resolve().parent
RUN_ID = "20261201-0300"
THRESHOLD = 32  # the stub router's (words), as the spec's routing.threshold
LONG, SHORT = 64, 8  # tokens (words with the suite's word-level tokenizer): above and below the threshold
SPEEDUP, WINDOW_S = 10.0, 3.0
MAX_MODEL_LEN = 4096  # the fixture's; the default spec's (the command's) is larger, and both leave out TOO_LONG
TOO_LONG = 1_000_000  # input tokens no model holds: the trace's first row, left out
SHARED_HASH = 7
FIRST_S = 1.0  # the dense window's first request, from the window's start on the replay clock
DENSE = 30  # its requests: 20 long, 10 short


def tiny_trace() -> Trace:
    """A request too long for any model at 0 s, then 30 requests from 40 s of trace time (every third one short,
    four long ones sharing a prefix hash)."""
    start = (WINDOW_S + FIRST_S) * SPEEDUP
    dense = [TraceRequest(at_s=round(start + 0.6 * i, 3), input_tokens=SHORT if i % 3 == 2 else LONG,
                          output_tokens=8 + i % 5, prefix_blocks=(SHARED_HASH,) if i in (0, 6, 12, 18) else ())
             for i in range(DENSE)]
    return Trace(requests=(TraceRequest(at_s=0.0, input_tokens=TOO_LONG, output_tokens=8), *dense),
                 source="tiny.jsonl (mooncake)", block_tokens=512)


def replay_container(replay: Replay) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The replay Job's benchmark container, and the window files its ConfigMap carries (decoded from it)."""
    objects = render_replay_job(BenchmarkTarget.for_spec(default_spec()), replay, JobOptions(run_id=RUN_ID))
    trace = next(o for o in objects if o["kind"] == "ConfigMap")
    files = {name: base64.b64decode(data) for name, data in trace["binaryData"].items()}
    pod = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]
    return next(c for c in pod["initContainers"] if c["name"] == BENCHMARK_CONTAINER), files


@pytest.fixture(scope="session")
def replayed(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path,
             stub_runner: Any) -> Iterator[tuple[Any, Replay]]:
    replay = plan_replay(tiny_trace(), speedup=SPEEDUP, window_s=WINDOW_S, max_model_len=MAX_MODEL_LEN)
    container, files = replay_container(replay)
    base = tmp_path_factory.mktemp("replay")
    mounted = base / "trace"
    mounted.mkdir()
    for name, data in files.items():
        (mounted / name).write_bytes(data)
    behaviour = stub_runner.Behaviour(first_token_s=0.05, per_token_s=0.005, routing_threshold=THRESHOLD,
                                      ttft_buckets=stub_runner.router_buckets)
    yield stub_runner.run_client(behaviour, tokenizer_dir, base, container=container,
                                 mounts={TRACE_MOUNT: str(mounted)}, client=Client.AIPERF), replay
    shutil.rmtree(base, ignore_errors=True)


def results(replayed: tuple[Any, Replay]) -> list[WindowResult]:
    run, replay = replayed
    taken = {window: DpdCounters.parse([router], [decoder]) for window, (router, decoder) in run.metrics.items()}
    return window_results(replay, run.files(), taken, threshold=THRESHOLD)


def test_the_trace_is_cut_into_the_windows_it_names() -> None:
    replay = plan_replay(tiny_trace(), speedup=SPEEDUP, window_s=WINDOW_S, max_model_len=MAX_MODEL_LEN)
    assert [len(w.requests) for w in replay.windows] == [0, DENSE] and replay.too_long == 1
    assert [w.start_s for w in replay.windows] == [0.0, 3.0]
    assert [w.trace_start_s for w in replay.windows] == [0.0, 30.0]
    assert round(replay.windows[1].requests[0].at_s, 6) == FIRST_S  # from the window's start
    assert replay.windows[1].arrivals_per_s == 10.0


def test_every_window_ran_and_the_stub_counted_each_path(replayed: tuple[Any, Replay]) -> None:
    run, _ = replayed
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    empty, dense = results(replayed)
    assert run.served == DENSE  # every request of the trace, nothing else (no readiness probe, no warm-up)
    assert sorted(run.metrics) == [0, 1, 2]  # a pause before each window and after the last
    assert dense.level is not None and (dense.level.completed, dense.level.failed) == (DENSE, 0)
    assert dense.routing is not None and (dense.routing.disaggregated, dense.routing.local) == (20, 10)
    assert (dense.expected.above, dense.expected.below, dense.expected.near) == (20, 10, 0)
    assert dense.disaggregated_share == dense.direct_share == 1.0
    assert dense.routing.external_kv_tokens == 20 * LONG  # the stub's decoder: a disaggregated prompt's words
    assert dense.warnings == () and dense.unverified is None
    assert empty.level is None and empty.routing is None and empty.unverified == "no request in this window"


def test_the_client_latencies_per_window_match_the_stubs_own(replayed: tuple[Any, Replay]) -> None:
    run, _ = replayed
    _, dense = results(replayed)
    # the stub's own TTFT of each window's requests: those between the window's two quiet pauses
    by_window = run.server_ttfts_by_level()
    assert [len(ttfts) for ttfts in by_window] == [0, DENSE]
    level = dense.level
    assert level is not None and level.ttft.p90 is not None and level.tpot.p90 is not None
    truth = quantile(by_window[1], 0.9)
    assert truth is not None
    # the client's p90 is the server's plus the client's own time, which bench bounds at BOUND_S
    assert truth <= level.ttft.p90 < truth + BOUND_S, (level.ttft.p90, truth)
    assert 0.005 <= level.tpot.p90 < 0.015  # the stub's 5 ms per token, plus scheduling on a shared machine
    assert level.mean_output_tokens == sum(r.output_tokens for r in dense.window.requests) / len(
        dense.window.requests)  # ignore_eos: each answer is the trace's output_length


def test_arrivals_follow_the_trace_on_the_replay_clock_from_the_windows_start(replayed: tuple[Any, Replay]) -> None:
    """Each request leaves at its offset from the window's start, the first a second in: aiperf's schedule zero is
    the window's start (``--fixed-schedule-start-offset 0``), not the first request, as its auto-offset would make
    it. The zero is the profiling phase's start, the summary's ``start_time`` (aiperf==0.13.0
    exporters/metrics_json_exporter.py:60-63, ``datetime.fromtimestamp`` of the phase's start; the schedule is
    ``started_at_perf_sec`` plus each offset, timing/strategies/fixed_schedule.py:67-73)."""
    run, replay = replayed
    start = datetime.fromisoformat(json.loads((run.folder / "aiperf_window_1.json").read_text())["start_time"])
    records = [json.loads(line) for line in (run.folder / "aiperf_window_1.jsonl").read_text().splitlines() if line]
    issued = sorted(r["metadata"]["credit_issued_ns"] / 1e9 - start.timestamp() for r in records)
    wanted = [r.at_s for r in replay.windows[1].requests]
    assert wanted[0] == pytest.approx(FIRST_S)
    # 50 ms: aiperf schedules to the millisecond; its one event loop shares two cores with the stub and other jobs
    # (its start_time is printed to the microsecond)
    assert all(abs(got - want) < 0.05 for got, want in zip(issued, wanted, strict=True)), (issued, wanted)


def test_a_prefix_hash_is_the_same_text_wherever_it_repeats_in_a_window(replayed: tuple[Any, Replay]) -> None:
    run, _ = replayed
    long_prompts = [p for p in run.prompts_by_level()[1] if len(p.split()) == LONG]
    assert len(long_prompts) == 20
    counts = sorted((long_prompts.count(p) for p in set(long_prompts)), reverse=True)
    assert counts == [4] + [1] * 16  # the four rows with hash 7 sent one prompt; every other row its own


def test_the_report_carries_the_emulators_fields_per_window(replayed: tuple[Any, Replay]) -> None:
    _, replay = replayed
    windows = results(replayed)
    report = ReplayReport(endpoint="dpd-test", replay=replay, windows=windows, threshold=THRESHOLD)
    document = json.loads(report.to_json())
    assert report.healthy and document["trusted"] is True
    rows = document["windows"]
    assert [row["window_start_s"] for row in rows] == [0.0, 3.0]
    assert [row["arrivals_per_s"] for row in rows] == [0.0, 10.0]
    assert rows[1]["ttft_p90_s"] == windows[1].level.ttft.p90 and rows[1]["tpot_p90_s"] == windows[1].level.tpot.p90
    assert rows[0]["ttft_p90_s"] is None  # an empty window has no latency, not a zero
    assert [row["verified"] for row in rows] == [False, True]
    assert rows[1]["server"]["disaggregated"] == 20 and rows[1]["server"]["local"] == 10
    # docs/commands.md names every field of the object, of its replay and of each window
    line = next(row for row in (HERE.parents[1] / "docs" / "commands.md").read_text().splitlines()
                if row.startswith("| `bench --trace` |"))
    named = set(re.findall(r'"(\w+)"', line))
    assert set(document) | set(document["replay"]) | set(rows[1]) <= named
    table = report.render()
    assert "1 requests longer than max_model_len were left out" in table
    assert [line.split()[-1] for line in table.splitlines()[4:6]] == ["unverified", "ok"]  # title 2 lines, blank


# --- the command ---------------------------------------------------------------------------------------------------

run_cli = run_bench


@pytest.fixture
def trace_file(tmp_path: Path) -> str:
    path = tmp_path / "tiny.jsonl"
    write_mooncake(tiny_trace(), path)
    return str(path)


REPLAY = ("--trace-speedup", str(SPEEDUP), "--trace-window", str(WINDOW_S), "--run-id", RUN_ID)


def test_a_replay_on_the_cluster_proves_each_window_and_cleans_up(capsys: pytest.CaptureFixture[str],
                                                                   fakes: ModuleType, replayed: tuple[Any, Replay],
                                                                   stub_spec: str, trace_file: str) -> None:
    """The replay's own run, as a recorded cluster answers it: the ConfigMap created with the windows' files and
    deleted after the Job, the counters read in every pause, the windows reported as the run wrote them."""
    run, replay = replayed
    kube = fakes.recorded_cluster(run, name=f"bench-dpd-test-{RUN_ID}")
    clock = FakeClock()

    def no_s3(region: str | None, profile: str | None) -> Any:
        raise AssertionError("--no-upload: S3 is never read")

    seams = Seams(benchmark_kube=lambda context, config: kube, aws_clients=no_s3, clock=clock, sleep=clock.sleep)
    code, out, err = run_cli(capsys, stub_spec, "--trace", trace_file, *REPLAY, "--no-upload", "--json", seams=seams)
    assert code == 0, err
    ((namespace, made),) = kube.core.config_maps
    assert (namespace, made["metadata"]["name"]) == ("default", f"bench-dpd-test-{RUN_ID}-trace")
    assert {name: base64.b64decode(data) for name, data in made["binaryData"].items()} == replay_container(replay)[1]
    assert kube.core.deleted_config_maps == [("default", f"bench-dpd-test-{RUN_ID}-trace")]
    assert kube.batch.deleted == [("default", f"bench-dpd-test-{RUN_ID}", "Background")]
    document = json.loads(out)
    replayed_as = document["replay"]
    assert trace_file in replayed_as.pop("source")  # the reader's name for what it read
    assert replayed_as == {"speedup": SPEEDUP, "window_s": WINDOW_S, "windows": 2, "requests": DENSE, "too_long": 1}
    assert [w["server"]["disaggregated"] if w["server"] else None for w in document["windows"]] == [None, 20]
    assert [w["verified"] for w in document["windows"]] == [False, True] and document["trusted"] is True
    assert (document["model"], document["instance_type"]) == ("Llama-3.3-70B-Instruct", "ml.p5.48xlarge")


def test_keep_leaves_the_config_map_and_says_how_to_delete_it(capsys: pytest.CaptureFixture[str],
                                                              fakes: ModuleType, replayed: tuple[Any, Replay],
                                                              stub_spec: str, trace_file: str) -> None:
    run, _ = replayed
    kube = fakes.recorded_cluster(run, name=f"bench-dpd-test-{RUN_ID}")
    clock = FakeClock()
    seams = Seams(benchmark_kube=lambda context, config: kube, clock=clock, sleep=clock.sleep)
    code, _, err = run_cli(capsys, stub_spec, "--trace", trace_file, *REPLAY, "--no-upload", "--keep", "--json",
                           seams=seams)
    assert code == 0, err
    assert kube.core.deleted_config_maps == [] and kube.batch.deleted == []
    assert f"`kubectl delete configmap bench-dpd-test-{RUN_ID}-trace -n default`" in err


def test_render_writes_the_config_map_with_the_job(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   trace_file: str) -> None:
    out_dir = tmp_path / "out"
    code, out, _ = run_cli(capsys, "--trace", trace_file, *REPLAY, "-o", str(out_dir))
    assert code == 0
    (written,) = out.split()
    kinds = [doc["kind"] for doc in yaml.safe_load_all(Path(written).read_text())]
    assert Path(written).name == f"default-bench-dpd-test-{RUN_ID}.k8s.yaml" and kinds == [
        "ConfigMap", "ServiceAccount", "Job"]


@pytest.mark.parametrize(("extra", "message"), [
    (("--concurrency", "4"), "drop --concurrency/--request-rate"),
    (("--isl", "5000", "--aggregated"), "drop --isl, --aggregated"),
    (("--client", "genai-bench"), "drop --client"),
    (("--trace-speedup", "0"), "--trace-speedup: must be at least 0.001"),
    (("--trace-speedup", "1e-320"), "--trace-speedup: must be at least 0.001"),
    (("--trace-window", "0.1"), "--trace-window: must be at least 1 second"),
    (("--trace-window", "1e20"), "and at most 86,400 (a day)"),
])
def test_bad_replay_options_are_exit_2_with_the_fix(capsys: pytest.CaptureFixture[str], trace_file: str,
                                                    extra: tuple[str, ...], message: str) -> None:
    code, _, err = run_cli(capsys, "--trace", trace_file, *extra, "-o", "-")
    assert code == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("content", [b"", b"not a trace\n", b'{"timestamp": 0}\n', b"\x1f\x8b\x08garbage",
                                     b'{"timestamp": "x", "input_length": 1, "output_length": 1}\n'])
def test_a_bad_trace_file_is_exit_2_never_a_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      content: bytes) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    code, _, err = run_cli(capsys, "--trace", str(path), "-o", "-")
    assert code == 2 and err.strip() and "Traceback" not in err, err
    code, _, err = run_cli(capsys, "--trace", str(tmp_path / "missing.jsonl"), "-o", "-")
    assert code == 2 and "missing.jsonl" in err and "Traceback" not in err, err


def test_a_trace_too_large_for_a_config_map_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, trace_file: str) -> None:
    """The command's refusal, with the limit lowered to the tiny trace's size (test_replay.py holds the real
    limit against a trace of real size, which takes seconds to read here)."""
    size = sum(len(data) for data in replay_container(plan_replay(
        tiny_trace(), speedup=SPEEDUP, window_s=WINDOW_S, max_model_len=MAX_MODEL_LEN))[1].values())
    monkeypatch.setattr(replay_module, "CONFIG_MAP_LIMIT", size - 1)
    code, _, err = run_cli(capsys, "--trace", trace_file, *REPLAY, "-o", "-")
    assert code == 2 and f"--trace: does not fit a ConfigMap, which Kubernetes caps at {size - 1:,} bytes" in err
    assert "Fix: replay a part" in err and "Traceback" not in err, err
    monkeypatch.setattr(replay_module, "CONFIG_MAP_LIMIT", size)
    assert run_cli(capsys, "--trace", trace_file, *REPLAY, "-o", "-")[0] == 0


def test_a_user_who_may_not_create_config_maps_is_refused_before_anything(capsys: pytest.CaptureFixture[str],
                                                                          fakes: ModuleType, stub_spec: str,
                                                                          trace_file: str) -> None:
    batch = fakes.FakeBatch(states=[fakes.job(f"bench-dpd-test-{RUN_ID}")])
    core = fakes.FakeCore(pods=[[]])
    kube = fakes.benchmark_kube(batch, core, access=fakes.FakeAccess(denied=("create configmaps default",)))
    clock = FakeClock()
    seams = Seams(benchmark_kube=lambda context, config: kube, clock=clock, sleep=clock.sleep)
    code, _, err = run_cli(capsys, stub_spec, "--trace", trace_file, *REPLAY, seams=seams)
    assert code == 2 and "create configmaps in default" in err, err
    assert core.config_maps == [] and batch.created == []

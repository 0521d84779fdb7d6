"""``bench --trace`` end to end: the rendered replay Job's benchmark container, real aiperf, against the stub.

A tiny trace (a minute of trace time at ten times its speed, cut into windows of 2 s of the replay): a dense window
of 24 requests, long and short prompts mixed, four of them sharing one prefix hash; an empty window; and a sparse
window of 3 requests. The window files travel as the ConfigMap's bytes (mounted here as a folder), the stub's
router and decoder counters are read in each quiet pause as ``bench`` reads them, and every per-window number is
held against what the stub itself recorded. Real aiperf starts in about 12 s per window, so the fixture takes
30 s on an idle two-core machine and up to 100 s on a loaded one (two aiperf runs; the empty window sends nothing);
it runs once per session and every test of the replay reads it.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from support import FakeClock, run_bench

from hyperpod_dpd.benchmark import BenchmarkTarget
from hyperpod_dpd.benchmark import replay as replay_module
from hyperpod_dpd.benchmark.client import Client
from hyperpod_dpd.benchmark.disaggregation import DpdCounters
from hyperpod_dpd.benchmark.job import BENCHMARK_CONTAINER, JobOptions
from hyperpod_dpd.benchmark.overhead import BOUND_S, quantile
from hyperpod_dpd.benchmark.replay import Replay, plan_replay
from hyperpod_dpd.benchmark.replay_job import TRACE_MOUNT, render_replay_job
from hyperpod_dpd.benchmark.replay_proof import MIN_WINDOW_REQUESTS, ReplayReport, WindowResult, window_results
from hyperpod_dpd.benchmark.session import Seams
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.traces import Trace, TraceRequest, write_mooncake

HERE = Path(__file__).resolve().parent
RUN_ID = "20261201-0300"
THRESHOLD = 32  # the stub router's (words), as the spec's routing.threshold
LONG, SHORT = 64, 8  # tokens (words with the suite's word-level tokenizer): above and below the threshold
SPEEDUP, WINDOW_S = 10.0, 2.0
SHARED_HASH = 7


def tiny_trace() -> Trace:
    """24 requests in the first 20 s of trace time (every third one short, four long ones sharing a prefix hash),
    nothing for the next 20 s, and 3 requests after that."""
    dense = [TraceRequest(at_s=round(0.8 * i, 3), input_tokens=SHORT if i % 3 == 2 else LONG,
                          output_tokens=8 + i % 5, prefix_blocks=(SHARED_HASH,) if i in (0, 6, 12, 18) else ())
             for i in range(24)]
    sparse = [TraceRequest(at_s=at, input_tokens=LONG, output_tokens=10) for at in (41.0, 45.0, 50.0)]
    return Trace(requests=(*dense, *sparse), source="tiny.jsonl (mooncake)", block_tokens=512)


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
    replay = plan_replay(tiny_trace(), speedup=SPEEDUP, window_s=WINDOW_S, max_model_len=4096)
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
    replay = plan_replay(tiny_trace(), speedup=SPEEDUP, window_s=WINDOW_S)
    assert [len(w.requests) for w in replay.windows] == [24, 0, 3]
    assert [w.start_s for w in replay.windows] == [0.0, 2.0, 4.0]
    assert [w.trace_start_s for w in replay.windows] == [0.0, 20.0, 40.0]
    assert [round(r.at_s, 6) for r in replay.windows[2].requests] == [0.1, 0.5, 1.0]  # from the window's start
    assert replay.windows[0].arrivals_per_s == 12.0


def test_every_window_ran_and_the_stub_counted_each_path(replayed: tuple[Any, Replay]) -> None:
    run, _ = replayed
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    dense, empty, sparse = results(replayed)
    assert run.served == 27  # every request of the trace, nothing else (no readiness probe, no warm-up)
    assert dense.level is not None and (dense.level.completed, dense.level.failed) == (24, 0)
    assert dense.routing is not None and (dense.routing.disaggregated, dense.routing.local) == (16, 8)
    assert (dense.expected.above, dense.expected.below, dense.expected.near) == (16, 8, 0)
    assert dense.disaggregated_share == dense.direct_share == 1.0
    assert dense.routing.external_kv_tokens == 16 * LONG  # the stub's decoder: a disaggregated prompt's words
    assert dense.warnings == () and dense.unverified is None
    assert empty.level is None and empty.routing is None and empty.unverified == "no request in this window"
    assert sparse.level is not None and sparse.level.completed == 3
    assert sparse.routing is not None and sparse.routing.disaggregated == 3 and sparse.warnings == ()
    assert sparse.unverified is not None and f"under {MIN_WINDOW_REQUESTS}" in sparse.unverified


def test_the_client_latencies_per_window_match_the_stubs_own(replayed: tuple[Any, Replay]) -> None:
    run, _ = replayed
    dense, _, sparse = results(replayed)
    # the stub's own TTFT of each window's requests: those between the window's two quiet pauses
    by_window = run.server_ttfts_by_level()
    assert [len(ttfts) for ttfts in by_window] == [24, 0, 3]
    for result, server in ((dense, by_window[0]), (sparse, by_window[2])):
        level = result.level
        assert level is not None and level.ttft.p90 is not None and level.tpot.p90 is not None
        truth = quantile(server, 0.9)
        assert truth is not None
        # the client's p90 is the server's plus the client's own time, which bench bounds at BOUND_S
        assert truth <= level.ttft.p90 < truth + BOUND_S, (level.ttft.p90, truth)
        assert 0.005 <= level.tpot.p90 < 0.015  # the stub's 5 ms per token, plus scheduling on a shared machine
        assert level.mean_output_tokens == sum(r.output_tokens for r in result.window.requests) / len(
            result.window.requests)  # ignore_eos: each answer is the trace's output_length


def test_arrivals_follow_the_trace_on_the_replay_clock(replayed: tuple[Any, Replay]) -> None:
    run, replay = replayed
    records = [json.loads(line) for line in (run.folder / "aiperf_window_0.jsonl").read_text().splitlines() if line]
    starts = sorted(r["metadata"]["request_start_ns"] / 1e9 for r in records)
    offsets = [start - starts[0] for start in starts]
    wanted = [r.at_s for r in replay.windows[0].requests]
    # 50 ms: aiperf schedules to the millisecond; its one event loop shares two cores with the stub and other jobs
    assert all(abs(got - want) < 0.05 for got, want in zip(offsets, wanted, strict=True)), (offsets, wanted)


def test_a_prefix_hash_is_the_same_text_wherever_it_repeats_in_a_window(replayed: tuple[Any, Replay]) -> None:
    run, _ = replayed
    long_prompts = [p for p in run.prompts_by_level()[0] if len(p.split()) == LONG]
    assert len(long_prompts) == 16
    counts = sorted((long_prompts.count(p) for p in set(long_prompts)), reverse=True)
    assert counts == [4] + [1] * 12  # the four rows with hash 7 sent one prompt; every other row its own


def test_the_report_carries_the_emulators_fields_per_window(replayed: tuple[Any, Replay]) -> None:
    _, replay = replayed
    windows = results(replayed)
    report = ReplayReport(endpoint="dpd-test", replay=replay, windows=windows, threshold=THRESHOLD)
    document = json.loads(report.to_json())
    assert report.healthy and document["trusted"] is True
    rows = document["windows"]
    assert [row["window_start_s"] for row in rows] == [0.0, 2.0, 4.0]
    assert [row["arrivals_per_s"] for row in rows] == [12.0, 0.0, 1.5]
    assert rows[0]["ttft_p90_s"] == windows[0].level.ttft.p90 and rows[0]["tpot_p90_s"] == windows[0].level.tpot.p90
    assert rows[1]["ttft_p90_s"] is None  # an empty window has no latency, not a zero
    assert [row["verified"] for row in rows] == [True, False, False]
    assert rows[0]["server"]["disaggregated"] == 16 and rows[0]["server"]["local"] == 8
    # docs/commands.md names every field of the object, of its replay and of each window
    line = next(row for row in (HERE.parents[1] / "docs" / "commands.md").read_text().splitlines()
                if row.startswith("| `bench --trace` |"))
    named = set(re.findall(r'"(\w+)"', line))
    assert set(document) | set(document["replay"]) | set(rows[0]) <= named
    table = report.render()
    assert "unverified (latencies shown, proof not claimed):\n  - window 2: only 3 requests" in table
    assert table.splitlines()[3].split()[-1] == "ok"  # the title, a blank line, the header, window 0


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
    assert replayed_as == {"speedup": SPEEDUP, "window_s": WINDOW_S, "windows": 3, "requests": 27, "too_long": 0}
    assert [w["server"]["disaggregated"] if w["server"] else None for w in document["windows"]] == [16, None, 3]
    assert [w["verified"] for w in document["windows"]] == [True, False, False] and document["trusted"] is True
    assert (document["model"], document["instance_type"]) == ("Llama-3.3-70B-Instruct", "ml.p5.48xlarge")


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
    (("--trace-speedup", "0"), "--trace-speedup: must be above 0"),
    (("--trace-window", "0.1"), "--trace-window: must be at least 1 second"),
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
    size = sum(len(data) for data in replay_container(plan_replay(tiny_trace(), speedup=SPEEDUP,
                                                                  window_s=WINDOW_S))[1].values())
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

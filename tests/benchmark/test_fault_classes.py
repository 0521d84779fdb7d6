"""Every fault class of the second bench audit, reproduced from a recorded run of the stub.

Each test runs the real ``bench`` CLI against a recorded cluster whose Job replays a run of the rendered benchmark
container against the stub (tests/benchmark/fake_openai.py), with the fault injected in the stub (a Behaviour knob)
or, where the fault is in what reaches bench (an S3 object, another pod), around its recorded counters and files.
Each prints bench's number beside the truth the stub recorded and asserts the two, so the test fails if bench
reports the fault's wrong number again.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from statistics import fmean
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from support import FakeClock, run_bench

from hyperpod_dpd.benchmark import Scenario
from hyperpod_dpd.benchmark.proof.overhead import BOUND_S, TAIL_BOUND_S
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.job import UPLOAD_MANIFEST
from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.load_point import Load

RUN = "20261201-0300"
JOB = f"bench-dpd-test-{RUN}"
ROUTERS = "hyperpod-inference-system"
DECODERS = "default|inference.sagemaker.aws.amazon.com/dpd-role=decode"
STUB_DECODER = "decode-dpd-test-7c9-xyz"  # the recorded cluster's decoder pod: the stub's decoder
STUB_ROUTER = "dpd-test-default-router-6d5f-abc"
ENGINE = 'engine="0",model_name="/opt/ml/model"'
BUCKET = "dpd-models-example"  # the default spec's model bucket: results go under its benchmarks/
UPLOADED = f"benchmarks/dpd-test/{RUN}/"
OSL = 16


def _traffic(requests: int = 8) -> tuple[str, ...]:
    return ("--run-id", RUN, "--concurrency", "2,4", "--isl", "64", "--osl", str(OSL), "--requests", str(requests),
            "--max-seconds", "60", "--client", "genai-bench")


def _scenario(requests: int = 8) -> Scenario:
    """The runs of this file: genai-bench at concurrency 2 and 4, as :func:`_traffic` asks bench for."""
    return Scenario(isl=64, osl=OSL, concurrency=(2, 4), requests=requests, max_seconds=60, client=Client.GENAI_BENCH)


def _fault_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, stub_runner: SimpleNamespace,
               name: str, requests: int = 8, **knobs: Any) -> Iterator[Any]:
    base = tmp_path_factory.mktemp(name)
    behaviour = stub_runner.Behaviour(first_token_s=0.02, per_token_s=0.005, **knobs)
    yield stub_runner.run_client(behaviour, tokenizer_dir, base, _scenario(requests))
    shutil.rmtree(base, ignore_errors=True)


KV_FAIL_EVERY = 2  # conftest's partial_kv_run: every second disaggregated request's transfer failed
RESTART_AT = 3  # the second level's third request: its counts before the restart are lost, the rest counted
HELD_EVERY, HELD_S = 20, 0.3  # one request in 20 held 300 ms before the router's clock: >= 1 per level of 24


@pytest.fixture(scope="module")
def restart_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path,
                stub_runner: SimpleNamespace) -> Iterator[Any]:
    """The router and the decoder restart inside the second level (the audit's gb-reset-mid)."""
    yield from _fault_run(tmp_path_factory, tokenizer_dir, stub_runner, "restart", restart_in_second_level=RESTART_AT)


@pytest.fixture(scope="module")
def held_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path,
             stub_runner: SimpleNamespace) -> Iterator[Any]:
    """24 requests a level, one in 20 held before the router's clock: a client tail the mean hides."""
    yield from _fault_run(tmp_path_factory, tokenizer_dir, stub_runner, "held", requests=24,
                          held_every=HELD_EVERY, held_s=HELD_S)


# --- the recorded cluster ---------------------------------------------------------------------------------------


class _Pods(dict[str, list[dict[str, Any]]]):
    """Pods by ``namespace|selector``; those in ``live`` are made at each read (their restart counts move)."""

    def __init__(self, pods: Mapping[str, list[dict[str, Any]]],
                 live: Mapping[str, Callable[[], list[dict[str, Any]]]]) -> None:
        super().__init__(pods)
        self.live = live

    def __contains__(self, key: object) -> bool:
        return key in self.live or super().__contains__(key)

    def __getitem__(self, key: str) -> list[dict[str, Any]]:
        return self.live[key]() if key in self.live else super().__getitem__(key)


def _cluster(fakes: ModuleType, run: Any, *, router: Callable[[str], str] = str,
             decoders: Mapping[str, Callable[[int, str], str]] | None = None,
             pods: Callable[[int], Mapping[str, list[dict[str, Any]]]] | None = None,
             printed: Mapping[str, str] | None = None) -> Any:
    """A recorded cluster where the Job replays ``run``: the router pod answers with the stub router's counters of
    the window the Job's log is in (through ``router``), each decoder pod by ``decoders`` (its name to a function
    of the window and the stub decoder's text; by default the stub's decoder alone), and ``pods`` (of the window)
    replaces the endpoint's pods; ``printed`` is the publish log's copy of the files (default: the run's)."""
    replayed = fakes.replay(run, JOB, printed=printed)
    answers = decoders or {STUB_DECODER: lambda window, text: text}

    def metrics(namespace: str, pod_port: str) -> str:
        stub_router, stub_decoder = run.metrics[replayed.current]
        if namespace == ROUTERS:
            return router(stub_router)
        name = pod_port.split(":", 1)[0]
        if name not in answers:  # as the API server answers for a pod that is not running
            raise fakes.api_error(503, f"pod {name} is not running")
        return answers[name](replayed.current, stub_decoder)

    job_pod = fakes.pod(f"{JOB}-x", init=[fakes.container("benchmark", "terminated")],
                        main=[fakes.container("publish", "terminated")])
    endpoint = fakes.router_and_decoder()
    live = {} if pods is None else {key: (lambda key=key: list(pods(replayed.current)[key])) for key in pods(0)}
    core = fakes.FakeCore(pods=[[job_pod]], logs={"benchmark": replayed.benchmark_log, "publish": replayed.publish},
                          other_pods=_Pods(endpoint, live), metrics=metrics)
    return fakes.benchmark_kube(fakes.FakeBatch(states=replayed.states), core)


@dataclasses.dataclass
class _S3:
    """bench's AWS seam, handing out moto's S3 client (``None``: bench must not read S3)."""

    client: Any = None

    def __call__(self, region: str | None, profile: str | None) -> AwsClients:
        if self.client is None:
            raise AssertionError("bench read S3 where it should not")
        return AwsClients(region=region or "us-west-2", factory=lambda service, region_name: self.client)


def _upload(s3: Any, files: Mapping[str, str], *, manifest: tuple[str, ...] | None = None) -> _S3:
    """The run folder as the publish container leaves it: ``files``, and its manifest naming ``manifest`` (default:
    every file)."""
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for name, body in files.items():
        s3.put_object(Bucket=BUCKET, Key=UPLOADED + name, Body=body.encode())
    listed = tuple(files) if manifest is None else manifest
    s3.put_object(Bucket=BUCKET, Key=UPLOADED + UPLOAD_MANIFEST, Body="\n".join(listed).encode())
    return _S3(s3)


def _bench(capsys: pytest.CaptureFixture[str], kube: Any, spec: str, *argv: str,
           aws: _S3 | None = None) -> tuple[int, dict[str, Any], str]:
    """``bench --json`` on the recorded cluster: its status, its DPD run's document and its standard error."""
    clock = FakeClock()
    seams = Seams(benchmark_kube=lambda context, config: kube, aws_clients=aws or _S3(), clock=clock,
                  sleep=clock.sleep)
    code, out, err = run_bench(capsys, spec, *argv, "--json", seams=seams)
    assert "Traceback" not in err, err
    return code, json.loads(out)["runs"]["dpd"], err


def _codes(run: Mapping[str, Any], code: str) -> list[int]:
    """The concurrencies of the levels warned of with ``code``."""
    return [w["concurrency"] for w in run["warnings"] if w["code"] == code]


def _words(prompts: tuple[str, ...] | list[str]) -> int:
    """The stub's prompt tokens of ``prompts`` (it counts words)."""
    return sum(len(prompt.split()) for prompt in prompts)


# --- B1: output throughput over the level's own time ------------------------------------------------------------


def test_b1_output_throughput_is_every_answered_token_over_the_levels_time(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, held_run: Any, stub_spec: str) -> None:
    """genai-bench divides its measured requests' tokens (its warm-up, the first tenth, left out) by the whole
    level's time (warm-up included): 10-22% low in the audit. The stub streamed OSL tokens to every answered request
    and counted every token it made (vllm:generation_tokens_total): OUT tok/s is the first over the level's time,
    SRV tok/s the second. (The run of 24 requests a level has a warm-up; its held requests change no token count.)"""
    _, run, _ = _bench(capsys, _cluster(fakes, held_run), stub_spec, *_traffic(24), "--no-upload")
    files = [json.loads(text) for name, text in sorted(held_run.files().items()) if "_num_concurrency_" in name]
    by_level = {f["aggregated_metrics"]["num_concurrency"]: f for f in files}
    routing = {row["concurrency"]: row for row in run["routing"]}
    for level in run["levels"]:
        data = by_level[level["concurrency"]]
        answered = [r for r in data["individual_request_metrics"] if r.get("error_code") is None]
        measured = data["aggregated_metrics"]["num_completed_requests"]
        own = data["aggregated_metrics"]["mean_output_throughput_tokens_per_s"]
        duration = level["duration_s"]
        truth = len(answered) * OSL / duration  # the stub answered every one of them whole, OSL tokens each
        streamed = held_run.routing()[Load(concurrency=level["concurrency"])]
        print(f"C={level['concurrency']}: OUT tok/s bench {level['output_tokens_per_s']:.1f}, stub "
              f"{truth:.1f} ({len(answered)} answered x {OSL} over {duration:.2f} s); genai-bench's own {own:.1f} "
              f"({measured} completed); SRV "
              f"{routing[level['concurrency']]['server_output_tokens_per_s']:.1f}, stub "
              f"{(streamed.generation_tokens or 0) / duration:.1f}")
        assert level["output_tokens_per_s"] == pytest.approx(truth, rel=1e-9)
        assert routing[level["concurrency"]]["server_output_tokens_per_s"] == pytest.approx(
            streamed.generation_tokens / duration, rel=1e-9)
        assert streamed.generation_tokens >= len(answered) * OSL  # cut requests streamed some tokens too
        assert own < 0.95 * truth  # genai-bench's own figure, its warm-up's tokens left out: the fault to catch


# --- B2: no router TTFT histogram -------------------------------------------------------------------------------


def _no_router_ttft(text: str) -> str:
    """The stub router's counters without dpd_e2e_ttft_seconds: routing counted, TTFT not timed."""
    return "".join(f"{line}\n" for line in text.splitlines() if "dpd_e2e_ttft" not in line)


def test_b2_a_router_without_its_ttft_histogram_leaves_every_level_unverified(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, healthy_run: Any, stub_spec: str) -> None:
    """The router counts its routing but serves no TTFT histogram: the client's TTFT still stands above the stub's
    own by the client's overhead (the truth, from the stub's clock), but bench has no server figure to show it.
    Before, the overhead check vanished and the level was trusted (exit 0); now each level says it is unverified."""
    code, run, _ = _bench(capsys, _cluster(fakes, healthy_run, router=_no_router_ttft), stub_spec, *_traffic(),
                          "--no-upload")
    truths = [fmean(ttfts) for ttfts in healthy_run.server_ttfts_by_level()]
    for level, row, server in zip(run["levels"], run["routing"], truths, strict=True):
        client = level["client_ttft_mean_s"]
        print(f"C={level['concurrency']}: client TTFT mean {client * 1e3:.1f} ms, stub {server * 1e3:.1f} ms "
              f"(overhead {(client - server) * 1e3:+.1f} ms); bench's server figure {row['router_ttft_mean_s']}, "
              f"overhead {row['client_overhead_s']}")
        assert client > server  # what the client added is there, unseen by bench
        assert row["router_ttft_mean_s"] is None and row["client_overhead_s"] is None
        assert row["fraction"] == 1.0  # the routing counts are still the router's
    unverified = [w for w in run["warnings"] if w["code"] == "client-overhead-unknown"]
    assert [w["concurrency"] for w in unverified] == [2, 4], run["warnings"]
    assert "could not be measured" in unverified[0]["message"]
    assert code == 1 and run["trusted"] is False


# --- B3 and M5: a partial KV failure, and the pods that are the endpoint's ------------------------------------------


def _kv_truth(run: Any) -> list[tuple[int, int]]:
    """Per level, the stub's (KV tokens transferred, prompt tokens): every request was disaggregated, and each
    KV_FAIL_EVERY-th one's transfer failed (its prompt recomputed)."""
    marks = [run.prompts_seen[window] for window in sorted(run.prompts_seen)]
    found = []
    for start, end in itertools.pairwise(marks):
        whole = [p for i, p in enumerate(run.prompts[start:end], start) if (i + 1) % KV_FAIL_EVERY]
        found.append((_words(whole), _words(run.prompts[start:end])))
    return found


def _assert_partial_kv(run: Mapping[str, Any], truth: list[tuple[int, int]]) -> None:
    flagged = {w["concurrency"]: w["message"] for w in run["warnings"] if w["code"] == "partial-kv-transfer"}
    assert sorted(flagged) == [2, 4], run["warnings"]
    for row, (transferred, prompt) in zip(run["routing"], truth, strict=True):
        print(f"C={row['concurrency']}: KV IN bench {row['external_kv_tokens']:,} of {row['prompt_tokens']:,}; stub "
              f"{transferred:,} transferred of {prompt:,} prompt tokens")
        assert (row["external_kv_tokens"], row["prompt_tokens"]) == (transferred, prompt)
        assert f"took {transferred:,} prompt tokens" in flagged[row["concurrency"]]
        assert f"{transferred / prompt:.0%} of the {prompt:,}" in flagged[row["concurrency"]]


def test_b3_a_partial_kv_failure_is_flagged_with_the_stubs_counts(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, partial_kv_run: Any, stub_spec: str) -> None:
    """Half the disaggregated requests' transfers failed: KV IN is about half the prompt tokens. Before, only a
    level total of exactly zero was flagged, and this one passed."""
    code, run, _ = _bench(capsys, _cluster(fakes, partial_kv_run), stub_spec, *_traffic(), "--no-upload")
    _assert_partial_kv(run, _kv_truth(partial_kv_run))
    assert [r["fraction"] for r in run["routing"]] == [1.0, 1.0] and code == 1


SIBLING = "decode-dpd-test-70b-5f4-qrs"  # endpoint dpd-test-70b's decoder: the same name prefix, another Deployment
EVICTED = "decode-dpd-test-7c9-old"  # this endpoint's pod, Evicted: it answers nothing


def _sibling(window: int, text: str) -> str:
    """A busy sibling endpoint whose transfers are whole: 40 prompts of 4,352 tokens every window."""
    tokens = 2_000_000 + window * 40 * 4352
    return (f'vllm:prompt_tokens_by_source_total{{{ENGINE},source="external_kv_transfer"}} {tokens}.0\n'
            f"vllm:prompt_tokens_total{{{ENGINE}}} {tokens}.0\n")


def test_m5_another_endpoints_decoders_and_an_evicted_pod_change_nothing(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, partial_kv_run: Any, stub_spec: str) -> None:
    """The same partial failure, with endpoint dpd-test-70b's busy decoder beside the stub's (its name shares the
    prefix decode-dpd-test-) and an Evicted pod of this endpoint. Before, the name prefix summed the sibling's
    whole transfers in (the failure hidden), and the Evicted pod's failed read made every level routing-unknown."""
    def pods(window: int) -> dict[str, list[dict[str, Any]]]:
        return {DECODERS: [fakes.decoder_pod(STUB_DECODER), fakes.decoder_pod(SIBLING),
                           fakes.decoder_pod(EVICTED, phase="Failed")]}

    kube = _cluster(fakes, partial_kv_run, decoders={STUB_DECODER: lambda window, text: text, SIBLING: _sibling},
                    pods=pods)
    code, run, _ = _bench(capsys, kube, stub_spec, *_traffic(), "--no-upload")
    _assert_partial_kv(run, _kv_truth(partial_kv_run))
    assert "routing-unknown" not in {w["code"] for w in run["warnings"]} and code == 1
    assert all(row["pod_changes"] == [] for row in run["routing"])


# --- B5 and M6: one pod of two restarting mid-level ---------------------------------------------------------------


IDLE_DECODER = "decode-dpd-test-7c9-abc"  # a second decoder of the endpoint, idle through the run


def _idle(window: int, text: str) -> str:
    """Its lifetime counters from before the run, unchanged by it."""
    return (f'vllm:prompt_tokens_by_source_total{{{ENGINE},source="external_kv_transfer"}} 650000.0\n'
            f"vllm:prompt_tokens_total{{{ENGINE}}} 650000.0\nvllm:generation_tokens_total{{{ENGINE}}} 40000.0\n")


def test_b5_m6_a_restart_counts_per_pod_and_is_reported(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, restart_run: Any, stub_spec: str) -> None:
    """The stub's router and decoder restarted inside the second level (their restart counts rose; kubelet's), a
    second decoder idle with its lifetime counters. Before, resets were read on the sum over pods (the idle pod's
    lifetime became the level's KV IN, or the level's count went short by the first level's) and never mentioned;
    now each pod counts from its own restart, and the level says the counts before it are lost."""
    marks = {window: seen for window, seen in sorted(restart_run.prompts_seen.items())}
    at = marks[1] + RESTART_AT  # the request the restart came before (armed when the first level went quiet)
    restarted = min(window for window, seen in marks.items() if seen >= at)
    assert restarted == 2 and marks[1] < at  # the restart fell inside the second level

    def pods(window: int) -> dict[str, list[dict[str, Any]]]:
        count = int(window >= restarted)
        return {f"{ROUTERS}|": [fakes.router_pod(STUB_ROUTER, restarts=count)],
                DECODERS: [fakes.decoder_pod(STUB_DECODER, restarts=count), fakes.decoder_pod(IDLE_DECODER)]}

    kube = _cluster(fakes, restart_run, decoders={STUB_DECODER: lambda window, text: text, IDLE_DECODER: _idle},
                    pods=pods)
    code, run, _ = _bench(capsys, kube, stub_spec, *_traffic(), "--no-upload")
    first, second = restart_run.prompts_by_level()
    after = restart_run.prompts[at - 1:marks[2]]  # what the restarted pods counted of the second level
    expected = [(len(first), _words(first)), (len(after), _words(after))]
    for row, level, (routed, tokens) in zip(run["routing"], (first, second), expected, strict=True):
        print(f"C={row['concurrency']}: DISAGG bench {row['disaggregated']}, KV IN {row['external_kv_tokens']:,}; "
              f"stub {len(level)} requests ({_words(level):,} tokens), {routed} ({tokens:,}) since a restart")
        assert (row["disaggregated"], row["external_kv_tokens"]) == (routed, tokens)
    assert run["routing"][0]["pod_changes"] == []
    assert run["routing"][1]["pod_changes"] == [f"router/{STUB_ROUTER} restarted", f"decoder/{STUB_DECODER} restarted"]
    (warning,) = [w for w in run["warnings"] if w["code"] == "pod-restarted"]
    assert warning["concurrency"] == 4 and f"decoder/{STUB_DECODER} restarted" in warning["message"]
    assert code == 1


# --- B6, M7 and M10: what reaches bench of the run's files ---------------------------------------------------------


def _level_file(run: Any, concurrency: int) -> str:
    return next(name for name in sorted(run.files()) if f"_num_concurrency_{concurrency}_" in name)


def _p50s(files: Mapping[str, str]) -> dict[int, float]:
    """The client's TTFT p50 per concurrency, as its own files hold it (seconds)."""
    found = {}
    for name, text in files.items():
        if "_num_concurrency_" in name:
            metrics = json.loads(text)["aggregated_metrics"]
            found[metrics["num_concurrency"]] = metrics["stats"]["ttft"]["p50"]
    return found


def test_b6_an_earlier_runs_object_under_the_same_run_id_is_not_this_runs_level(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, healthy_run: Any, short_run: Any, stub_spec: str, *,
        s3: Any) -> None:
    """The run folder also holds an earlier run's level file under the same --run-id (a recorded run whose server
    stopped every answer at 4 tokens), named to sort after this run's. Before, it replaced this run's level: bench
    reported its 4 tokens an answer against the 16 the stub streamed in this run."""
    fresh = _level_file(healthy_run, 2)
    stale = re.sub(r"_time_[^_]+s\.json$", "_time_99s.json", fresh)
    assert stale > fresh  # the earlier run's name sorts last: the one a sort-order read took
    files = {**healthy_run.files(), stale: short_run.files()[_level_file(short_run, 2)]}
    aws = _upload(s3, files, manifest=tuple(healthy_run.files()))
    code, run, err = _bench(capsys, _cluster(fakes, healthy_run), stub_spec, *_traffic(), aws=aws)
    level = next(level for level in run["levels"] if level["concurrency"] == 2)
    print(f"C=2: bench {level['mean_output_tokens']} tokens an answer, TTFT p50 {level['ttft_s']['p50'] * 1e3:.1f} ms; "
          f"this run's stub streamed {OSL} (max_output_tokens {healthy_run.behaviour.max_output_tokens}), the earlier "
          f"run's {short_run.behaviour.max_output_tokens}")
    assert level["mean_output_tokens"] == OSL and "output-length" not in {w["code"] for w in run["warnings"]}
    assert level["ttft_s"]["p50"] == _p50s(healthy_run.files())[2]
    assert f"that this run did not upload ({stale})" in err and code in (0, 1)


def _cut(text: str) -> str:
    return text[:len(text) // 2]


def test_m7_a_cut_copy_is_replaced_by_the_whole_one_or_reported_as_its_level(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, healthy_run: Any, stub_spec: str, *, s3: Any) -> None:
    """The S3 copy of the first level's file is cut mid-JSON. With the log's copy whole, bench reads the level from
    it; with the log's cut too, the level is level-not-run and says why, the other level is reported and the run
    exits 1. Before: exit 2 (a usage error) and no level reported."""
    name = _level_file(healthy_run, 2)
    files = healthy_run.files()
    aws = _upload(s3, {**files, name: _cut(files[name])})
    code, run, _ = _bench(capsys, _cluster(fakes, healthy_run), stub_spec, *_traffic(), aws=aws)
    assert {level["concurrency"]: level["ttft_s"]["p50"] for level in run["levels"]} == _p50s(files)
    assert "level-not-run" not in {w["code"] for w in run["warnings"]} and code in (0, 1)
    code, run, _ = _bench(capsys, _cluster(fakes, healthy_run, printed={**files, name: _cut(files[name])}), stub_spec,
                          *_traffic(), aws=aws)
    served = len(healthy_run.prompts_by_level()[0])
    (lost,) = [w for w in run["warnings"] if w["code"] == "level-not-run"]
    print(f"C=2: the stub served {served} requests; bench: {lost['message']}")
    assert served > 0 and lost["concurrency"] == 2 and f"no readable result: {name}: not JSON" in lost["message"]
    assert [level["concurrency"] for level in run["levels"]] == [4]
    assert run["levels"][0]["ttft_s"]["p50"] == _p50s(files)[4] and code == 1


def test_m10_a_level_lost_on_the_way_is_not_called_a_failed_level(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, healthy_run: Any, stub_spec: str, *, s3: Any) -> None:
    """The first level's file is in neither copy (the log rotated past it, the upload lost it), though the stub
    served that level whole. Before: "stops after a level where every request failed, or the run hit its deadline"."""
    name = _level_file(healthy_run, 2)
    kept = {n: text for n, text in healthy_run.files().items() if n != name}
    code, run, _ = _bench(capsys, _cluster(fakes, healthy_run, printed=kept), stub_spec, *_traffic(),
                          aws=_upload(s3, kept))
    served = len(healthy_run.prompts_by_level()[0])
    (lost,) = [w for w in run["warnings"] if w["code"] == "level-not-run"]
    print(f"C=2: the stub served {served} requests, every one answered; bench: {lost['message']}")
    assert served > 0 and healthy_run.served == len(healthy_run.prompts)
    assert lost["concurrency"] == 2 and lost["message"].startswith("the level ran (a later level has results)")
    assert "every request failed" not in lost["message"] and code == 1


# --- M1: the overhead's tail -------------------------------------------------------------------------------------


def test_m1_a_client_tail_the_mean_hides_is_flagged_at_p99(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, held_run: Any, stub_spec: str) -> None:
    """One request in 20 waited 300 ms before the router's clock started: the mean overhead stays within its 50 ms
    bound, but the client's p99 is far above the router's. Before, only the mean was bounded and the level passed."""
    code, run, _ = _bench(capsys, _cluster(fakes, held_run), stub_spec, *_traffic(24), "--no-upload")
    flagged = {w["concurrency"]: w["message"] for w in run["warnings"] if w["code"] == "client-overhead"}
    marks = [held_run.prompts_seen[window] for window in sorted(held_run.prompts_seen)]
    for row, level, ttfts, start, end in zip(run["routing"], run["levels"], held_run.server_ttfts_by_level(), marks,
                                             marks[1:], strict=False):
        p99 = row["client_overhead_quantiles"]["p99"]
        held = [n for n in range(start + 1, end + 1) if n % HELD_EVERY == 0]
        print(f"C={row['concurrency']}: mean overhead {row['client_overhead_s'] * 1e3:+.1f} ms (bound "
              f"{BOUND_S * 1e3:.0f}); p99 client {p99['client_s'] * 1e3:.0f} ms, at least "
              f"{p99['overhead_at_least_s'] * 1e3:+.0f} ms over the router (bound {p99['bound_s'] * 1e3:.0f}); stub: "
              f"{len(held)} of {end - start} requests held {HELD_S * 1e3:.0f} ms, its own TTFT at most "
              f"{max(ttfts) * 1e3:.1f} ms")
        assert held and row["client_overhead_s"] < BOUND_S  # the fault: a tail the mean does not show
        assert p99["bound_s"] == TAIL_BOUND_S and p99["overhead_at_least_s"] > TAIL_BOUND_S
        assert p99["overhead_at_least_s"] <= p99["client_rank_s"] - max(ttfts)  # the proof.s k-th answer
        assert f"TTFT p99 is {p99['client_rank_s'] * 1e3:.0f} ms" in flagged[level["concurrency"]]
    assert sorted(flagged) == [2, 4] and code == 1


# --- M4: a decoder prefix-cache hit is not a failed transfer -------------------------------------------------------


PREFIX_BLOCK = 8  # the stub decoder's prefix cache block, in words (conftest's prefix_run, which cached_run reads)


def _cache_hits(prompts: tuple[str, ...]) -> int:
    """The tokens of ``prompts`` the stub's prefix cache held (its leading whole blocks seen before, in order)."""
    seen: set[tuple[str, ...]] = set()
    hits = 0
    for prompt in prompts:
        words = prompt.split()
        for end in range(PREFIX_BLOCK, len(words) + 1, PREFIX_BLOCK):
            hits += PREFIX_BLOCK * (tuple(words[:end]) in seen)
            seen.add(tuple(words[:end]))
    return hits


def test_m4_a_decoder_prefix_cache_hit_is_not_a_failed_transfer(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, cached_run: Any, stub_spec: str) -> None:
    """Every request disaggregated and every transfer whole, but the decoder already held each prompt's shared prefix:
    vLLM books those tokens local_cache_hit, so KV IN is about half the prompt tokens. Before, bench read only
    external_kv_transfer: a whole prompt cached was "recomputed every prompt", a half one a partial KV failure."""
    traffic = ("--run-id", RUN, "--concurrency", "4", "--isl", "64", "--osl", str(OSL), "--requests", "24",
               "--max-seconds", "60", "--prefix-share", "0.5", "--no-upload")  # conftest's prefix_run
    _, run, _ = _bench(capsys, _cluster(fakes, cached_run), stub_spec, *traffic)
    (prompts,) = cached_run.prompts_by_level()
    hits, tokens = _cache_hits(prompts), _words(prompts)
    (row,) = run["routing"]
    print(f"C=4: bench KV IN {row['external_kv_tokens']:,} + cache hits {row['cache_hit_tokens']:,} of "
          f"{row['prompt_tokens']:,}; stub {tokens - hits:,} transferred + {hits:,} cached of {tokens:,}")
    assert (row["external_kv_tokens"], row["cache_hit_tokens"], row["prompt_tokens"]) == (tokens - hits, hits, tokens)
    assert row["fraction"] == 1.0 and row["external_kv_tokens"] < 0.9 * tokens  # the fault: KV IN alone falls short
    codes = {w["code"] for w in run["warnings"]}
    assert not codes & {"partial-kv-transfer", "no-kv-transfer"}, run["warnings"]
